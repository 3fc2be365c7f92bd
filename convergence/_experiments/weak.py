"""Weak convergence of a layer map: rate from coupled depth differences, limit against a reference.

Experiment: each path drives the layer map at every depth of a dyadic ladder with one Brownian path
(block sums), and an observable f of the final tokens is recorded per path and depth.

  weak_order  Delta_l = E[f(X^{L_l}) - f(X^{2 L_l})] ~ C h_l^p with p = 1 (``weak_order_fit``). The coupled
              differences have small variance (their paths are close), which is what makes an O(h) difference visible.
              p is the least-squares slope of log|Delta_l| against log h_l over the levels whose
              Delta_l is significantly non-zero (the others are flagged at the noise floor).
  weak_limit  the finest-depth mean E f(X^L) against a reference value computed another way
              (the backward Kolmogorov equation of the derived SDE), allowing the remaining O(h)
              bias |Delta_last| (for an order-1 method the error at L is about the difference
              between L/2 and L) plus the reference's own error.

  claim_limit the layer's finest mean against a claimed SDE integrated by Euler-Maruyama (another scheme) on the
              same Brownian path (``coupled_layer_and_claims``): the paired difference, allowing the layer's
              remaining bias |Delta_last| and the Euler reference's own |E f(h_ref) - E f(2 h_ref)|
              (``claim_limit_check``). Same noise, but only the laws are compared: a claim equal in law and
              driven differently (say, the noise transposed) passes it, with a wider interval.

Model F's overlap rho of two tokens is observed through ``OVERLAP_OBSERVABLES`` at the betas of
``betas_across_critical`` (the weak-fedorov study's design, which the power study's near misses reuse).

Intervals are normal intervals with Bonferroni-corrected levels (``z_value``), so that across all the
checks of a study the probability of a false ``fail`` is at most ``FAMILY_ALPHA``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

import verify
from verify._common import check_ladder

from .._models import LayerMap, LimitSDE
from .._paths import (
    BrownianBlock,
    DepthLadder,
    EulerMaruyama,
    InitialState,
    Level,
    Martingale,
    PathStreams,
    SignedBlock,
    overlap,
    run_coupled,
    run_seeded,
)
from .._runtime import concatenate_blocks
from .._statistics import (
    DEEPER,
    DETECTION_POWER,
    FAIL,
    INCONCLUSIVE,
    Check,
    effect_check,
    first_nonfinite,
    samples_to_decide,
    z_confidence,
)

ROUNDOFF = 1e-12  # a coupled difference below this fraction of the observable's mean size is rounding, not a bias
Observable = Callable[[np.ndarray], np.ndarray]

OVERLAP_OBSERVABLES: dict[str, Observable] = {
    "rho": (lambda r: r),
    "rho^2": (lambda r: r**2),
    "exp(rho)": np.exp,
}


def token_observables() -> dict[str, Observable]:
    """``OVERLAP_OBSERVABLES`` as functions of two tokens' states (paths, 2, d): f(<x_1, x_2>)."""
    return {name: (lambda x, f=f: f(overlap(x))) for name, f in OVERLAP_OBSERVABLES.items()}


def betas_across_critical(dim: int) -> tuple[float, float]:
    """One beta below and one above model F's beta_c(d) (``verify.critical_beta``): half its lower and twice its
    upper enclosure, rounded to 3 decimals; for d = 3, where beta_c = 0, the critical value itself and 1."""
    lo, hi = verify.critical_beta(dim)
    if hi == 0:
        return 0.0, 1.0
    return round(0.5 * float(lo), 3), round(2.0 * float(hi), 3)


@dataclass(frozen=True)
class WeakDesign(DepthLadder):
    """A doubling depth ladder of at least three levels, with the weak checks' tolerances."""

    order: float = 1.0
    order_allowance: float = 0.15
    # an interval of weak_order across its floor may miss an order error up to this (the allowance plus the
    # statistical part of the resolution, (z + z_0.9) / (2 z) ~ 0.75 of the width, of a 99% interval 0.4 wide), so
    # a map of weak order 1/2 (the strong rate) is rejected with probability above 90%; the limit checks may miss
    # a mean error of ``resolution`` x sd(f)
    order_target: float = 0.45
    resolution: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ladder("depths", self.depths, doubling=True)


