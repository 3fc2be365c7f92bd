"""Strong (pathwise) convergence of a layer map to its limit SDE, for any model with Brownian noise.

Experiment: for each path, one Brownian path at the finest step ``h_ref = T / (R L_max)`` drives
  - the layer map at every depth L (step T/L, increments = block sums),
  - the reference: Ito Euler-Maruyama for the limit SDE in R^d at steps h_ref, 2 h_ref, 4 h_ref, 8 h_ref.
Measured per path: the token-mean squared distance between each depth and the finest reference at
the final time and its maximum over the depth's grid times, and the distances between consecutive
reference levels (the reference's own convergence).

Claims checked (``analyse_strong`` in ``strong_checks``; same_limit in ``strong_same_limit``):
  strong_order       RMS error at T ~ C h^p, p = 1/2 (rate).
  strong_order_sup   RMS of the max over grid times ~ C h^p, p = 1/2 (rate).
                     In the public check (``StrongDesign.for_users``) both orders are fitted over the ladder's levels
                     of one rate (``statistics.one_rate_levels``), not over a coarse end that still bends.
  reference_order    consecutive reference differences ~ C h^p, p = 1/2 (the reference converges).
  same_limit         mean-square plateau B in ms(h) = A h^{2p} + B, p = the *claimed* order, is 0 up to
                     the reference's own mean-square error (the layer map and the reference have the same
                     limit). The rate is the claim's, never the fitted one: a plateau pulls a fitted slope
                     down and A h^{2 p_fitted} then absorbs it (B comes out near 0, even below 0). The
                     fitted-rate plateau is printed beside it as a diagnostic only. Against an exact reference
                     (allowance: rounding) a plateau that moves by half its size when the coarsest fitted level is
                     dropped is a pre-asymptotic ladder, not a second limit: inconclusive, never fail.

Each check states its resolution (``Check.resolution``): the smallest order deviation, or the smallest
plateau, it rejects with probability ``StrongDesign.power`` (90%, or 1 - 0.1/K at one of K staged looks) at this
sample size. With a ``StrongDesign.target`` t, same_limit passes only when its resolution is at most the plateau
that the claim with its drift x (1 + t) leaves on the same paths (``StrongData.target_sq``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from verify._common import check_int, check_real

from .._models import LayerMap, LimitSDE
from .._paths import (
    BrownianBlock,
    DepthLadder,
    EulerMaruyama,
    InitialState,
    Level,
    PathStreams,
    run_coupled,
    run_seeded,
    uniform_sphere,
)
from .._runtime import STREAM_KEYS, concatenate_blocks, random_stream
from .._statistics import DEEPER, DETECTION_POWER, FAIL, INCONCLUSIVE, Check
from .mutants import DriftScaled

REFERENCE_LEVELS = (1, 2, 4, 8)
REFERENCE_ORDER = 0.5  # Euler-Maruyama's strong order: the reference's claim, separate from the map's ``order``
BOOTSTRAP_STREAM = STREAM_KEYS["derived"]
# same_limit's default target: a 20% relative drift error. At reference_factor 16 the Euler reference's own mean-square
# error (the allowance) hides smaller drift errors (model F, n = 2, d = 16: a 5% error leaves a plateau of 1.9e-4 below
# the reference's 3.4e-4); coefficient errors are the local check's to resolve.
DRIFT_TARGET = 0.2


@dataclass(frozen=True)
class StrongDesign(DepthLadder):
    """A depth ladder with the reference refinement R (the reference steps at T / (R L_max))."""

    reference_factor: int = 16
    order: float = 0.5
    order_allowance: float = 0.05
    # The largest order error the order checks may miss: the allowance plus the statistical part of the resolution of
    # a 99% interval 0.1 wide ((z + z_0.9) / (2 z) ~ 0.75 of its width; a wider interval than the band expected +-
    # allowance cannot place the order in it).
    order_target: float = 0.125
    # The reference's order is a calibration (same_limit's allowance uses its measured error, not its order): it
    # need only tell convergence from stagnation.
    reference_order_target: float = 0.275
    # The largest relative drift error same_limit may miss (None: no target, the plateau's interval alone decides).
    target: float | None = None
    # True: the map's order is exactly ``order`` (two-sided, as the papers' rates are); False: at least ``order``
    # (one-sided: a faster map passes, and same_limit is judged at the faster rate it shows). The reference's order
    # is then "at least 1/2" too (Euler-Maruyama reaches 1 on additive noise).
    exact_order: bool = True
    # the public checks' rules (docs/checks.md, "A user's block"; False keeps the committed studies' numbers): orders
    # and same_limit fail only on evidence from the asymptotic regime (``settled_away``), not on the claimed-rate flags
    # (``pre_asymptotic_flags``), and same_limit's resolution holds for any bias within its allowance
    # (``detectable_effect`` with bias_span 2)
    for_users: bool = False
    power: float = DETECTION_POWER  # a resolution is the effect rejected with this probability

    @property
    def bias_span(self) -> float:
        """same_limit's ``detectable_effect`` bias span: 2 for the public checks (its allowance, the reference's own
        mean-square error, bounds a bias of either sign), 1 for the studies' committed designs."""
        return 2.0 if self.for_users else 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        factor = check_int("reference_factor", self.reference_factor, minimum=8)
        if factor % max(REFERENCE_LEVELS):
            raise ValueError(f"reference_factor must be a multiple of {max(REFERENCE_LEVELS)}, got {factor}")
        if self.target is not None:
            check_real("target", self.target, minimum=0.0, strict_minimum=True)
        check_real("power", self.power, minimum=0.5, maximum=1.0)

    @property
    def fine_steps(self) -> int:
        return self.depths[-1] * self.reference_factor

    @property
    def h_fine(self) -> float:
        return self.horizon / self.fine_steps


