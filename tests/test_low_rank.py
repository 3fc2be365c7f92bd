"""The exact low-rank coupling of the depth ladder: pathwise identity with the full-matrix coupling when fed
G_k = dW_k Q_k, the same law of the strong errors with its own draws, and block-size independence."""

import numpy as np
import pytest
from scipy import stats

from convergence._experiments import (
    REFERENCE_LEVELS,
    FedorovAction,
    FedorovEulerAction,
    StrongDesign,
    coupled_strong_errors,
    coupled_strong_errors_low_rank,
    frame,
    run_low_rank_coupled,
    strong_ladder,
)
from convergence._models import FedorovModel
from convergence._paths import EulerMaruyama, Level, run_coupled

from .helpers import assert_equal_to_rounding, random_tokens


class _Path:
    """A fixed full-matrix Brownian path delivered like ``BrownianBlock`` (chunks in time order)."""

    def __init__(self, model, increments, h):
        self.noise, self.increments, self.h, self.done = model.noise, increments, h, 0

    @property
    def paths(self):
        return self.increments.shape[0]

    def next(self, steps):
        out = self.increments[:, self.done : self.done + steps]
        self.done += steps
        return out


@pytest.mark.parametrize("dim", [16, 5])  # m = 14 < d: a proper frame; m >= d: the identity frame
def test_fed_the_full_matrix_path_the_low_rank_run_is_the_full_matrix_run(rng, dim):
    model = FedorovModel(2, dim, beta=1.5)
    design = StrongDesign(depths=(8, 16, 32), horizon=1.0, reference_factor=8, paths=8)
    fine, h = design.fine_steps, design.h_fine
    dw = model.sigma * np.sqrt(h) * rng.standard_normal((design.paths, fine, dim, dim))
    x0 = random_tokens(rng, design.paths, 2, dim)
    levels, comparisons = strong_ladder(design, FedorovAction(model), FedorovEulerAction(model.limit_sde()))
    full_levels = [Level(f"L={L}", model, fine // L) for L in design.depths]
    full_levels += [Level(f"EM x{f}", EulerMaruyama(model.limit_sde()), f) for f in REFERENCE_LEVELS]
    full = run_coupled(full_levels, comparisons, x0, _Path(model, dw, h), fine)
    low = run_low_rank_coupled(levels, comparisons, x0, lambda k, q: dw[:, k] if q is None else dw[:, k] @ q, fine, h)
    for a, b in zip(full.final, low.final):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-12)
    np.testing.assert_allclose(low.sup_sq, full.sup_sq, rtol=1e-9, atol=1e-15)


def test_frame_is_orthonormal_and_spans_dependent_vectors(rng):
    v = random_tokens(rng, 4, 6, 16)
    v[:, 3] = v[:, 0]  # merged tokens: dependent vectors
    q = frame(v)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(6), (4, 6, 6)), atol=1e-13)
    np.testing.assert_allclose((v @ q) @ np.swapaxes(q, -1, -2), v, atol=1e-13)
    assert frame(random_tokens(rng, 2, 16, 16)) is None


def test_strong_errors_have_the_law_of_the_full_matrix_coupling():
    """Different random numbers, same law: the squared distance of the coarsest level to the reference at T
    (two-sample Kolmogorov-Smirnov at 1%, 1024 paths each), d = 32 (m = 14)."""
    model = FedorovModel(2, 32, beta=1.0)
    design = StrongDesign(depths=(4, 8, 16), horizon=1.0, reference_factor=8, paths=1024, block_paths=512)
    low = coupled_strong_errors_low_rank(model, design, 0, (5,))
    full = coupled_strong_errors(model, model.limit_sde(), design, 0, (6,))
    assert stats.ks_2samp(low.final_sq[:, 0], full.final_sq[:, 0]).pvalue > 0.01
    assert stats.ks_2samp(low.reference_sq[:, 0], full.reference_sq[:, 0]).pvalue > 0.01


def test_low_rank_results_do_not_depend_on_the_block_size():
    model = FedorovModel(2, 32, beta=1.0)
    runs = [
        coupled_strong_errors_low_rank(
            model, StrongDesign(depths=(8, 16), horizon=1.0, reference_factor=8, paths=192, block_paths=b), 3, (7,)
        )
        for b in (64, 192)
    ]
    assert_equal_to_rounding(runs[0].final_sq, runs[1].final_sq)
    assert_equal_to_rounding(runs[0].sup_sq, runs[1].sup_sq)
