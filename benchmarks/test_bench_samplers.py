"""Benchmarks (not part of the default test run): ``python -m pytest benchmarks``.

The workloads of ``convergence._performance.benchmark`` (model F, n = 2, d = 16, 4096 paths, 64 steps) under
pytest-benchmark; ``extra_info`` holds path-steps per second. ``python -m convergence bench`` runs the
same measurements side by side (with the process cluster and the peers) and writes the ratios.
"""

import numpy as np
import pytest

from convergence._models import FedorovModel, ReducedFedorov
from convergence._paths import EulerMaruyama, simulate
from convergence._performance.peers import diffrax_euler, torchsde_euler
from convergence._performance.workload import BenchConfig, draw_only, per_path_loop

CONFIG = BenchConfig()
H = 1.0 / CONFIG.steps
MODEL = FedorovModel(CONFIG.tokens, CONFIG.dim, 1.0)
SAMPLERS = {"layer_full": MODEL, "layer_reduced": ReducedFedorov(MODEL), "euler_sde": EulerMaruyama(MODEL.limit_sde())}


def _pedantic(benchmark, run, path_steps):
    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    benchmark.extra_info["path_steps_per_s"] = path_steps / benchmark.stats.stats.min


def test_draw_only(benchmark):
    _pedantic(benchmark, lambda: draw_only(MODEL, CONFIG.paths, CONFIG.steps, H), CONFIG.paths * CONFIG.steps)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_sampler(benchmark, name):
    run = lambda: simulate(SAMPLERS[name], CONFIG.steps, 1.0, CONFIG.paths, seed=0, block_paths=CONFIG.paths)
    _pedantic(benchmark, run, CONFIG.paths * CONFIG.steps)


def test_per_path_loop(benchmark):
    x0 = np.random.default_rng(1).standard_normal((CONFIG.loop_paths, CONFIG.tokens, CONFIG.dim))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    _pedantic(benchmark, lambda: per_path_loop(MODEL, x0, CONFIG.steps, H), CONFIG.loop_paths * CONFIG.steps)


@pytest.mark.parametrize("build", [diffrax_euler, torchsde_euler], ids=["diffrax", "torchsde"])
def test_peer(benchmark, build):
    run = build(CONFIG, float(MODEL.sigma))
    if run is None:
        pytest.skip(f"{build.__name__}: peer not installed (extra [peers])")
    _pedantic(benchmark, run, CONFIG.paths * CONFIG.steps)
