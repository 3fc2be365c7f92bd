"""Strong (pathwise) convergence of a layer map to its limit SDE, for any model with Brownian noise.

Experiment: for each path, one Brownian path at the finest step ``h_ref = T / (R L_max)`` drives
  - the layer map at every depth L (step T/L, increments = block sums),
  - the reference: Ito Euler-Maruyama for the limit SDE in R^d at steps h_ref, 2 h_ref, 4 h_ref, 8 h_ref.
Measured per path: the token-mean squared distance between each depth and the finest reference at
the final time and its maximum over the depth's grid times, and the distances between consecutive
reference levels (the reference's own convergence).

Claims checked (``analyse_strong``):
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

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from verify._common import check_int, check_real

from .._models import LayerMap, LimitSDE
from .._output import Panel, Series
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
from .._statistics import (
    CONFIDENCE,
    DEEPER,
    DETECTION_POWER,
    FAIL,
    INCONCLUSIVE,
    PASS,
    TURN_TOLERANCE,
    Check,
    OrderFit,
    all_finite,
    asymptotic_start,
    at_least_verdict,
    bootstrap_counts,
    bootstrap_interval,
    detectable_effect,
    first_nonfinite,
    fit_order,
    limit_plateau,
    limit_verdict,
    noise_floor_flags,
    one_rate_levels,
    order_verdict,
    plateau,
    plateau_fit_bias,
    pre_asymptotic_flags,
    samples_to_decide,
    settled_away,
)
from .mutants import DriftScaled

REFERENCE_LEVELS = (1, 2, 4, 8)
FLOOR_MARGIN = 3.0  # noise_floor_flags' margin: a level within 3 x the reference's RMS error is at its floor
REFERENCE_ORDER = 0.5  # Euler-Maruyama's strong order: the reference's claim, separate from the map's ``order``
EXACT_TOLERANCE = 1e-10  # an exact reference's consecutive levels may differ by this RMS at T (rounding; O(1) states)
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


def _series(label: str, fit, flags_pre: np.ndarray, flags_floor: np.ndarray) -> Series:
    flags = [
        [name for name, on in (("pre-asymptotic", pre), ("noise floor", floor)) if on]
        for pre, floor in zip(flags_pre, flags_floor)
    ]
    return Series.from_fit(label, fit, flags)


def _order_check(
    name: str,
    fit: OrderFit,
    expected: float,
    target: float,
    usable_levels: int,
    config: dict,
    note: str,
    paths: int,
    design: StrongDesign,
    confidence: float,
    claim: bool = True,
) -> Check:
    """An order check at ``target`` (see ``order_verdict``), saying how many paths would decide when undecided."""
    ci = fit.order_ci
    resolution = detectable_effect(ci, design.order_allowance, confidence, design.power)
    judge = order_verdict if design.exact_order else at_least_verdict
    verdict = judge(ci, expected, design.order_allowance, resolution, target, usable_levels)
    if verdict == INCONCLUSIVE and resolution > target and claim:
        advice = samples_to_decide(ci, design.order_allowance, confidence, paths, target, design.power)
        note += f"; resolution {resolution:.3g} > target {target:g}: about {advice} paths in all would decide"
    return Check(
        name=name,
        expected=expected,
        estimate=fit.order,
        ci=ci,
        verdict=verdict,
        config=config,
        allowance=design.order_allowance,
        note=note,
        claim=claim,
        resolution=resolution,
        target=target,
        confidence=confidence,
    )


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


def _asymptotic_evidence(
    check: Check, fit: OrderFit, at_floor: np.ndarray, design: StrongDesign, confidence: float
) -> Check:
    """``check`` (an order judged on the levels of one rate above the floor) with a fail kept only on evidence from the
    asymptotic regime: ``settled_away`` shows the finest local order outside the claimed band and not turning back
    towards it; else inconclusive, naming the deeper ladder that would decide (the public check then deepens
    itself)."""
    if check.verdict != FAIL or not all_finite(*check.ci):
        return check
    high = design.order + design.order_allowance if design.exact_order else np.inf
    evidence = settled_away(fit, ~at_floor, design.order - design.order_allowance, high, confidence)
    if evidence is not None:
        return replace(check, note=f"{check.note}; asymptotic evidence: {evidence}")
    text = ", ".join(f"{p:.2f}" for p in fit.local_orders)
    return replace(
        check,
        verdict=INCONCLUSIVE,
        note=f"{check.note}; pre-asymptotic: the finest local order is not shown outside the band and settled (local "
        f"orders {text}; a fail needs it outside by its interval and turning back by at most {TURN_TOLERANCE:g}), so "
        f"these levels cannot carry a fail; {DEEPER}: depths {deeper_depths(design.depths)}",
    )


def _plateau_at_rate(
    fit: OrderFit, order_check: Check, first: int, design: StrongDesign, confidence: float
) -> tuple[float, tuple[float, float], str]:
    """same_limit's plateau B of ms = A h^{2p} + B over the levels from ``first`` on (``limit_plateau``), p the claimed
    order; for an "at least" claim of the public check whose fitted order may be faster (its interval reaching above
    the claimed order), p runs over that interval's part above the claim and B's interval covers every p in it (B moves
    with the exponent, about 15% of the finest mean square per 0.04 of order: the rate's own uncertainty is carried,
    not hidden)."""
    faster = (
        design.for_users and not design.exact_order and all_finite(*order_check.ci) and order_check.ci[1] > design.order
    )
    if not faster:
        return limit_plateau(fit, 2 * design.order, first, confidence)
    rates = tuple(max(design.order, rate) for rate in (order_check.ci[0], order_check.estimate, order_check.ci[1]))
    results = [limit_plateau(fit, 2 * rate, first, confidence) for rate in rates]
    bounds = [bound for r in results for bound in r[1]]
    if not all_finite(*bounds):  # one exponent's fit failed: no interval (the verdict fails on it)
        return results[1][0], (float("nan"), float("nan")), results[1][2]
    lower, upper = min(bounds[0::2]), max(bounds[1::2])
    return (
        results[1][0],
        (lower, upper),
        results[1][2].replace("claimed rate", "the measured rate where it exceeds the claimed")
        + f"; the map's measured order {order_check.estimate:.3g} [{order_check.ci[0]:.3g}, {order_check.ci[1]:.3g}] "
        f"may exceed the claimed {design.order:g}: B's interval covers every exponent from {2 * rates[0]:.3g} to "
        f"{2 * rates[2]:.3g}",
    )


# same_limit's allowance in the public check: 1.5 x the upper bound of the Euler reference's mean-square error. An exact
# map's B and that bound estimate one quantity; B's upper bound stays within the margin while B's relative standard
# error is below 0.5 / z (about 15% at the checks' levels), which the first look's 1024 paths already give
REFERENCE_SAFETY = 1.5
FIT_BIAS_SAFETY = 2.0  # B's model bias from a term A' h^{q+1} is moved / (1 - 2^-(q+1)) <= 2 moved for q >= 0


def _with_fit_bias(
    fit: OrderFit,
    order_check: Check,
    first: int,
    confidence: float,
    design: StrongDesign,
    allowance: float,
    how: str,
) -> tuple[float, str]:
    """same_limit's allowance with the plateau fit's model bias where the data show one: terms beyond A h^q
    (A' h^{q+1}; nearly deterministic errors, as an additive-noise Euler step's) move B by ``plateau_fit_bias`` when
    the coarsest fitted level is dropped, and B's bias is at most ``FIT_BIAS_SAFETY`` times that move. The move
    counts only when its bootstrap interval (at the check's confidence) excludes 0: a move within its own noise is
    noise, which B's interval already holds, and the allowance stays the reference's error."""
    rate = max(design.order, order_check.estimate) if all_finite(order_check.estimate) else design.order
    if fit.steps.size - first < 3:
        return allowance, how
    q = np.full(fit.ms_replicates.shape[0], 2 * rate)
    moves = plateau(fit.steps[first:], fit.ms_replicates[:, first:], q) - plateau(
        fit.steps[first + 1 :], fit.ms_replicates[:, first + 1 :], q
    )
    signed = plateau_fit_bias(fit, 2 * rate, first, signed=True)
    lo, hi = bootstrap_interval(signed, moves, confidence)
    if not (math.isfinite(signed) and (lo > 0 or hi < 0)):
        return allowance, how
    moved = abs(signed)
    return allowance + FIT_BIAS_SAFETY * moved, (
        how + f"; B moves by {signed:.3g} [{lo:.3g}, {hi:.3g}] when the coarsest fitted level is dropped: a model "
        f"bias of the fit, {FIT_BIAS_SAFETY:g} x that in the allowance"
    )


def _target_rule(
    verdict: str,
    note: str,
    ci: tuple[float, float],
    resolution: float,
    allowance: float,
    confidence: float,
    paths: int,
    target_ms: float,
    fallback: float,
    design: StrongDesign,
    reference_allowance: float | None = None,
) -> tuple[str, str, float | None, float]:
    """same_limit against its target: the plateau ``target_ms`` a relative drift error t = ``design.target`` leaves
    (measured on the same paths, ``StrongData.target_sq``). A pass needs the resolution at most ``target_ms``, else
    inconclusive, saying what would decide. The relative resolution is t sqrt(resolution / target_ms) (the plateau
    of a small drift error e grows like e^2). Returns the verdict, note, relative resolution and the target in
    mean-square units (``fallback`` when the claim has no drift). ``reference_allowance``: the allowance's part from the
    reference alone (the rest is the plateau fit's model bias, which finer levels shrink: then deeper depths decide)."""
    t = design.target
    if not np.isfinite(target_ms):  # the drift-scaled reference blew up: nothing can be judged against it
        return (
            FAIL,
            note + f"; the target's reference (the claim with its drift x (1 + {t:g})) is not finite",
            None,
            fallback,
        )
    if not target_ms > 0:  # the scaled claim is the claim itself: a relative drift error means nothing here
        return (
            verdict,
            note
            + (
                "; no drift target: the claim's drift vanishes on these paths; target = the finest "
                "level's mean-square error plus the allowance"
            ),
            None,
            fallback,
        )
    relative = t * float(np.sqrt(max(resolution, 0.0) / target_ms))
    note += (
        f"; target: a drift error of {t:g} leaves a plateau {target_ms:.3g}; resolution {resolution:.3g} "
        f"(a relative drift error of {relative:.3g})"
    )
    undecided = verdict == INCONCLUSIVE and design.for_users and "would decide" not in note
    if (verdict == PASS or undecided) and not resolution <= target_ms:
        verdict = INCONCLUSIVE
        reference_below_target = reference_allowance is not None and design.bias_span * reference_allowance < target_ms
        if design.bias_span * allowance >= target_ms and reference_below_target:
            note += (
                f": the allowance {allowance:.3g} is above the target, beyond the reference's part "
                f"{reference_allowance:.3g} by the plateau fit's model bias, which finer levels shrink; {DEEPER}: "
                f"depths {deeper_depths(design.depths)} (or a larger target)"
            )
        elif design.bias_span * allowance >= target_ms:
            factor = design.reference_factor * 2 ** int(np.ceil(np.log2(2 * design.bias_span * allowance / target_ms)))
            note += (
                f": the allowance {allowance:.3g} is above the target; a reference_factor of about {factor} (the "
                "reference's error halves when the factor doubles), deeper depths (where a fit's model bias shrinks) "
                "or a larger target would decide"
            )
        else:
            note += (
                " > target: about "
                f"{samples_to_decide(ci, allowance, confidence, paths, target_ms, design.power, design.bias_span)}"
                " paths would decide"
            )
    return verdict, note, relative, target_ms


def analyse_strong(
    data: StrongData,
    design: StrongDesign,
    config: dict,
    rng: np.random.Generator,
    confidence: float = CONFIDENCE,
    exact_reference: bool = False,
) -> tuple[list[Check], Panel]:
    """Checks and a convergence panel for one configuration (see the module docstring). With an
    ``exact_reference`` (the claim's exact flow), ``reference_order`` is replaced by ``reference_exact``: its
    consecutive levels must agree to rounding (``EXACT_TOLERANCE``), and that rounding is same_limit's allowance.

    Every interval is at ``confidence`` (a study passes ``family_confidence`` of its number of checks, so that
    its family-wise false-failure rate stays at 1%). A run in which any distance is not finite (a scheme blew
    up) fails every check at once.
    """
    bad = _nonfinite_strong(data, design, exact_reference)
    if bad:
        return _failed_strong(bad, design, config, exact_reference)
    counts = bootstrap_counts(rng, data.final_sq.shape[0], design.replicates)
    reference, reference_ms, reference_ms_hi = _reference_error(data, design, counts, confidence, exact_reference)
    checks, series, ms = _order_checks(data, design, config, counts, confidence, np.sqrt(reference_ms_hi))
    checks.append(_reference_check(reference, reference_ms, design, config, data.final_sq.shape[0], confidence))
    checks.append(
        _same_limit(data, design, config, confidence, ms, reference, reference_ms, reference_ms_hi, exact_reference)
    )
    if reference is not None:
        flat = np.zeros(len(REFERENCE_LEVELS) - 1, bool)
        series.append(_series("reference: consecutive EM differences", reference, flat, flat))
    label = ", ".join(f"{k}={v}" for k, v in config.items())
    return checks, Panel(title=label, xlabel="step h", ylabel="RMS error", series=series, reference_order=design.order)


def _reference_name(exact_reference: bool) -> tuple[str, str]:
    """What the reference is called in messages, and the name of its check."""
    return (
        ("exact reference", "reference_exact") if exact_reference else ("Euler-Maruyama reference", "reference_order")
    )


def _nonfinite_strong(data: StrongData, design: StrongDesign, exact_reference: bool) -> str | None:
    """Where a distance is not finite (a scheme blew up), or None."""
    depth_labels = [f"L={L}" for L in design.depths]
    return first_nonfinite(
        {"layer map (distance at T)": data.final_sq, "layer map (max over grid times)": data.sup_sq}, depth_labels
    ) or first_nonfinite(
        {_reference_name(exact_reference)[0]: data.reference_sq}, [f"x{f}" for f in REFERENCE_LEVELS[1:]]
    )


def _failed_strong(bad: str, design: StrongDesign, config: dict, exact_reference: bool) -> tuple[list[Check], Panel]:
    """Every check failed at once, with the message ``bad`` naming where a value is not finite, and an empty panel."""
    nan = float("nan")
    checks = [
        Check(name, expected, nan, (nan, nan), FAIL, config, note=bad)
        for name, expected in (
            ("strong_order", design.order),
            ("strong_order_sup", design.order),
            (_reference_name(exact_reference)[1], 0.0 if exact_reference else REFERENCE_ORDER),
            ("same_limit", 0.0),
        )
    ]
    return checks, Panel(
        title=str(config), xlabel="step h", ylabel="RMS error", series=[], reference_order=design.order
    )


def _reference_error(
    data: StrongData, design: StrongDesign, counts: np.ndarray, confidence: float, exact_reference: bool
) -> tuple[OrderFit | None, float, float]:
    """The reference's fit over its consecutive differences (None for an exact one: they differ by rounding, possibly
    0, so there is nothing to fit), its own mean-square error and that error's upper bound."""
    if exact_reference:
        largest = float(np.max(np.mean(data.reference_sq, axis=0)))
        return None, largest, largest
    ref_steps = design.h_fine * np.asarray(REFERENCE_LEVELS[:-1], dtype=np.float64)
    reference = fit_order(ref_steps[::-1], data.reference_sq[:, ::-1], counts, confidence)
    # The finest reference's own mean-square error is about that of its first consecutive difference.
    reference_ms = float(reference.ms_replicates[:, -1].mean())
    return (
        reference,
        reference_ms,
        float(bootstrap_interval(reference_ms, reference.ms_replicates[:, -1], confidence)[1]),
    )


def _order_checks(
    data: StrongData, design: StrongDesign, config: dict, counts: np.ndarray, confidence: float, floor: float
) -> tuple[list[Check], list[Series], tuple]:
    """strong_order (the distance at T) and strong_order_sup (its max over grid times), their panel series, and the
    first's fit, pre-asymptotic flags, check and floor flags (what same_limit is judged from)."""
    steps, paths = design.steps(), data.final_sq.shape[0]
    checks, series = [], []
    for name, sq in (("strong_order", data.final_sq), ("strong_order_sup", data.sup_sq)):
        fit = fit_order(steps, sq, counts, confidence)
        pre = pre_asymptotic_flags(fit, design.order, design.order_allowance)
        at_floor = noise_floor_flags(fit, floor, FLOOR_MARGIN)
        note = (
            f"{int(at_floor.sum())} noise-floor levels of {steps.size}"
            if design.for_users
            else f"{int(pre.sum())} pre-asymptotic and {int(at_floor.sum())} noise-floor levels of {steps.size}"
        )
        # an exact or higher-order map: even each level's upper bound is at the floor (the lower bound alone would
        # demote an under-powered run)
        identifiable = not np.all(fit.error_ci[:, 1] <= FLOOR_MARGIN * floor)
        if not identifiable:
            note = (
                f"order not identifiable: errors at the floor (the reference's own RMS error, {floor:.3g}) at "
                f"every level; a finding, not a claim: same_limit decides"
            )
        judged, usable = fit, int(np.sum(~at_floor))
        if design.for_users:
            judged, usable, note = _one_rate_fit(
                fit, steps, sq, counts, confidence, at_floor, identifiable, design, note
            )
        check = _order_check(
            name,
            judged,
            design.order,
            design.order_target,
            usable,
            config,
            note,
            paths,
            design,
            confidence,
            claim=identifiable,
        )
        if design.for_users and identifiable:
            check = _asymptotic_evidence(check, fit, at_floor, design, confidence)
        checks.append(check)
        series.append(
            _series("RMS error at T" if name == "strong_order" else "RMS of max over grid times", fit, pre, at_floor)
        )
        if name == "strong_order":
            first = (fit, pre, check, at_floor)
    return checks, series, first


def _one_rate_fit(fit, steps, sq, counts, confidence, at_floor, identifiable, design, note):
    """A public check's order judged on the levels of one rate above the floor (``one_rate_levels``), when at least
    three qualify and some do not: the fit, the levels it used and the note saying so."""
    note += "; " + ("exactly" if design.exact_order else "at least") + f" {design.order:g} claimed"
    regime = one_rate_levels(fit, ~at_floor, confidence)
    if identifiable and regime.sum() >= 3 and not regime.all():
        depths = ", ".join(str(L) for L, kept in zip(design.depths, regime) if kept)
        note += (
            f"; judged on the levels of one rate above the floor (L = {depths}: consecutive local orders "
            f"consistent, one_rate_levels; fit over all levels: {fit.order:.3g} "
            f"[{fit.order_ci[0]:.3g}, {fit.order_ci[1]:.3g}])"
        )
        return fit_order(steps[regime], sq[:, regime], counts, confidence), int(regime.sum()), note
    return fit, int(np.sum(~at_floor)), note


def _reference_check(
    reference: OrderFit | None, reference_ms: float, design: StrongDesign, config: dict, paths: int, confidence: float
) -> Check:
    """reference_exact (an exact flow's consecutive levels agree to rounding) or reference_order (Euler-Maruyama's
    strong order from its consecutive differences; in a public check a calibration, not part of the verdict)."""
    if reference is None:
        rms = float(np.sqrt(reference_ms))
        return Check(
            "reference_exact",
            0.0,
            rms,
            (rms, rms),
            PASS if rms <= EXACT_TOLERANCE else FAIL,
            config,
            EXACT_TOLERANCE,
            1.0,
            0.0,
            target=EXACT_TOLERANCE,
            note=f"the exact reference's consecutive levels (steps h_ref, 2 h_ref, 4 h_ref, 8 h_ref) "
            f"differ by RMS {rms:.3g} at T (largest pair): an exact flow agrees with itself to "
            f"rounding at every step (tolerance {EXACT_TOLERANCE:g})",
        )
    return _order_check(
        "reference_order",
        reference,
        REFERENCE_ORDER,
        design.reference_order_target,
        3,
        config,
        "consecutive Euler-Maruyama differences at h_ref, 2 h_ref, 4 h_ref (Euler-Maruyama's strong order, "
        "whatever the map's)"
        + (
            "; a calibration of the reference, not part of the verdict on the claim (same_limit's allowance "
            "is the reference's measured error, whatever its order)"
            if design.for_users
            else ""
        ),
        paths,
        design,
        confidence,
        claim=not design.for_users,
    )


def _same_limit(
    data: StrongData,
    design: StrongDesign,
    config: dict,
    confidence: float,
    ms: tuple,
    reference: OrderFit | None,
    reference_ms: float,
    reference_ms_hi: float,
    exact_reference: bool,
) -> Check:
    """same_limit: the mean-square error's plateau B, fitted at the claimed rate, lies within the reference's own
    error (``ms``: strong_order's fit, pre-asymptotic flags, check and floor flags)."""
    ms_fit, ms_pre, ms_check, ms_floor = ms
    finest_ms = float(ms_fit.error[-1] ** 2)
    first = asymptotic_start(ms_pre)
    point, ci, how = _plateau_at_rate(ms_fit, ms_check, first, design, confidence)
    fitted_point, fitted_ci, _ = limit_plateau(ms_fit)  # diagnostic only: a fitted rate absorbs a plateau
    allowance = reference_ms_hi
    if design.for_users and not exact_reference:
        # an exact map's plateau B estimates the reference's own error, the very quantity of this allowance: its upper
        # bound exceeds the allowance's about half the time, so the allowance holds a margin beyond its upper bound
        allowance = REFERENCE_SAFETY * reference_ms_hi
    reference_allowance = allowance
    if design.for_users and all_finite(*ci):
        allowance, how = _with_fit_bias(ms_fit, ms_check, first, confidence, design, allowance, how)
    resolution = detectable_effect(ci, allowance, confidence, design.power, design.bias_span)
    verdict = limit_verdict(ci, allowance, finest_ms)
    if design.for_users and (ms_check.claim or not exact_reference) and verdict == FAIL and all_finite(*ci):
        verdict, how = _plateau_fail_evidence(ms_fit, ms_floor, reference, design, confidence, how)
    note = (
        f"{how} (steps h); allowance = {'the exact reference' if exact_reference else 'reference'} mean-square "
        f"error {reference_ms:.3g} (upper {reference_ms_hi:.3g})"
        + (
            ""
            if allowance == reference_ms_hi
            else f"; in all {allowance:.3g} (x {REFERENCE_SAFETY:g} in a public check, and any model bias of the fit)"
        )
        + f"; finest-level mean-square error {finest_ms:.3g}; "
        f"diagnostic, not the verdict: at the fitted rate B = {fitted_point:.3g} "
        f"[{fitted_ci[0]:.3g}, {fitted_ci[1]:.3g}]"
    )
    if exact_reference and verdict == FAIL and all_finite(*ci):
        # no reference error hides the fit's own bias here: a plateau that moves by half its size when the coarsest
        # fitted level is dropped is a pre-asymptotic ladder (terms beyond A h^q put into B), not a second limit
        moved = plateau_fit_bias(ms_fit, 2 * design.order, first)
        if ci[0] <= 2 * moved:
            verdict = INCONCLUSIVE
            note += (
                f"; not identifiable on this ladder: B moves by {moved:.3g} when the coarsest fitted level is dropped "
                f"(at least half its lower bound {ci[0]:.3g}): {DEEPER}"
            )
    # without a drift target: a plateau as large as the finest level's whole error, beyond the reference's own
    relative, target = None, finest_ms + design.bias_span * allowance
    if data.target_sq is not None:
        verdict, note, relative, target = _target_rule(
            verdict,
            note,
            ci,
            resolution,
            allowance,
            confidence,
            data.final_sq.shape[0],
            float(data.target_sq.mean()),
            target,
            design,
            reference_allowance,
        )
    else:
        note += (
            "; no drift target (design.target is None): target = the finest level's mean-square error plus the "
            "allowance"
        )
    return Check(
        name="same_limit",
        expected=0.0,
        estimate=float(point),
        ci=ci,
        verdict=verdict,
        config=config,
        allowance=allowance,
        note=note,
        resolution=resolution,
        relative_resolution=relative,
        confidence=confidence,
        target=target,
        bias_span=design.bias_span,
    )


def _plateau_fail_evidence(
    ms_fit, ms_floor: np.ndarray, reference: OrderFit | None, design: StrongDesign, confidence: float, how: str
) -> tuple[str, str]:
    """A plateau carries a fail only on evidence from the asymptotic regime: the errors' finest local order lies below
    the claimed rate and is not turning back towards it (a true claim's pre-asymptotic levels steepen towards its rate,
    and the fit at the claimed rate would put that bend into B). The verdict (fail, or inconclusive) and the note."""
    evidence = settled_away(ms_fit, ~ms_floor, design.order - design.order_allowance, confidence=confidence)
    if evidence is not None:
        return FAIL, how + f"; asymptotic evidence: {evidence}"
    if ms_floor.all():  # every level within 3 x the reference's RMS error: the allowance must be sound
        if reference.order_ci[0] >= REFERENCE_ORDER - design.order_allowance:
            return FAIL, how + (
                "; every level lies near the reference's floor and the reference is shown to converge at its rate "
                f"(order interval [{reference.order_ci[0]:.3g}, {reference.order_ci[1]:.3g}]), so its error is a "
                "sound allowance and the plateau beyond it stands"
            )
        return INCONCLUSIVE, how + (
            "; every level lies near the reference's floor and the reference is not shown to converge at its "
            f"rate (order interval [{reference.order_ci[0]:.3g}, {reference.order_ci[1]:.3g}]), so its error "
            "is no sound allowance and the plateau cannot carry a fail: a "
            f"reference_factor of {2 * design.reference_factor} (or deeper depths) would decide"
        )
    return INCONCLUSIVE, how + (
        "; the errors are not shown to decay below the claimed rate at the finest levels without turning back "
        f"towards it (pre-asymptotic), so the plateau cannot carry a fail; {DEEPER}: depths "
        f"{deeper_depths(design.depths)}"
    )


__all__ = [
    "CONFIDENCE",
    "DRIFT_TARGET",
    "StrongData",
    "StrongDesign",
    "analyse_strong",
    "deeper_depths",
    "wants_deeper",
    "coupled_strong_errors",
    "coupled_strong_errors_for_claims",
]
