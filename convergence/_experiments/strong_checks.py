"""The strong experiment's checks (``analyse_strong``): the two orders, the reference's order (or an exact
reference's agreement to rounding) and same_limit (``strong_same_limit``), with the convergence panel; the claims are
stated in the docstring of ``convergence._experiments.strong``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._output import Panel, Series
from .._statistics import (
    CONFIDENCE,
    DEEPER,
    FAIL,
    INCONCLUSIVE,
    PASS,
    TURN_TOLERANCE,
    Check,
    OrderFit,
    all_finite,
    at_least_verdict,
    bootstrap_counts,
    bootstrap_interval,
    detectable_effect,
    first_nonfinite,
    fit_order,
    noise_floor_flags,
    one_rate_levels,
    order_verdict,
    pre_asymptotic_flags,
    samples_to_decide,
    settled_away,
)
from .strong import REFERENCE_LEVELS, REFERENCE_ORDER, StrongData, StrongDesign, deeper_depths
from .strong_same_limit import same_limit_check

FLOOR_MARGIN = 3.0  # noise_floor_flags' margin: a level within 3 x the reference's RMS error is at its floor
EXACT_TOLERANCE = 1e-10  # an exact reference's consecutive levels may differ by this RMS at T (rounding; O(1) states)


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
        same_limit_check(
            data, design, config, confidence, ms, reference, reference_ms, reference_ms_hi, exact_reference
        )
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
