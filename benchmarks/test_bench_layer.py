"""Benchmarks (not part of the default test run): ``python -m pytest benchmarks``.

Model F layer, n = 2, d = 16, 10^4 paths: path-steps per second of the layer alone, of the full
forward simulation (per-path seeded draws + layers), and, beside them, the time to draw the same
random numbers alone. ``extra_info`` holds path-steps per second.
"""

import numpy as np
import pytest

from convergence.fedorov import FedorovModel
from convergence.simulate import simulate

PATHS, TOKENS, DIM, DEPTH = 10_000, 2, 16, 64
H = 1.0 / DEPTH


@pytest.fixture(scope="module")
def model():
    return FedorovModel(tokens=TOKENS, dim=DIM, beta=1.0)


def _record(benchmark, path_steps):
    benchmark.extra_info["path_steps_per_s"] = path_steps / benchmark.stats.stats.mean


def test_layer_step_only(benchmark, model):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((PATHS, TOKENS, DIM))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    dw = rng.standard_normal((PATHS, DIM, DIM)) * np.sqrt(H / DIM)
    benchmark(model.layer, x, dw, H)
    _record(benchmark, PATHS)


def test_draw_one_step_of_increments_bulk(benchmark, model):
    rng = np.random.default_rng(0)
    benchmark(rng.standard_normal, (PATHS, DIM, DIM))
    _record(benchmark, PATHS)


class NoiseOnly:
    """A layer that ignores its noise: simulating it costs exactly the seeded draws and the loop."""

    def __init__(self, model):
        self.tokens, self.dim, self.noise = model.tokens, model.dim, model.noise

    def layer(self, x, dw, h):
        return x


def test_draw_increments_as_the_simulation_does(benchmark, model):
    benchmark.pedantic(simulate, args=(NoiseOnly(model), DEPTH, 1.0, PATHS, 0), kwargs={"block_paths": 2560},
                       rounds=3, iterations=1)
    _record(benchmark, PATHS * DEPTH)


def test_forward_simulation(benchmark, model):
    benchmark.pedantic(simulate, args=(model, DEPTH, 1.0, PATHS, 0), kwargs={"block_paths": 2560},
                       rounds=3, iterations=1)
    _record(benchmark, PATHS * DEPTH)


def test_forward_simulation_reduced_sampler(benchmark, model):
    from convergence.reduced import ReducedFedorov

    benchmark.pedantic(simulate, args=(ReducedFedorov(model), DEPTH, 1.0, PATHS, 0), kwargs={"block_paths": 2560},
                       rounds=3, iterations=1)
    _record(benchmark, PATHS * DEPTH)
