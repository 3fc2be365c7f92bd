"""Fitted orders: RMS error ~ C h^p over a ladder of steps, with bootstrap intervals (``OrderFit``); the flags of
pre-asymptotic and floor levels, the evidence a fail needs (an order settled away from the claim), and the
mean-square plateau B of ms(h) = A h^q + B at a claimed rate (the limit, judged apart from the rate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from verify._common import check_int, check_real

from .bootstrap import bootstrap_interval, bootstrap_means
from .estimators import CONFIDENCE, FAIL, INCONCLUSIVE, PASS, all_finite, confidence_z, effect_verdict, excludes_band


def least_squares_line(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intercept a and slope b of the least-squares line y = a + b x over the last axis, vectorised over the
    leading axes of ``y``: b = sum (y - ybar)(x - xbar) / sum (x - xbar)^2, a = ybar - b xbar. The suite's one
    line fit (orders, exponents, extrapolations)."""
    x = np.asarray(x, dtype=np.float64)
    xc = x - x.mean()
    y_mean = np.mean(y, axis=-1, keepdims=True)
    slope = ((y - y_mean) @ xc) / (xc @ xc)
    return y_mean[..., 0] - slope * x.mean(), slope


def least_squares_slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The slope of ``least_squares_line``."""
    return least_squares_line(x, y)[1]


def log_log_slope(steps: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """Least-squares slope of log(error) against log(step) over the last axis (vectorised over rows)."""
    return least_squares_slope(np.log(np.asarray(steps, dtype=np.float64)), np.log(errors))


@dataclass(frozen=True)
class OrderFit:
    """An error table against step with the fitted order and bootstrap intervals.

    ``error`` is the RMS error per level; ``order`` the least-squares slope of log error against
    log step over all levels; ``local_orders[l]`` the slope between levels l and l+1.
    """

    steps: np.ndarray
    error: np.ndarray
    error_ci: np.ndarray
    order: float
    order_ci: tuple[float, float]
    intercept: float
    local_orders: np.ndarray
    local_ci: np.ndarray
    order_replicates: np.ndarray = field(repr=False)
    ms_replicates: np.ndarray = field(repr=False)


def fit_order(steps: np.ndarray, sq_errors: np.ndarray, counts: np.ndarray, confidence: float = CONFIDENCE) -> OrderFit:
    """Fit ``RMS error ~ C h^p`` over all levels; intervals from the bootstrap ``counts``.

    ``sq_errors`` is (paths, levels) with levels in the order of ``steps`` (largest step first).
    """
    steps = np.asarray(steps, dtype=np.float64)
    if sq_errors.ndim != 2 or sq_errors.shape[1] != steps.size or steps.size < 2:
        raise ValueError(f"sq_errors must be (paths, {steps.size}) with at least 2 levels, got {sq_errors.shape}")
    if np.any(sq_errors < 0) or not np.all(np.isfinite(sq_errors)):
        raise ValueError("sq_errors must be finite and non-negative")
    ms = sq_errors.mean(axis=0)
    error = np.sqrt(ms)
    boot_ms = bootstrap_means(sq_errors, counts)
    boot_err = np.sqrt(np.maximum(boot_ms, np.finfo(float).tiny))
    order = float(log_log_slope(steps, error))
    boot_order = log_log_slope(steps, boot_err)
    log_ratio = np.log(steps[:-1] / steps[1:])
    local = np.log(error[:-1] / error[1:]) / log_ratio
    boot_local = np.log(boot_err[:, :-1] / boot_err[:, 1:]) / log_ratio
    intercept = float(np.mean(np.log(error)) - order * np.mean(np.log(steps)))
    return OrderFit(
        steps=steps,
        error=error,
        error_ci=bootstrap_interval(error, boot_err, confidence).T,
        order=order,
        order_ci=tuple(float(v) for v in bootstrap_interval(order, boot_order, confidence)),
        intercept=intercept,
        local_orders=local,
        local_ci=bootstrap_interval(local, boot_local, confidence).T,
        order_replicates=boot_order,
        ms_replicates=boot_ms,
    )


def pre_asymptotic_flags(fit: OrderFit, expected: float, allowance: float) -> np.ndarray:
    """Level l is pre-asymptotic when the local order between l and l+1 is, by its interval,
    outside ``expected +- allowance`` (the finest level has no finer neighbour and is never flagged)."""
    return np.append(excludes_band(fit.local_ci[:, 0], fit.local_ci[:, 1], expected, allowance), False)


def noise_floor_flags(fit: OrderFit, floor: float, margin: float = 3.0) -> np.ndarray:
    """Level l is at the noise floor when its error's lower bound is within ``margin`` times ``floor``
    (for strong errors the floor is the reference's own error: below it the reference, not the
    level, sets the measured error)."""
    return fit.error_ci[:, 0] <= margin * floor


def order_verdict(
    ci: tuple[float, float], expected: float, allowance: float, resolution: float, target: float, usable_levels: int
) -> str:
    """``fail`` when any number is not finite; ``inconclusive`` when fewer than three levels are above the noise
    floor (levels at the floor flatten the fitted slope, so the interval says nothing about the order); ``fail``
    when the interval misses ``expected +- allowance``; ``inconclusive`` when the ``resolution`` (the order error
    rejected with probability ``DETECTION_POWER``, ``detectable_effect``) exceeds ``target``; else ``pass``."""
    check_real("allowance", allowance, minimum=0.0)
    if not all_finite(*ci, expected, resolution, target):
        return FAIL
    if usable_levels < 3:
        return INCONCLUSIVE
    return effect_verdict(ci, expected, allowance, resolution, target)


def at_least_verdict(
    ci: tuple[float, float], expected: float, allowance: float, resolution: float, target: float, usable_levels: int
) -> str:
    """``order_verdict`` for a one-sided claim "at least ``expected``": ``fail`` only when the interval lies below
    ``expected - allowance``; a faster rate (an interval above the band) is no error; otherwise the resolution
    decides between ``pass`` and ``inconclusive``, as in ``effect_verdict``."""
    check_real("allowance", allowance, minimum=0.0)
    if not all_finite(*ci, expected, resolution, target):
        return FAIL
    if usable_levels < 3:
        return INCONCLUSIVE
    if ci[1] < expected - allowance:
        return FAIL
    return INCONCLUSIVE if resolution > target else PASS


TURN_TOLERANCE = 0.02  # how far the finest local order may still move towards the claim, by its interval, for a fail


def local_order_replicates(fit: OrderFit) -> np.ndarray:
    """The bootstrap replicates of the local orders between consecutive levels, (replicates, levels - 1)."""
    error = np.sqrt(np.maximum(fit.ms_replicates, np.finfo(float).tiny))
    return np.log(error[:, :-1] / error[:, 1:]) / np.log(fit.steps[:-1] / fit.steps[1:])


DEEPER = "a deeper ladder would decide"  # the note of a check that pre-asymptotic levels left undecided


def settled_away(
    fit: OrderFit,
    usable: np.ndarray,
    low: float,
    high: float = math.inf,
    confidence: float = CONFIDENCE,
    tolerance: float = TURN_TOLERANCE,
) -> str | None:
    """Evidence from the asymptotic regime that the errors' rate lies outside [``low``, ``high``], or None.

    Orders and limits are asymptotic claims: a ladder's coarse levels bend (pre-asymptotic) and its fine ones may sit
    at a floor, so a fitted slope outside the band is no evidence by itself. The evidence asked here is at the finest
    two local orders among the ``usable`` levels (three consecutive levels): the finest lies outside the band by its
    interval (below ``low``: its upper bound; above ``high``: its lower bound), and it is shown not to be turning
    back towards the band, its change over the one before being at most ``tolerance`` towards it by that change's
    interval. A true claim's pre-asymptotic levels turn towards its rate (model F's local orders 0.32, 0.39, 0.43 at
    depths 8 to 64 rise to 1/2; a curve rising 0.04 a level would reach the band within three doublings), so they
    cannot carry a fail; a limit other than the claim's levels off (its local orders fall to 0), and a wrong rate
    holds steady: both are evidence (a steady one once the change's interval is within +-0.02, which takes paths).
    Errors that grow over both of the finest doublings (both local orders at most 0 by their upper bounds) are
    evidence too: a limit approached from below. Returns a sentence saying what was shown."""
    usable = np.asarray(usable, dtype=bool)
    if usable.sum() < 3:
        return None
    end = int(np.flatnonzero(usable)[-1])
    if end < 2 or not usable[end - 2 : end + 1].all():
        return None
    j = end - 1  # the finest local order (levels end - 1, end); the one before is j - 1
    lo, hi = fit.local_ci[j]
    replicates = local_order_replicates(fit)
    change = bootstrap_interval(
        fit.local_orders[j] - fit.local_orders[j - 1], replicates[:, j] - replicates[:, j - 1], confidence
    )
    text = ", ".join(f"{p:.2f}" for p in fit.local_orders)
    return _settled((lo, hi), float(fit.local_ci[j - 1, 1]), change, low, high, text, tolerance)


def one_rate_levels(fit: OrderFit, usable: np.ndarray, confidence: float = CONFIDENCE, keep: int = 3) -> np.ndarray:
    """The levels of a ladder's asymptotic regime, as a mask: the finest ``keep`` ``usable`` levels, extended to
    coarser ones while each added local order is consistent with the next finer one (the bootstrap interval of their
    difference contains 0: consecutive error ratios consistent with one rate). A curve still bending at its coarse end
    (model F's sup-norm local orders 0.26, 0.33, 0.42, 0.42, 0.46 at depths 8 to 256, rising to 1/2) is judged on the
    levels where it has straightened, not pulled down by the ones before; ``keep`` levels are judged even when they
    still bend (the finest are the nearest to the limit). Levels are contiguous, ending at the finest usable one."""
    usable = np.asarray(usable, dtype=bool)
    mask = np.zeros(usable.size, dtype=bool)
    indices = np.flatnonzero(usable)
    if indices.size == 0:
        return mask
    end = int(indices[-1])
    start = end
    while start > 0 and usable[start - 1] and end - start + 1 < keep:
        start -= 1
    replicates = local_order_replicates(fit)
    while start > 0 and usable[start - 1]:
        j = start - 1  # the local order between levels j and j + 1, against the one between j + 1 and j + 2
        change = fit.local_orders[j] - fit.local_orders[j + 1]
        lo, hi = bootstrap_interval(change, replicates[:, j] - replicates[:, j + 1], confidence)
        if not lo <= 0.0 <= hi:
            break
        start = j
    mask[start : end + 1] = True
    return mask


def _settled(
    finest: tuple[float, float],
    before_upper: float,
    change: tuple[float, float],
    low: float,
    high: float,
    text: str,
    tolerance: float,
) -> str | None:
    """``settled_away``'s decision from the finest local order's interval, the upper bound of the one before, and the
    interval of the change between them."""
    lo, hi = finest
    if hi < low and before_upper <= 0 and hi <= 0:
        return f"the errors grow over the two finest doublings of depth (local orders {text}, both at most 0)"
    if hi < low and change[1] <= tolerance:
        return (
            f"the finest local order [{lo:.3g}, {hi:.3g}] lies below {low:.3g} and is not rising towards it (its "
            f"change over the one before at most {change[1]:.3g}; local orders {text})"
        )
    if lo > high and change[0] >= -tolerance:
        return (
            f"the finest local order [{lo:.3g}, {hi:.3g}] lies above {high:.3g} and is not falling towards it (its "
            f"change over the one before at least {change[0]:.3g}; local orders {text})"
        )
    return None


def differences_settled_away(
    values: np.ndarray,
    low: float,
    high: float = math.inf,
    confidence: float = CONFIDENCE,
    tolerance: float = TURN_TOLERANCE,
) -> str | None:
    """``settled_away`` for coupled differences D_l = E[f_l - f_{l+1}] of per-path values (paths, levels) along a
    depth ladder (doubling): local orders p_l = log2 |D_l / D_{l+1}|, their intervals by the delta method with the
    differences' joint covariance on the same paths (consecutive differences share a level, so they are correlated).
    Needs the three finest differences significant (each interval excludes 0) and of one sign; None (no evidence)
    otherwise: a difference near 0, or a sign change (a curve crossing its limit, as the hybrid model's overlap does at
    depths 16 to 64), makes log |D| meaningless and its delta-method interval wrong."""
    values = np.asarray(values, dtype=np.float64)
    d = values[:, :-1] - values[:, 1:]
    if d.shape[1] < 3:
        return None
    mean = d.mean(axis=0)
    cov = np.atleast_2d(np.cov(d, rowvar=False)) / d.shape[0]
    last = mean[-3:]
    if not (np.all(np.isfinite(last)) and np.all(last != 0) and np.all(np.isfinite(cov))):
        return None
    z = confidence_z(confidence)
    k = d.shape[1]
    if np.any(np.abs(last) <= z * np.sqrt(np.diag(cov)[-3:])) or len(set(np.sign(last))) > 1:
        return None

    def interval(gradient: np.ndarray, point: float) -> tuple[float, float]:
        full = np.zeros(k)
        full[-gradient.size :] = gradient / math.log(2)
        se = float(np.sqrt(max(full @ cov @ full, 0.0)))
        return point - z * se, point + z * se

    logs = np.log2(np.abs(mean))
    orders = logs[:-1] - logs[1:]
    finest = interval(np.array([1 / last[1], -1 / last[2]]), float(orders[-1]))
    before = interval(np.array([1 / last[0], -1 / last[1], 0.0]), float(orders[-2]))
    change = interval(np.array([-1 / last[0], 2 / last[1], -1 / last[2]]), float(orders[-1] - orders[-2]))
    if not all(np.isfinite(orders[-2:])):
        return None
    text = ", ".join(f"{p:.2f}" for p in orders)
    return _settled(finest, before[1], change, low, high, text, tolerance)


def plateau(steps: np.ndarray, ms: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """Weighted least-squares ``B`` in ``ms_l = A h_l^q + B`` (weights 1/ms_l^2), vectorised over rows.

    ``ms`` is (replicates, levels) and ``exponent`` q is (replicates,). ``B`` is the mean-square
    distance between the two limits: zero when both schemes converge to the same process.
    """
    x = np.asarray(steps, dtype=np.float64)[None, :] ** np.asarray(exponent)[:, None]
    w = 1.0 / ms**2
    sw, sx, sxx = w.sum(-1), (w * x).sum(-1), (w * x * x).sum(-1)
    sm, sxm = (w * ms).sum(-1), (w * x * ms).sum(-1)
    return (sxx * sm - sx * sxm) / (sxx * sw - sx * sx)


MIN_DECAY = 1e-3  # a fitted order whose interval starts below this detects no decay (errors flat to rounding)


def limit_plateau(
    fit: OrderFit, ms_order: float | None = None, first_level: int = 0, confidence: float = CONFIDENCE
) -> tuple[float, tuple[float, float], str]:
    """The plateau ``B`` of ``ms = A h^q + B``, its interval, and how it was found.

    q = the claimed mean-square order ``ms_order`` when given (the verdict's rule: B is identifiable even
    when the data show a different rate, and a wrong limit cannot hide in a fitted slope), fitted over the
    levels from ``first_level`` on (the asymptotic ones). Without ``ms_order`` (a diagnostic only),
    q = 2 x the fitted order per bootstrap replicate; when that order's interval reaches 0 no decay is
    detected, A h^q and B cannot be told apart, and the finest level's mean square itself is the plateau.
    """
    if ms_order is not None:
        levels = slice(check_int("first_level", first_level, minimum=0, maximum=fit.steps.size - 2), None)
        q = np.full(fit.ms_replicates.shape[0], float(ms_order))
        point = float(plateau(fit.steps[levels], fit.error[None, levels] ** 2, q[:1])[0])
        boot = plateau(fit.steps[levels], fit.ms_replicates[:, levels], q)
        used = "" if first_level == 0 else f", levels {first_level + 1}..{fit.steps.size} (coarser ones pre-asymptotic)"
        how = f"mean-square plateau B of ms = A step^{ms_order:g} + B (claimed rate{used})"
    elif fit.order_ci[0] > MIN_DECAY:
        point = float(plateau(fit.steps, fit.error[None, :] ** 2, np.array([2 * fit.order]))[0])
        boot = plateau(fit.steps, fit.ms_replicates, 2 * fit.order_replicates)
        how = "mean-square plateau B of ms = A step^(2p) + B (fitted rate)"
    else:
        point, boot = float(fit.error[-1] ** 2), fit.ms_replicates[:, -1]
        how = "no decay detected (order interval reaches 0): B = the finest level's mean-square error"
    return point, tuple(float(v) for v in bootstrap_interval(point, boot, confidence)), how


def plateau_fit_bias(fit: OrderFit, ms_order: float, first_level: int = 0, signed: bool = False) -> float:
    """How far the plateau ``B`` of ``ms = A h^q + B`` (q = ``ms_order``, levels from ``first_level`` on) moves when
    the coarsest of those levels is dropped: an estimate of the fit's bias from terms beyond A h^q (a pre-asymptotic
    h^{q+1}, a log factor), which the fit otherwise puts into B. 0 when fewer than two levels would remain.
    ``signed``: B over all the levels less B without the coarsest, instead of its size."""
    first = check_int("first_level", first_level, minimum=0)
    if fit.steps.size - first < 3:
        return 0.0
    q = np.array([float(ms_order)])
    ms = fit.error[None, :] ** 2
    coarse = plateau(fit.steps[first:], ms[:, first:], q)[0]
    fine = plateau(fit.steps[first + 1 :], ms[:, first + 1 :], q)[0]
    return float(coarse - fine) if signed else float(abs(coarse - fine))


def asymptotic_start(pre_asymptotic: np.ndarray, keep: int = 3) -> int:
    """The first level after the leading run of pre-asymptotic ones, keeping at least ``keep`` levels."""
    flags = np.asarray(pre_asymptotic, dtype=bool)
    start = int(np.argmin(flags)) if not flags.all() else flags.size
    return min(start, max(0, flags.size - keep))