@dataclass(frozen=True)
class StrongData:
    """Per-path squared distances: ``final_sq``/``sup_sq`` (paths, depths) against the finest
    reference; ``reference_sq`` (paths, 3): |Y_{2h}-Y_h|^2, |Y_{4h}-Y_{2h}|^2, |Y_{8h}-Y_{4h}|^2 at T;
    ``target_sq`` (paths,), with a design target t: |Y^t - Y|^2 at T between the claim with its drift x (1 + t)
    and the claim (Euler-Maruyama at 8 h_ref on the same path), the plateau a drift error t would leave."""

    final_sq: np.ndarray
    sup_sq: np.ndarray
    reference_sq: np.ndarray
    target_sq: np.ndarray | None = None

    @classmethod
    def from_blocks(
        cls, blocks: list[tuple[np.ndarray, np.ndarray]], design: StrongDesign, claim: int = 0, claims: int = 1
    ) -> StrongData:
        """From the blocks' (final_sq, sup_sq) over every comparison of ``strong_ladder``, in block order: those of
        reference number ``claim`` of ``claims``."""
        final_sq, sup_sq = concatenate_blocks(blocks)
        n = len(design.depths)
        per_claim = n + len(REFERENCE_LEVELS) - 1
        first = claim * per_claim
        return cls(
            final_sq=final_sq[:, first : first + n],
            sup_sq=sup_sq[:, first : first + n],
            reference_sq=final_sq[:, first + n : first + per_claim],
            target_sq=None if design.target is None else final_sq[:, claims * per_claim + claim],
        )

    def extended(self, more: StrongData) -> StrongData:
        """These paths followed by ``more`` (the next seeded blocks)."""
        return StrongData(
            *(
                None if a is None else np.concatenate([a, b])
                for a, b in (
                    (self.final_sq, more.final_sq),
                    (self.sup_sq, more.sup_sq),
                    (self.reference_sq, more.reference_sq),
                    (self.target_sq, more.target_sq),
                )
            )
        )


def coupled_strong_errors(
    layer_map: LayerMap,
    sde: LimitSDE,
    design: StrongDesign,
    seed: int,
    key: Sequence[int],
    initial: InitialState = uniform_sphere,
    progress: Callable[[int], None] | None = None,
    start: int = 0,
    exact: LayerMap | None = None,
) -> StrongData:
    """Run the coupled experiment over all paths (from path ``start`` on, a block boundary), block by block (blocks do
    not change any number). ``exact``: the claim's exact solution as its one-step flow, the reference instead of
    Euler-Maruyama."""
    return coupled_strong_errors_for_claims(
        layer_map,
        {"claim": sde},
        design,
        seed,
        key,
        initial,
        progress,
        start,
        None if exact is None else {"claim": exact},
    )["claim"]


