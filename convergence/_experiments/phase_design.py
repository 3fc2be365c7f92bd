"""The phase transition's design (``PhaseDesign``: the two-token grid of (d, beta, rho_0), the n-token runs, the
hybrid dichotomy), its profiles (``PHASE_DESIGNS``), each cell's horizon from the slower end's time scale
(``phase_horizon``) and its paths planned from the predicted probability (``planned_paths``)."""

from __future__ import annotations

from dataclasses import dataclass

import verify

from .._statistics import detectable_effect, excess_resolution, wilson, z_confidence
from .overlap_ends import MAX_UNDECIDED

HORIZON_FACTOR = 30.0  # the horizon in units of the slower end's time scale 1 / |lambda|
PLAN_DIVISORS = (4, 2, 1)  # a grid cell runs paths / 4, paths / 2 or paths (``planned_paths``)


@dataclass(frozen=True)
class PhaseDesign:
    """Two-token grid, then n-token classification (``many_*``) and the hybrid dichotomy (``hybrid_*``)."""

    dims: tuple[int, ...]
    beta_factors: tuple[float, ...]  # multiples of beta_c(d); for d = 3 (beta_c = 0) BETAS_D3 instead
    betas_d3: tuple[float, ...]
    rho0s: tuple[float, ...]
    paths: int
    step: float  # sigma^2 h
    max_horizon: float
    many_tokens: tuple[int, ...] = (3, 4, 8)
    many_dim: int = 4
    many_beta_factors: tuple[float, ...] = (0.5, 1.5, 4.5)
    many_paths: int = 200
    many_horizon: float = 40.0
    # the n-token runs' sigma^2 h: their checks classify end configurations (antipodal pairs persist, the noise-free
    # flow collapses) and claim no rate, so they need not run at the two-token grid's step (None: ``step``)
    many_step: float | None = None
    hybrid_betas: tuple[float, ...] = (0.5, 1.0)
    hybrid_factors: tuple[float, ...] = (0.5, 2.0)  # eps^2 / eps_c^2
    hybrid_paths: int = 300
    hybrid_step: float = 0.002
    # compute block: one per run, the runs side by side (no number depends on it); a block of 2000 paths costs 6-11%
    # less CPU than two, the chain's steps on arrays of shape (paths,) being call-bound
    block_paths: int = 2048
    # The largest errors the checks may miss: in the antipodal probability, and in a fraction claimed small (runs
    # undecided at the horizon, still merging, at the wrong end) or claimed positive (antipodal pairs persisting).
    probability_target: float = 0.075
    fraction_target: float = 0.08
    # hybrid_dichotomy's allowance is its undecided fraction (up to 7% at the full profile), so its target is wider
    hybrid_target: float = 0.15
    # a grid cell's probability check is planned to resolve this share of its target at the predicted probability;
    # the rest is left to the allowance (undecided runs, up to 0.02 where the horizon is capped) and the estimate's
    # scatter about the prediction (``planned_paths``)
    plan_margin: float = 0.6

    @property
    def many_tokens_step(self) -> float:
        """The n-token runs' sigma^2 h: ``many_step``, else the two-token grid's ``step``."""
        return self.step if self.many_step is None else self.many_step


PHASE_DESIGNS = {
    "quick": PhaseDesign(
        dims=(3, 8),
        beta_factors=(0.6, 1.5, 2.5),
        betas_d3=(0.5, 1.0, 2.0),
        rho0s=(0.0, -0.9),
        paths=400,
        step=0.01,
        max_horizon=80.0,
        many_paths=100,
        probability_target=0.15,
        fraction_target=0.2,
        hybrid_target=0.2,
    ),
    "full": PhaseDesign(
        dims=(3, 4, 8, 16),
        beta_factors=(0.5, 0.65, 0.8, 0.9, 1.1, 1.25, 1.6, 2.5),
        betas_d3=(0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5),
        rho0s=(0.0, -0.9),
        paths=2000,
        step=0.0025,
        max_horizon=80.0,
        many_paths=500,
        many_step=0.01,  # the quick profile's step (the grid's is 4 times finer): 4000 layers to T = 40, not 16000
        hybrid_paths=2000,
        many_beta_factors=(0.5, 0.8, 1.25, 1.6, 2.5, 4.5),
    ),
}


def planned_paths(design: PhaseDesign, predicted: float, z: float) -> int:
    """The runs of one grid cell: the fewest of ``design.paths`` / 4, / 2 and / 1 at which (i) the probability check's
    resolution at the predicted probability, ``detectable_effect`` of the Wilson interval (at ``z``) of
    round(predicted n) of n runs, is at most ``design.plan_margin`` x ``design.probability_target``, and (ii) the
    undecided check's resolution, ``excess_resolution(n, MAX_UNDECIDED, z)`` (a function of n alone), is at most
    ``design.fraction_target``. A cell whose prediction is near 0 or 1 decides with fewer runs (binomial variance
    p (1 - p)); one near 1/2 takes them all.

    The plan depends on the claim under test (its prediction) and the design, never on the runs, so every interval
    keeps its level. A wrong prediction changes only how many runs its cell gets: its check states the resolution
    its runs give, and is inconclusive when that exceeds the target."""
    confidence = z_confidence(z)
    for divisor in PLAN_DIVISORS:
        paths = design.paths // divisor
        probability = detectable_effect(wilson(round(predicted * paths), paths, z), 0.0, confidence)
        if (
            probability <= design.plan_margin * design.probability_target
            and excess_resolution(paths, MAX_UNDECIDED, z) <= design.fraction_target
        ):
            return paths
    return design.paths


def phase_horizon(dim: int, beta: float, design: PhaseDesign) -> float:
    """T = C / min |lambda| over the two ends (sigma = 1), capped at ``max_horizon``."""
    plus, minus = (abs(float(v)) for v in verify.boundary_exponents(dim, float(beta), 1))
    return min(design.max_horizon, HORIZON_FACTOR / max(min(plus, minus), 1e-12))