def coupled_observables(
    layer_map: LayerMap,
    design: WeakDesign,
    observables: dict[str, Observable],
    seed: int,
    key: Sequence[int],
    initial: InitialState,
    depths: Sequence[int] | None = None,
    progress: Callable[[int], None] | None = None,
    start: int = 0,
    antithetic: bool = False,
    control: Martingale | None = None,
) -> dict[str, np.ndarray]:
    """Per-path observables at every depth, (paths, levels) each; all depths on one noise path (paths from ``start``
    on, a block boundary). ``antithetic``: each path is a pair, the noise path and its reverse from the same initial
    state (``SignedBlock``), and its value is the pair's mean: unbiased for the symmetric entry laws of the suite's
    noises, at twice the work per path. ``control``: a martingale of mean 0 per observable (``run_coupled``'s
    ``martingale``, (paths, observables) in the order of ``observables``), summed over each depth's steps and
    subtracted from that depth's value (e.g. ``weak_overlap.OverlapControl``)."""
    depths = list(design.depths if depths is None else depths)
    fine = depths[-1]
    levels = [Level(f"L={L}", layer_map, fine // L) for L in depths]

    def observed(streams: PathStreams, sign: float, advance) -> dict[str, np.ndarray]:
        x0 = initial(streams, layer_map.tokens, layer_map.dim)
        block = BrownianBlock(layer_map.noise, streams, design.horizon / fine)
        run = run_coupled(levels, [], x0, block if sign > 0 else SignedBlock(block, sign), fine, advance, control)
        values = {name: np.stack([f(x) for x in run.final], axis=1) for name, f in observables.items()}
        if control is None:
            return values
        sums = np.stack(run.martingale, axis=1)  # (paths, levels, observables)
        return {name: v - sums[..., j] for j, (name, v) in enumerate(values.items())}

    def compute(streams: PathStreams, advance) -> dict[str, np.ndarray]:
        if not antithetic:
            return observed(streams, 1.0, advance)
        plus, minus = observed(streams.fresh(), 1.0, advance), observed(streams.fresh(), -1.0, advance)
        return {name: 0.5 * (plus[name] + minus[name]) for name in plus}

    return concatenate_blocks(
        run_seeded(
            compute,
            name="coupled_observables",
            configuration=(
                design,
                depths,
                observables,
                layer_map,
                initial,
                control,
                *(("antithetic",) if antithetic else ()),
            ),
            seed=seed,
            key=key,
            paths=design.paths,
            block_paths=design.block_paths,
            progress=progress,
            start=start,
        )
    )


def coupled_layer_and_claims(
    layer_map: LayerMap,
    claims: Sequence[LimitSDE],
    design: WeakDesign,
    observables: dict[str, Observable],
    seed: int,
    key: Sequence[int],
    initial: InitialState,
    reference_factor: int = 4,
    progress: Callable[[int], None] | None = None,
    start: int = 0,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per-path observables on one Brownian path of fine step h_ref = h_finest / ``reference_factor``: the layer at
    every depth of the ladder, (paths, levels) each, and every claim's Euler-Maruyama at steps 2 h_ref and h_ref,
    (paths, claims, 2) each (paths from ``start`` on, a block boundary)."""
    depths = list(design.depths)
    fine = depths[-1] * reference_factor
    levels = [Level(f"L={L}", layer_map, fine // L) for L in depths]
    for index, claim in enumerate(claims):
        euler = EulerMaruyama(claim)
        levels += [Level(f"claim {index}, 2 h_ref", euler, 2), Level(f"claim {index}, h_ref", euler, 1)]

    def compute(streams: PathStreams, advance) -> dict[str, np.ndarray]:
        x0 = initial(streams, layer_map.tokens, layer_map.dim)
        finals = run_coupled(
            levels, [], x0, BrownianBlock(layer_map.noise, streams, design.horizon / fine), fine, advance
        ).final
        return {name: np.stack([f(x) for x in finals], axis=1) for name, f in observables.items()}

    values = concatenate_blocks(
        run_seeded(
            compute,
            name="coupled_layer_and_claims",
            configuration=(design, observables, layer_map, tuple(claims), initial, reference_factor),
            seed=seed,
            key=key,
            paths=design.paths,
            block_paths=design.block_paths,
            progress=progress,
            start=start,
        )
    )
    layer = {name: v[:, : len(depths)] for name, v in values.items()}
    claimed = {name: v[:, len(depths) :].reshape(v.shape[0], len(claims), 2) for name, v in values.items()}
    return layer, claimed


def claim_limit_check(
    layer_values: np.ndarray,
    claim_values: np.ndarray,
    z: float,
    resolution: float,
    config: dict,
    name: str = "claim_limit",
    power: float = DETECTION_POWER,
    bias_span: float = 1.0,
    order_floor: float = 1.0,
) -> Check:
    """The layer's law at the finest depth against the claim's: mean of f(layer, L) - f(claim, h_ref) over the
    paired paths within z standard errors plus the allowance t(p) (|Delta_last| + z SE(Delta_last)) (the layer's
    remaining bias) + |E f(claim, 2 h_ref) - E f(claim, h_ref)| + z SE (the Euler reference's, weak order 1). With
    Delta_L = E f(L) - E f(2L) ~ C h^p, the finest level's bias is the tail sum_k Delta_{2^k L_max} =
    t(p) Delta_last, t(p) = 2^-p / (1 - 2^-p): exactly 1 at p = 1, 1.26 at ``order_floor`` 0.85 (the public check's:
    the lowest order its weak_order check passes, so the bound holds whenever the run passes). The target is
    ``resolution`` times sd(f): ``fail`` when the interval misses the allowance band, ``inconclusive`` when the
    resolution (the effect rejected with probability ``power``; ``bias_span`` 2: whatever the bias within the
    allowance, ``detectable_effect``) exceeds the target, saying what would decide.

    ``layer_values``: (paths, levels) on the ladder; ``claim_values``: (paths, 2), steps 2 h_ref and h_ref."""
    paths = layer_values.shape[0]

    def mean_se(v: np.ndarray) -> tuple[float, float]:
        return float(v.mean()), float(v.std(ddof=1) / np.sqrt(paths))

    estimate, se = mean_se(layer_values[:, -1] - claim_values[:, 1])
    layer_bias, layer_bias_se = mean_se(layer_values[:, -2] - layer_values[:, -1])
    euler_bias, euler_bias_se = mean_se(claim_values[:, 0] - claim_values[:, 1])
    tail = 2.0**-order_floor / (1.0 - 2.0**-order_floor)
    allowance = tail * (abs(layer_bias) + z * layer_bias_se) + abs(euler_bias) + z * euler_bias_se
    lo, hi = estimate - z * se, estimate + z * se
    sd = float(layer_values[:, -1].std(ddof=1))
    confidence = z_confidence(z)
    target = resolution * sd
    check = effect_check(
        name,
        0.0,
        estimate,
        (lo, hi),
        allowance,
        target,
        config,
        confidence=confidence,
        power=power,
        scale=sd,
        bias_span=bias_span,
        note=(
            "E f(layer, finest L) - E f(claim, Euler h_ref) on the same noise; allowance: "
            + ("" if tail == 1.0 else f"{tail:.3g} x (the tail of a weak order {order_floor:g}) ")
            + f"layer |Delta_last| {abs(layer_bias):.3g} + Euler |E f(2 h_ref) - E f(h_ref)| "
            f"{abs(euler_bias):.3g} (+ z SE each); target {resolution:g} sd(f) = "
            f"{target:.3g}"
        ),
    )
    bad = first_nonfinite({"layer values": layer_values, "claim values": claim_values})
    if bad:  # a NaN at a level the estimate does not use still means a scheme diverged
        return replace(check, verdict=FAIL, note=f"{check.note}; {bad}")
    if not sd > ROUNDOFF * float(np.abs(layer_values[:, -1]).mean()):
        return blind(check, f"f takes one value on every path (sd {sd:.3g}): it cannot see a difference of laws")
    if check.verdict == INCONCLUSIVE:
        return replace(
            check,
            note=check.note
            + (
                "; the bias allowance alone exceeds the target (the layer's and the Euler reference's biases shrink at "
                f"finer steps): {DEEPER}"
                if bias_span * (tail * abs(layer_bias) + abs(euler_bias)) >= target
                else f"; resolution {check.resolution:.3g} > target: about "
                f"{samples_to_decide((lo, hi), allowance, confidence, paths, target, power, bias_span)} paths would "
                "decide"
            ),
        )
    return check


def blind(check: Check, reason: str) -> Check:
    """``check`` with no power: a statistic that cannot move under the claim's error passes nothing; inconclusive (a
    fail stands), its resolution infinite, the ``reason`` in its note."""
    return replace(
        check,
        verdict=FAIL if check.verdict == FAIL else INCONCLUSIVE,
        resolution=float("inf"),
        relative_resolution=float("inf"),
        note=f"{check.note}; no power: {reason}",
    )


def limit_check(
    values: np.ndarray,
    last_difference: float,
    last_se: float,
    reference: float,
    reference_error: float,
    scale: float | None,
    design: WeakDesign,
    z: float,
    config: dict,
    name: str = "weak_limit",
) -> Check:
    """``weak_limit``: the finest mean minus the reference, within z SE plus the bias allowance
    |Delta_last| + z SE(Delta_last) + reference error (``fail`` outside it or on any non-finite number);
    inconclusive when the resolution exceeds the target ``design.resolution`` times ``scale``, the observable's
    standard deviation (None: the sample's, which is the observable's own only when no control variate was
    subtracted from ``values``) (no power to see a wrong limit)."""
    finest = values[:, -1] if values.ndim == 2 else values
    estimate = float(finest.mean() - reference)
    se = float(finest.std(ddof=1) / np.sqrt(finest.size))
    allowance = abs(last_difference) + z * last_se + reference_error
    lo, hi = estimate - z * se, estimate + z * se
    confidence = z_confidence(z)
    sd = float(finest.std(ddof=1)) if scale is None else scale
    check = effect_check(
        name,
        0.0,
        estimate,
        (lo, hi),
        allowance,
        design.resolution * sd,
        config,
        confidence=confidence,
        scale=sd,
        note=f"finest mean {finest.mean():.6f} vs reference {reference:.6f}; target {design.resolution:g} sd(f)",
    )
    bad = first_nonfinite(
        {
            "values": values,
            "reference and its error": np.array([reference, reference_error]),
            "last difference and its SE": np.array([last_difference, last_se]),
        }
    )
    return replace(check, verdict=FAIL, note=f"{check.note}; {bad}") if bad else check
