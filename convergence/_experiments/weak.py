"""Weak convergence of a layer map: rate from coupled depth differences, limit against a reference.

Experiment: each path drives the layer map at every depth of a dyadic ladder with one Brownian path
(block sums), and an observable f of the final tokens is recorded per path and depth.

  weak_order  Delta_l = E[f(X^{L_l}) - f(X^{2 L_l})] ~ C h_l^p with p = 1. The coupled differences have
              small variance (their paths are close), which is what makes an O(h) difference visible.
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
from .._output import Series
from .._paths import (
    BrownianBlock,
    DepthLadder,
    EulerMaruyama,
    InitialState,
    Level,
    PathStreams,
    run_coupled,
    run_seeded,
)
from .._runtime import concatenate_blocks
from .._statistics import (
    DEEPER,
    DETECTION_POWER,
    FAIL,
    INCONCLUSIVE,
    NO_TARGET,
    PASS,
    Check,
    all_finite,
    bootstrap_counts,
    detectable_effect,
    effect_check,
    first_nonfinite,
    paths_to_resolve,
    samples_to_decide,
    z_confidence,
)

Observable = Callable[[np.ndarray], np.ndarray]

OVERLAP_OBSERVABLES: dict[str, Observable] = {
    "rho": (lambda r: r),
    "rho^2": (lambda r: r**2),
    "exp(rho)": np.exp,
}


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
) -> dict[str, np.ndarray]:
    """Per-path observables at every depth, (paths, levels) each; all depths on one noise path (paths from ``start``
    on, a block boundary)."""
    depths = list(design.depths if depths is None else depths)
    fine = depths[-1]
    levels = [Level(f"L={L}", layer_map, fine // L) for L in depths]

    def compute(streams: PathStreams, advance) -> dict[str, np.ndarray]:
        x0 = initial(streams, layer_map.tokens, layer_map.dim)
        block = BrownianBlock(layer_map.noise, streams, design.horizon / fine)
        finals = run_coupled(levels, [], x0, block, fine, advance).final
        return {name: np.stack([f(x) for x in finals], axis=1) for name, f in observables.items()}

    return concatenate_blocks(
        run_seeded(
            compute,
            name="coupled_observables",
            configuration=(design, depths, observables, layer_map, initial),
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


BATCHES = 400
ROUNDOFF = 1e-12  # a coupled difference below this fraction of the observable's mean size is rounding, not a bias


def batch_means(values: np.ndarray, batches: int) -> np.ndarray:
    """Means of ``batches`` contiguous, equal groups of rows (the remainder rows are dropped)."""
    size = values.shape[0] // batches
    if size < 1:
        return values
    return values[: size * batches].reshape(batches, size, *values.shape[1:]).mean(axis=1)


@dataclass(frozen=True)
class WeakOrderFit:
    steps: np.ndarray
    differences: np.ndarray
    standard_errors: np.ndarray
    significant: np.ndarray
    order: float
    order_se: float
    at_roundoff: np.ndarray  # differences within rounding of the observable's size: no depth dependence to fit

    def series(self, label: str, z: float) -> Series:
        """The curve |E f_l - E f_{l+1}| with z-SE intervals (clipped at 0) and the pooled fitted line; levels
        at the noise floor are flagged. No line (order 0) when no order was fitted."""
        values = np.abs(self.differences)
        order = self.order if np.isfinite(self.order) else 0.0
        return Series(
            label=label,
            steps=self.steps.tolist(),
            values=values.tolist(),
            ci_lo=np.maximum(values - z * self.standard_errors, 0).tolist(),
            ci_hi=(values + z * self.standard_errors).tolist(),
            order=order,
            intercept=float(np.mean(np.log(values + 1e-300)) - order * np.mean(np.log(self.steps))),
            flags=[[] if s else ["noise floor"] for s in self.significant],
        )


def _pooled_slope(log_h: np.ndarray, log_d: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Least-squares slope common to several observables (each with its own intercept) over the masked
    levels; ``log_d`` is (..., observables, levels), ``masks`` (observables, levels)."""
    num = np.zeros(log_d.shape[:-2])
    den = 0.0
    for k, mask in enumerate(masks):
        if mask.sum() < 2:
            continue
        x = log_h[mask] - log_h[mask].mean()
        y = log_d[..., k, :][..., mask]
        num = num + (y - y.mean(axis=-1, keepdims=True)) @ x
        den += x @ x
    return num / den if den > 0 else np.full(log_d.shape[:-2], np.nan)


def weak_order(
    values: dict[str, np.ndarray], steps: np.ndarray, rng: np.random.Generator, replicates: int, z: float
) -> dict[str, WeakOrderFit]:
    """Fit |E f_l - E f_{l+1}| ~ C_f h_l^p with one order p common to all observables f (each with its
    own constant), over the differences significantly non-zero at level z; bootstrap SE of p over batch
    means of paths. Returns one fit per observable (sharing ``order`` and ``order_se``)."""
    names = list(values)
    diffs = np.stack([values[n][:, :-1] - values[n][:, 1:] for n in names], axis=1)  # (paths, obs, levels)
    mean = diffs.mean(axis=0)
    se = diffs.std(axis=0, ddof=1) / np.sqrt(diffs.shape[0])
    scale = np.array([np.abs(values[n]).mean() for n in names])[:, None]
    at_roundoff = np.abs(mean) <= ROUNDOFF * scale
    significant = (np.abs(mean) > z * se) & ~at_roundoff
    h = steps[:-1]
    log_h = np.log(h)
    order = float(_pooled_slope(log_h, np.log(np.abs(mean) + 1e-300)[None], significant)[0])
    # Bootstrap over batch means of contiguous groups of paths (paths are i.i.d., so batches are too):
    # the same law for the means at a fraction of the memory of resampling every path.
    batches = batch_means(diffs, BATCHES)
    counts = bootstrap_counts(rng, batches.shape[0], replicates)
    boot = np.einsum("bp,pol->bol", counts, batches, optimize=True) / batches.shape[0]
    boot_order = _pooled_slope(log_h, np.log(np.abs(boot) + 1e-300), significant)
    order_se = float(np.std(boot_order, ddof=1)) if np.isfinite(order) else float("nan")
    return {
        n: WeakOrderFit(h, mean[k], se[k], significant[k], order, order_se, at_roundoff[k]) for k, n in enumerate(names)
    }


