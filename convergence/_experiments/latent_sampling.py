"""The latent diffusion sampler's checks: a run (``latent_runs``) against the data law (``sampler_checks``: its
Monte Carlo law against the exact discrete law, the weak order in the step, the limit against the closed form, early
stopping) and the discrete law against the closed form (``exact_discrete_convergence``, exact algebra)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from verify._common import DOUBLE
from verify._rigorous import LatentSetting, distance

from .._models import LatentSampler, discrete_variances, distance_table
from .._runtime import random_stream
from .._statistics import (
    INCONCLUSIVE,
    Check,
    Verdict,
    bootstrap_counts,
    bootstrap_interval,
    detectable_effect,
    effect_check,
    effect_verdict,
    frechet_estimate,
    frechet_estimates,
    log_log_slope,
)
from .latent_runs import LatentDesign, backward_samples

ESTIMATOR_ORDER_BIAS = 0.05  # the Monte Carlo slope's bias beyond the exact discrete law's own pre-asymptotic slope
ORDER_TARGET = 0.25  # weak_order may miss an order error up to this (e.g. 0.75 claimed as 1)
PRE_ASYMPTOTIC = 0.1  # the exact discrete slope at the simulated steps must be this close to 1 to test the order
EXACT_ORDER_TOLERANCE = 0.05
PATH_FRACTIONS = (0.25, 0.5, 0.75)  # intermediate backward times (fractions of T) where the closed form is checked
# The Monte Carlo checks (discrete_law, closed_form_limit, early_stop_discrete) may miss an error of this fraction of
# the distance the backward run removes (W2^2 at its start minus the closed form at T)
LIMIT_TARGET = 0.002


def _discrete_distance(v: np.ndarray, variances: tuple[float, ...], d: int) -> float:
    return float(distance_table(v, variances)[d - 1])


def sampler_checks(
    name: str,
    sampler: LatentSampler,
    setting: LatentSetting,
    steps: int,
    factors: tuple[int, ...],
    paths: int,
    replicates: int,
    seed: int,
    key: Sequence[int],
    z: float,
    stop_times: dict[int, float],
    limit_target: float = LIMIT_TARGET,
) -> tuple[list[Check], dict]:
    """The sampler run ``name`` (``steps`` backward steps, coarser levels ``factors``, ``paths`` paths, a bootstrap of
    ``replicates`` resamples) against the data law of ``setting``: its Monte Carlo law against the exact discrete law,
    the weak order in the step, the limit against the closed form, and FD(t*) - FD(T) at each stopping time of
    ``stop_times`` ({d: t*}) on the same paths, each at ``z`` standard errors; the Monte Carlo checks' target is
    ``limit_target`` x the distance the run removes."""
    horizon = setting.horizon
    records = _record_steps(steps, horizon, stop_times)
    design = LatentDesign(steps, factors, tuple(records), paths)
    finals, recorded = backward_samples(sampler, design, seed, key)
    counts = bootstrap_counts(  # float64: the products of every estimate below read them unconverted
        random_stream(seed, (*key, 1)), paths, replicates, np.float64
    )
    variances = setting.variances
    dims = len(variances)
    config = {"spectrum": name, "score": _score_name(setting), "method": sampler.method, "d": dims}
    checks = []
    levels = (1, *factors)
    per_record = [frechet_estimates(r, variances, counts, tuple(range(1, dims + 1))) for r in recorded]
    curves = {d: [estimates[d - 1] for estimates in per_record] for d in range(1, dims + 1)}
    # the finest level's end state is the last record (the same samples): its estimate is not recomputed
    estimates = [curves[dims][-1]] + [
        frechet_estimate(finals[i][:, :dims], variances, counts) for i in range(1, len(levels))
    ]
    exact_discrete = [_discrete_distance(discrete_variances(sampler, steps // f)[0], variances, dims) for f in levels]
    closed = float(distance(DOUBLE, setting, horizon, dims))
    # 1. the sampler's Monte Carlo law against the exact algebra of its discrete law (bias-corrected estimate)
    est = estimates[0]
    corrected = est.value - est.bias
    half = z * est.standard_error
    alpha = 2 * float(stats.norm.sf(z))
    level = {"confidence": 1 - alpha, "false_failure_rate": alpha}
    # the scale of every Monte Carlo claim: the distance the backward run removes
    removed = float(distance(DOUBLE, setting, 0.0, dims)) - closed
    target = limit_target * abs(removed)
    checks.append(
        _effect_check(
            "discrete_law",
            exact_discrete[0],
            corrected,
            half,
            0.0,
            target,
            removed,
            config,
            level,
            f"bootstrap bias {est.bias:.3g} removed; exact discrete FD from the variance recursion",
        )
    )
    # 2. weak order in the number of steps from coupled level differences (same paths, same resamples)
    checks.append(_weak_order_check(estimates, exact_discrete, horizon / steps, levels, steps, alpha, level, config))
    checks.append(exact_discrete_convergence(sampler, variances, setting, config))
    # 3. the limit, by Monte Carlo alone, against the closed form
    checks.append(_closed_form_limit(estimates, closed, z, target, removed, config, level))
    # 4. early stopping on the discrete sampler: FD(t*) - FD(T) on the same paths against its exact algebra
    times = horizon * np.array(records) / steps
    checks += _early_stop_checks(
        sampler, setting, steps, records, times, curves, stop_times, z, target, removed, config, level
    )
    return checks, {"times": times, "curves": curves, "setting": setting}


def _record_steps(steps: int, horizon: float, stop_times: dict[int, float]) -> list[int]:
    """The backward steps at which the samples are recorded: every 64th, the last few (steps - 2^k) and each stopping
    time's."""
    return sorted(
        {
            0,
            *range(64, steps + 1, 64),
            *(steps - 2**k for k in range(6)),
            *(min(steps, round(t / horizon * steps)) for t in stop_times.values()),
        }
    )


