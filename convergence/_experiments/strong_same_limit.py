"""same_limit: the strong experiment's plateau B of ms(h) = A h^{2p} + B at the *claimed* order p against the
reference's own mean-square error (docstring of ``convergence._experiments.strong``), with the fit's model bias, the
target a relative drift error leaves on the same paths, and the evidence a fail needs."""

from __future__ import annotations

import math

import numpy as np

from .._statistics import (
    DEEPER,
    FAIL,
    INCONCLUSIVE,
    PASS,
    Check,
    OrderFit,
    all_finite,
    asymptotic_start,
    bootstrap_interval,
    detectable_effect,
    limit_plateau,
    limit_verdict,
    plateau,
    plateau_fit_bias,
    samples_to_decide,
    settled_away,
)
from .strong import REFERENCE_ORDER, StrongData, StrongDesign, deeper_depths


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


def same_limit_check(
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
    # in a public check an exact map's plateau B estimates the reference's own error, the very quantity of this
    # allowance: its upper bound exceeds the allowance's about half the time, so the allowance holds a margin beyond it
    margin = REFERENCE_SAFETY if design.for_users and not exact_reference else 1.0
    allowance = reference_allowance = margin * reference_ms_hi
    if design.for_users and all_finite(*ci):
        allowance, how = _with_fit_bias(ms_fit, ms_check, first, confidence, design, allowance, how)
    resolution = detectable_effect(ci, allowance, confidence, design.power, design.bias_span)
    verdict = limit_verdict(ci, allowance, finest_ms)
    if design.for_users and (ms_check.claim or not exact_reference) and verdict == FAIL and all_finite(*ci):
        verdict, how = _plateau_fail_evidence(ms_fit, ms_floor, reference, design, confidence, how)
    note = _same_limit_note(how, exact_reference, reference_ms, reference_ms_hi, allowance, finest_ms, ms_fit)
    if exact_reference and verdict == FAIL and all_finite(*ci):
        verdict, note = _exact_reference_fail(ms_fit, first, ci, design, note)
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


def _same_limit_note(
    how: str,
    exact_reference: bool,
    reference_ms: float,
    reference_ms_hi: float,
    allowance: float,
    finest_ms: float,
    ms_fit: OrderFit,
) -> str:
    """same_limit's note: how B was fitted, the allowance and what it holds, and the fitted-rate plateau beside it
    (a diagnostic only: a fitted rate absorbs a plateau)."""
    fitted_point, fitted_ci, _ = limit_plateau(ms_fit)
    reference_text = f"{'the exact reference' if exact_reference else 'reference'} mean-square error {reference_ms:.3g}"
    return (
        f"{how} (steps h); allowance = {reference_text} (upper {reference_ms_hi:.3g})"
        + (
            ""
            if allowance == reference_ms_hi
            else f"; in all {allowance:.3g} (x {REFERENCE_SAFETY:g} in a public check, and any model bias of the fit)"
        )
        + f"; finest-level mean-square error {finest_ms:.3g}; diagnostic, not the verdict: at the fitted rate "
        f"B = {fitted_point:.3g} [{fitted_ci[0]:.3g}, {fitted_ci[1]:.3g}]"
    )


def _exact_reference_fail(
    ms_fit: OrderFit, first: int, ci: tuple[float, float], design: StrongDesign, note: str
) -> tuple[str, str]:
    """A fail against an exact reference, kept unless the ladder is pre-asymptotic. No reference error hides the
    fit's own bias here: a plateau that moves by half its size when the coarsest fitted level is dropped is a
    pre-asymptotic ladder (terms beyond A h^q put into B), not a second limit: inconclusive."""
    moved = plateau_fit_bias(ms_fit, 2 * design.order, first)
    if ci[0] <= 2 * moved:
        return INCONCLUSIVE, note + (
            f"; not identifiable on this ladder: B moves by {moved:.3g} when the coarsest fitted level is dropped "
            f"(at least half its lower bound {ci[0]:.3g}): {DEEPER}"
        )
    return FAIL, note


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