def order_check(
    fits: dict[str, WeakOrderFit], design: WeakDesign, z: float, config: dict, power: float = DETECTION_POWER
) -> Check:
    """``weak_order``: the claim is an error O(h) (one-sided), so the check fails when the interval lies below
    ``order - allowance`` and passes when it lies above it (an interval above ``order + allowance`` gets a note:
    this observable's leading error coefficient is small: decided by the interval, target ``NO_TARGET``); an
    interval across the floor passes only when its resolution (at ``power``, a staged look's) is at most
    ``design.order_target``, else inconclusive (as when fewer than three differences are significant)."""
    fit = next(iter(fits.values()))  # the order is common to all observables
    lo, hi = fit.order - z * fit.order_se, fit.order + z * fit.order_se
    usable = sum(int(f.significant.sum()) for f in fits.values())
    total = sum(f.significant.size for f in fits.values())
    note = f"{usable} of {total} coupled differences significant (order pooled over {len(fits)} observables)"
    floor = design.order - design.order_allowance
    confidence = z_confidence(z)
    resolution = detectable_effect((lo, hi), design.order_allowance, confidence, power)
    target = design.order_target
    bad = _nonfinite_fits(fits)
    if bad:  # a NaN difference is not merely "not significant"
        verdict = FAIL
        note += f"; {bad}"
    elif all(f.at_roundoff.all() for f in fits.values()):
        verdict = INCONCLUSIVE
        note += (
            f"; order not identifiable: every coupled difference is within rounding ({ROUNDOFF:g} of the "
            "observable's size), so the law does not change with depth on this ladder (an exact step?): a limit "
            "against a claim decides (check_weak_limit)"
        )
    elif usable < 3:
        verdict = INCONCLUSIVE
    elif not all_finite(fit.order, fit.order_se):
        verdict = FAIL
        note += f"; the fitted order ({fit.order}) or its bootstrap SE ({fit.order_se}) is not finite"
    elif hi < floor:
        verdict = FAIL
    elif lo > floor:  # the one-sided claim holds at this level, however wide the interval
        verdict, target = PASS, NO_TARGET
        note += f"; the interval lies above the floor {floor:g}: decided by its interval, no target needed"
        if lo > design.order + design.order_allowance:
            note += "; decays faster than order 1 (small leading coefficient: the O(h) bound holds)"
    elif resolution > design.order_target:
        verdict = INCONCLUSIVE
        advice = samples_to_decide(
            (lo, hi), design.order_allowance, confidence, design.paths, design.order_target, power
        )
        note += f"; resolution {resolution:.3g} > target {design.order_target:g}: about {advice} paths would decide"
    else:
        verdict = PASS
    if verdict == INCONCLUSIVE and usable < 3 and "not identifiable" not in note:
        note += _significance_plan(fits, z, design.paths)
    return Check(
        "weak_order",
        design.order,
        fit.order,
        (lo, hi),
        verdict,
        config,
        design.order_allowance,
        confidence,
        note=note,
        resolution=resolution,
        target=target,
    )


def _nonfinite_fits(fits: dict[str, WeakOrderFit]) -> str | None:
    """Where a coupled difference or its standard error is not finite, or None."""
    return first_nonfinite(
        {
            f"{kind} of {name}": getattr(f, field)
            for name, f in fits.items()
            for kind, field in (("coupled differences", "differences"), ("standard errors", "standard_errors"))
        }
    )


def _significance_plan(fits: dict[str, WeakOrderFit], z: float, paths: int) -> str:
    """How many paths would make the three coarsest coupled differences of the best observable significant, if
    their measured sizes hold (se ~ paths^-1/2)."""
    needed = []
    for fit in fits.values():
        sizes, errors = np.abs(fit.differences[:3]), fit.standard_errors[:3]
        if sizes.size == 3 and np.all(sizes > 0):
            needed.append(max(paths_to_resolve(2 * z * e, 2 * d, paths) for d, e in zip(sizes, errors)))
    if not needed:
        return ""
    return (
        f"; about {min(needed)} paths would make three differences significant at their measured sizes (or use "
        "coarser depths, where the O(h) differences are larger)"
    )


def limit_check(
    values: np.ndarray,
    last_difference: float,
    last_se: float,
    reference: float,
    reference_error: float,
    design: WeakDesign,
    z: float,
    config: dict,
    name: str = "weak_limit",
) -> Check:
    """``weak_limit``: the finest mean minus the reference, within z SE plus the bias allowance
    |Delta_last| + z SE(Delta_last) + reference error (``fail`` outside it or on any non-finite number);
    inconclusive when the resolution exceeds the target ``design.resolution`` times the observable's standard
    deviation (no power to see a wrong limit)."""
    finest = values[:, -1] if values.ndim == 2 else values
    estimate = float(finest.mean() - reference)
    se = float(finest.std(ddof=1) / np.sqrt(finest.size))
    allowance = abs(last_difference) + z * last_se + reference_error
    lo, hi = estimate - z * se, estimate + z * se
    confidence = z_confidence(z)
    sd = float(finest.std(ddof=1))
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