def _score_name(setting: LatentSetting) -> str:
    if setting.variances_hat is None:
        return "exact"
    return "plug-in" if setting.cap is None else f"capped C={setting.cap:g}"


def _closed_form_limit(
    estimates: list, closed: float, z: float, target: float, removed: float, config: dict, level: dict
) -> Check:
    """closed_form_limit: Richardson 2 FD(h) - FD(2h) of the bias-corrected estimates (same paths and resamples), the
    O(h^2) remainder bounded by the Monte Carlo's own next extrapolation |R(h) - R(2h)| / 3, against the closed form
    ``closed``."""
    values = np.array([e.value - e.bias for e in estimates])
    replicas = np.stack([e.replicates for e in estimates])
    richardson, richardson_reps = 2 * values[0] - values[1], 2 * replicas[0] - replicas[1]
    coarser = 2 * values[1] - values[2]
    remainder = abs(richardson - coarser) / 3
    half_limit = z * float(np.std(richardson_reps, ddof=1))
    return _effect_check(
        "closed_form_limit",
        closed,
        richardson,
        half_limit,
        remainder,
        target,
        removed,
        config,
        level,
        f"Monte Carlo Richardson 2 FD(h) - FD(2h) = {richardson:.6g} vs closed form {closed:.6g} "
        f"(verify, exact); O(h^2) remainder allowance {remainder:.2g} from R(2h) = {coarser:.6g}",
    )