def coupled_strong_errors_for_claims(
    layer_map: LayerMap,
    sdes: Mapping[str, LimitSDE],
    design: StrongDesign,
    seed: int,
    key: Sequence[int],
    initial: InitialState = uniform_sphere,
    progress: Callable[[int], None] | None = None,
    start: int = 0,
    exact: Mapping[str, LayerMap] | None = None,
) -> dict[str, StrongData]:
    """The coupled experiment against several claimed limits at once: one Brownian path per path and the layer map
    at every depth are computed once, and each claim adds its reference levels (its numbers equal those of
    ``coupled_strong_errors`` with that claim alone, bit for bit). With a design target t, each claim also adds
    itself with its drift x (1 + t) at the coarsest reference step (``StrongData.target_sq``). ``exact`` maps a
    claim's name to its exact solution's one-step flow X(t + h) = F(X(t), W(t + h) - W(t), h), the reference instead
    of Euler-Maruyama (the target is still measured between two Euler-Maruyama runs, the claim's and the
    drift-scaled one's, so that it holds the drift error alone)."""
    if not layer_map.noise.brownian:
        raise ValueError(f"strong convergence needs Gaussian (Brownian) noise, got law {layer_map.noise.law!r}")
    fine, exact = design.fine_steps, dict(exact or {})
    levels, comparisons = strong_ladder(
        design, layer_map, *(exact.get(name) or EulerMaruyama(sde) for name, sde in sdes.items())
    )
    if design.target is not None:
        for claim, (name, sde) in enumerate(sdes.items()):
            coarsest = len(design.depths) + (claim + 1) * len(REFERENCE_LEVELS) - 1  # the claim's EM x8 level
            if name in exact:
                levels.append(Level(f"EM x{REFERENCE_LEVELS[-1]}", EulerMaruyama(sde), REFERENCE_LEVELS[-1]))
                coarsest = len(levels) - 1
            levels.append(
                Level(
                    f"EM x{REFERENCE_LEVELS[-1]} drift x (1 + {design.target:g})",
                    EulerMaruyama(DriftScaled(sde, 1.0 + design.target)),
                    REFERENCE_LEVELS[-1],
                )
            )
            comparisons.append((len(levels) - 1, coarsest))

    def compute(streams: PathStreams, advance) -> tuple[np.ndarray, np.ndarray]:
        x0 = initial(streams, layer_map.tokens, layer_map.dim)
        run = run_coupled(
            levels, comparisons, x0, BrownianBlock(layer_map.noise, streams, design.h_fine), fine, advance
        )
        return run.final_sq, run.sup_sq

    blocks = run_seeded(
        compute,
        name="coupled_strong",
        configuration=(design, layer_map, initial, list(sdes.values())) + ((list(exact.items()),) if exact else ()),
        seed=seed,
        key=key,
        paths=design.paths,
        block_paths=design.block_paths,
        progress=progress,
        start=start,
    )
    return {name: StrongData.from_blocks(blocks, design, claim, len(sdes)) for claim, name in enumerate(sdes)}


def strong_ladder(design: StrongDesign, layer, *references) -> tuple[list[Level], list[tuple[int, int]]]:
    """The strong experiment's levels (the layer at every depth of the design, then each reference at the factors
    ``REFERENCE_LEVELS`` of the fine step) and its comparisons, reference by reference (each depth against that
    reference's finest level, each of its levels against the next finer one)."""
    fine = design.fine_steps
    levels = [Level(f"L={depth}", layer, fine // depth) for depth in design.depths]
    comparisons = []
    for reference in references:
        ref = len(levels)
        levels += [Level(f"EM x{f}", reference, f) for f in REFERENCE_LEVELS]
        comparisons += [(i, ref) for i in range(len(design.depths))]
        comparisons += [(ref + j + 1, ref + j) for j in range(len(REFERENCE_LEVELS) - 1)]
    return levels, comparisons


def bootstrap_generator(seed: int, key: Sequence[int]) -> np.random.Generator:
    """The bootstrap's own stream, disjoint from every path stream (those never start with 0)."""
    return random_stream(seed, (BOOTSTRAP_STREAM, *key))


def wants_deeper(checks: Sequence[Check]) -> bool:
    """True when some claim check says a deeper ladder would decide (``DEEPER``: its levels pre-asymptotic, or its
    allowance a bias that finer steps shrink) and none fails: the public check then deepens its ladder (on the paths
    that do the last look's work, so a check that also wanted more paths gets no more)."""
    claims = [c for c in checks if c.claim]
    return not any(c.verdict == FAIL for c in claims) and any(
        c.verdict == INCONCLUSIVE and DEEPER in c.note for c in claims
    )


def deeper_depths(depths: Sequence[int], more: int = 2) -> tuple[int, ...]:
    """``depths`` and ``more`` doublings of the deepest: the ladder a check that could not show an asymptotic regime
    names as the one that would decide."""
    return (*depths, *(depths[-1] * 2**k for k in range(1, more + 1)))