def _early_stop_checks(
    sampler: LatentSampler,
    setting: LatentSetting,
    steps: int,
    records: list[int],
    times: np.ndarray,
    curves: dict,
    stop_times: dict[int, float],
    z: float,
    target: float,
    removed: float,
    config: dict,
    level: dict,
) -> list[Check]:
    """early_stop_discrete for each stopping time t* of ``stop_times`` ({d: t*}): FD(t*) - FD(T) of the recorded
    curves (same paths and resamples) against the discrete law's exact gap; none where t* rounds to T."""
    horizon, variances = setting.horizon, setting.variances
    checks = []
    every_step = discrete_variances(sampler, steps, record_every=1)
    for d, t_star in stop_times.items():
        index = int(np.argmin(np.abs(times - t_star)))
        if index == len(times) - 1:  # t* rounds to T: FD(t*) - FD(T) is 0 by construction, nothing to test
            continue
        at_star, at_end = curves[d][index], curves[d][-1]
        gap = at_star.replicates - at_end.replicates
        value = (at_star.value - at_star.bias) - (at_end.value - at_end.bias)
        half_gap = z * float(np.std(gap, ddof=1))
        exact_gap = _discrete_distance(every_step[records[index]], variances, d) - _discrete_distance(
            every_step[-1], variances, d
        )
        continuous = float(distance(DOUBLE, setting, times[index], d) - distance(DOUBLE, setting, horizon, d))
        checks.append(
            _effect_check(
                "early_stop_discrete",
                exact_gap,
                value,
                half_gap,
                0.0,
                target,
                removed,
                {**config, "d": d},
                level,
                f"FD(t) - FD(T) at t = {times[index]:.5g} (t* = {t_star:.6g}) against the discrete law's exact gap; "
                f"the continuous gap is {continuous:.3g} (the last Euler steps add {exact_gap - continuous:.3g})",
            )
        )
    return checks


def _weak_order_check(
    estimates: list,
    exact_discrete: list[float],
    h: float,
    levels: tuple[int, ...],
    steps: int,
    alpha: float,
    level: dict,
    config: dict,
) -> Check:
    """weak_order: the slope of the coupled level differences |FD(2h) - FD(h)| over the step (levels ``levels`` of
    the finest step ``h``, same paths and resamples), claimed 1 where the exact discrete law is asymptotic at these
    steps, else that law's own slope (order 1 is then shown by exact algebra, ``exact_discrete_convergence``)."""
    sizes = h * np.array(levels[:-1], dtype=float)
    diffs = np.array([estimates[i + 1].value - estimates[i].value for i in range(len(levels) - 1)])
    reps = np.stack([estimates[i + 1].replicates - estimates[i].replicates for i in range(len(levels) - 1)], axis=1)
    exact_diffs = np.diff(exact_discrete)
    order, order_reps = _slope(sizes, np.abs(diffs)), [_slope(sizes, np.abs(r)) for r in reps]
    finite_reps = np.asarray(order_reps)[np.isfinite(order_reps)]  # a replicate with a zero difference has no slope
    lo, hi = bootstrap_interval(order, finite_reps, 1 - alpha)
    exact_order = _slope(sizes, np.abs(exact_diffs))
    # Order 1 is the claim where the discrete law is asymptotic at these steps; elsewhere (the capped score's stiff
    # phase) the Monte Carlo must reproduce the discrete law's own slope, and order 1 is shown by exact algebra below.
    asymptotic = abs(exact_order - 1.0) <= PRE_ASYMPTOTIC
    expected = 1.0 if asymptotic else exact_order
    # bias bound: the exact discrete law's own departure from order 1 at these steps, plus the estimator's
    allowance = abs(exact_order - expected) + ESTIMATOR_ORDER_BIAS
    reason = (
        f"exact discrete law gives {exact_order:.4f}"
        if asymptotic
        else f"pre-asymptotic at these steps: compared with the exact discrete law's slope {exact_order:.4f}"
    )
    reason += (
        f"; allowance = |exact slope - {expected:.4g}| + {ESTIMATOR_ORDER_BIAS:g} (the Monte Carlo slope's "
        "bias beyond the exact law's)"
    )
    resolution = detectable_effect((float(lo), float(hi)), allowance, 1 - alpha)
    if not np.all(np.abs(diffs) > 3 * np.std(reps, axis=0, ddof=1)):
        verdict, reason = INCONCLUSIVE, reason + "; level differences within 3 standard errors of 0"
    else:
        verdict = effect_verdict((float(lo), float(hi)), expected, allowance, resolution, ORDER_TARGET)
    return Check(
        "weak_order",
        expected,
        order,
        (float(lo), float(hi)),
        verdict,
        config,
        allowance,
        **level,
        resolution=resolution,
        target=ORDER_TARGET,
        note=f"slope of |FD(2h) - FD(h)| over h = T/{steps // 4}..T/{steps}; {reason}",
    )


def _effect_check(
    name: str,
    expected: float,
    estimate: float,
    half: float,
    allowance: float,
    target: float,
    removed: float,
    config: dict,
    level: dict,
    note: str,
) -> Check:
    """A Monte Carlo estimate +- ``half`` against ``expected`` +- ``allowance``, inconclusive when its resolution
    exceeds ``target`` (``LIMIT_TARGET`` of the distance ``removed`` by the run; also its relative resolution)."""
    return effect_check(
        name,
        expected,
        estimate,
        (estimate - half, estimate + half),
        allowance,
        target,
        config,
        **level,
        scale=removed,
        note=f"{note}; target {target:.3g}, a fraction of the distance the run removes ({removed:.4g}), also "
        "the unit of the relative resolution",
    )


def exact_discrete_convergence(
    sampler: LatentSampler, variances, setting: LatentSetting, config: dict, closed_form=distance
) -> Check:
    """Exact algebra, no sampling: the discrete law's distance at h = T/2^10 .. T/2^16 converges to the closed form
    at order 1 (slope of the last four errors at t = T) and to that limit (Richardson residual 2 e(h) - e(2h) small),
    at t = T and along the run (t = T/4, T/2, 3T/4: a closed form with the wrong time dependence, e.g. a wrong
    exponent in e^{-t}, can agree at t = T only). ``closed_form(ctx, setting, t, d)`` is the claim."""
    dims = len(variances)
    levels = [2**k for k in range(10, 17)]
    fractions = PATH_FRACTIONS + (1,)
    tables = [discrete_variances(sampler, n, n // 4) for n in levels]  # records at t = 0, T/4, T/2, 3T/4, T
    errors = np.array(
        [
            [
                _discrete_distance(table[round(4 * f)], variances, dims)
                - float(closed_form(DOUBLE, setting, setting.horizon * f, dims))
                for f in fractions
            ]
            for table in tables
        ]
    )  # (levels, times)
    steps = setting.horizon / np.array(levels, dtype=float)
    order = _slope(steps[-4:], np.abs(errors[-4:, -1]))
    residuals = 2 * errors[-1] - errors[-2]
    scale = np.maximum(np.abs(errors[-1]), 1e-14)
    ok = abs(order - 1.0) <= EXACT_ORDER_TOLERANCE and bool(
        np.all(np.abs(residuals) <= EXACT_ORDER_TOLERANCE * scale + 1e-14)
    )
    path = ", ".join(f"t = {setting.horizon * f:g}: {r:.2g}" for f, r in zip(fractions, residuals))
    return Check(
        "exact_discrete_convergence",
        1.0,
        order,
        (order, order),
        Verdict.of(bool(ok)),
        config,
        EXACT_ORDER_TOLERANCE,
        false_failure_rate=0.0,
        note=f"discrete-law error at t = T, h = T/1024 .. T/65536: {', '.join(f'{e:.3g}' for e in errors[:, -1])}; "
        f"Richardson residuals 2 e(h) - e(2h) along the run ({path}) must be below "
        f"{EXACT_ORDER_TOLERANCE:g} |e(h)| (limit = verify's closed form)",
    )


def _slope(steps: np.ndarray, values: np.ndarray) -> float:
    if np.any(values <= 0):
        return float("nan")
    return float(log_log_slope(steps, values))
