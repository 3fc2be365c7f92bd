"""Estimators: strong errors, fitted orders with bootstrap intervals, flags and verdicts.

Everything here works on per-path arrays, independent of any model. Levels share their paths
(one Brownian path per sample at every depth), so uncertainty is estimated by resampling paths,
never levels: one bootstrap replicate draws P paths with replacement and recomputes every level.

Verdicts use (1 - alpha) percentile intervals. For a check whose estimator is consistent and whose
bias lies within the stated allowance, the probability of a false ``fail`` is at most alpha
(two-sided interval, the check fails only on one side of the band).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

from verify._common import Verdict, check_int, check_real

CONFIDENCE = 0.99
FAMILY_ALPHA = (
    1.0 - CONFIDENCE
)  # the false-failure rate allowed to a whole study (or public check) when its claims hold
PASS, FAIL, INCONCLUSIVE = Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE
MIN_TAIL_REPLICATES = 5  # a percentile interval needs this many bootstrap replicates beyond each end
VERDICTS = tuple(Verdict)
DETECTION_POWER = 0.9  # a check's resolution is the effect it rejects with this probability
NO_TARGET = math.inf  # the target of a check whose pass its interval decides alone (``Check``)
NO_TARGET_TEXT = "none needed"  # how reports write it


def all_finite(*values) -> bool:
    """True when every number (scalars or arrays) is finite: no verdict may pass on NaN or infinity."""
    return all(bool(np.all(np.isfinite(np.asarray(v, dtype=np.float64)))) for v in values)


def first_nonfinite(arrays: dict[str, np.ndarray], levels: list[str] | None = None) -> str | None:
    """A message naming the first scheme (key) and level (last axis) holding NaN or infinity, else None."""
    for name, values in arrays.items():
        values = np.asarray(values, dtype=np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            where = ""
            if values.ndim >= 1:
                column = int(np.argwhere(bad.reshape(-1, values.shape[-1]).any(axis=0))[0, 0])
                label = levels[column] if levels is not None and column < len(levels) else f"#{column}"
                where = f" at level {label}"
            return (
                f"non-finite values in {name}{where} ({int(bad.sum())} of {values.size}): a scheme diverged or the "
                "data are invalid"
            )
    return None


def z_value(checks: int, family_alpha: float = FAMILY_ALPHA) -> float:
    """Two-sided normal quantile for ``checks`` simultaneous intervals (Bonferroni) at family level ``family_alpha``."""
    check_int("checks", checks, minimum=1)
    return float(stats.norm.ppf(1 - family_alpha / (2 * checks)))


def confidence_z(confidence: float) -> float:
    """Two-sided normal quantile of a ``confidence`` interval: z with P(|Z| <= z) = confidence."""
    return float(stats.norm.ppf(0.5 + confidence / 2))


def z_confidence(z: float) -> float:
    """The confidence of a two-sided interval of z standard errors: P(|Z| <= z) (the inverse of ``confidence_z``)."""
    return 1.0 - 2.0 * float(stats.norm.sf(z))


def family_confidence(checks: int, family_alpha: float = FAMILY_ALPHA) -> float:
    """The per-check confidence that keeps ``checks`` checks' family-wise false-failure rate at ``family_alpha``
    (Bonferroni: each check at level family_alpha / checks)."""
    return 1.0 - family_alpha / check_int("checks", checks, minimum=1)


def bootstrap_interval(point: np.ndarray | float, replicates: np.ndarray, confidence: float = CONFIDENCE) -> np.ndarray:
    """Interval over axis 0 of bootstrap ``replicates``, shape (2, ...): the percentile interval when each tail
    holds at least ``MIN_TAIL_REPLICATES`` replicates, else ``point +- z sd(replicates)`` (bootstrap standard
    error; Bonferroni levels reach tails no feasible number of replicates resolves)."""
    alpha = 1.0 - confidence
    if alpha / 2 * replicates.shape[0] >= MIN_TAIL_REPLICATES:
        return percentile_interval(replicates, confidence)
    z = confidence_z(confidence)
    se = np.std(replicates, axis=0, ddof=1)
    point = np.asarray(point, dtype=np.float64)
    return np.stack([point - z * se, point + z * se])


def scale_family_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(mean, lower, upper)``: the interval for the mean of positive, right-skewed ``values`` (means of squares)
    whose spread grows with their mean, ``{v : |mean - v| <= z (se / mean) v} = [mean / (1 + z c), mean / (1 - z c)]``
    with ``c = se / mean`` (a scale family ``v W``: c does not depend on v).

    The t interval ``mean +- z se`` misses low far more often than its level says, because a low mean comes with a
    low se: for N |<phi, mu_a> - <phi, mu_b>|^2 / 2 over 192 paths of uniform tokens on S^4 (3 functions x 4000
    replications), P(t < -3) = 0.0064 against the normal 0.00135, while this interval's tails beyond 3 are 0.0014
    and 0.0017.
    When ``z c >= 1`` (a handful of paths) the interval has no finite upper end, and the t interval is returned."""
    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean())
    se = float(values.std(ddof=1) / np.sqrt(values.size))
    z = confidence_z(confidence)
    relative = z * se / mean if mean > 0 else np.inf
    if relative >= 1.0:
        return mean, mean - z * se, mean + z * se
    return mean, mean / (1.0 + relative), mean / (1.0 - relative)


def confidence_label(confidence: float) -> str:
    """``confidence`` as a percentage with enough decimals to show its alpha's first digit (0.99 -> 99%,
    0.99967 -> 99.97%, 0.99999 -> 99.999%): never "100%" for a confidence below 1."""
    alpha_percent = 100.0 * (1.0 - confidence)
    digits = 0 if alpha_percent <= 0 else max(0, math.ceil(round(-math.log10(alpha_percent), 9)))
    return f"{100 * confidence:.{digits}f}%"


def detectable_effect(
    ci: tuple[float, float],
    allowance: float,
    confidence: float,
    power: float = DETECTION_POWER,
    bias_span: float = 1.0,
) -> float:
    """The smallest departure from the expected value that the check rejects with probability ``power``:
    bias_span allowance + (z_{1-alpha/2} + z_power) se, with se = the interval's half-width / z_{1-alpha/2}
    (normal approximation; in the check's own units).

    ``bias_span`` 1 assumes the estimate unbiased (the allowance a tolerance on the claim, as an order's band);
    ``bias_span`` 2 is the worst case when the allowance bounds a bias b in [-allowance, allowance]: the check fails
    when the interval clears the band, estimate > allowance + z se, and an effect e with b = -allowance needs
    e > 2 allowance + (z + z_power) se to do so with probability ``power``."""
    z = confidence_z(confidence)
    se = (ci[1] - ci[0]) / (2 * z)
    return float(bias_span * allowance + (z + float(stats.norm.ppf(power))) * se)


@dataclass(frozen=True)
class Check:
    """One claim tested by a study, as written to the reports.

    ``claim`` is False for a finding: a conjecture the sources do not make (e.g. model F as N grows), reported
    with its own verdict but left out of the study's verdict. ``resolution`` is the smallest departure from
    ``expected`` the check rejects with probability ``DETECTION_POWER`` (``detectable_effect``; 1 - 0.1/K at one of
    K staged looks, ``sequential``), in the check's own units; ``relative_resolution`` the same as a relative
    coefficient error where the check has one. ``target`` is the largest departure the check may miss, in the same
    units (docs/checks.md lists the targets by kind of check); ``NO_TARGET`` for a check whose pass is decided by
    its interval alone (an interval that excludes every wrong value: a mutant rejected, an order above its floor, a
    run that shows an event exists), which its note says (JSON: "none needed").

    Two rules hold here, whatever rule produced the verdict: a ``pass`` whose estimate or interval holds NaN or
    infinity becomes a ``fail``; and a statistical claim check (one that can fail by chance: ``claim`` and
    ``false_failure_rate > 0``) passes only at a stated resolution within its target; a ``pass`` without them, or
    with ``resolution > target``, becomes ``inconclusive``, saying so.
    """

    name: str
    expected: float
    estimate: float
    ci: tuple[float, float]
    verdict: Verdict
    config: dict = field(default_factory=dict)
    allowance: float = 0.0
    confidence: float = CONFIDENCE
    false_failure_rate: float | None = None  # None: 1 - confidence (certified and exact checks declare 0)
    note: str = ""
    claim: bool = True
    resolution: float | None = None
    relative_resolution: float | None = None
    target: float | None = None
    # the resolution's bias span (``detectable_effect``): 2 where the allowance bounds a bias (the public checks)
    bias_span: float = 1.0

    def __post_init__(self) -> None:
        if self.false_failure_rate is None:
            object.__setattr__(self, "false_failure_rate", 1.0 - self.confidence)
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {tuple(map(str, VERDICTS))}, got {self.verdict!r}")
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        if self.verdict == PASS and not all_finite(self.estimate, *self.ci):
            self._demote(FAIL, "non-finite estimate or interval: cannot pass")
        elif self.verdict == PASS and self.statistical and self.target != NO_TARGET:
            if self.resolution is None or self.target is None or not all_finite(self.resolution, self.target):
                self._demote(
                    INCONCLUSIVE,
                    f"resolution {self.resolution} or target {self.target} not stated: a "
                    "statistical check cannot pass without both",
                )
            elif self.resolution > self.target:
                self._demote(
                    INCONCLUSIVE,
                    f"resolution {self.resolution:.3g} > target {self.target:.3g}: the check "
                    "cannot see every effect it may not miss",
                )

    @property
    def resolution_ratio(self) -> float | None:
        """``resolution / target``, unit-free (at most 1 when the check sees every effect it may not miss); None
        without a finite resolution and a finite positive target (``NO_TARGET`` included)."""
        numbers = (self.resolution, self.target)
        if not all(isinstance(v, (int, float)) for v in numbers) or not all_finite(*numbers) or self.target <= 0:
            return None
        return self.resolution / self.target

    @property
    def statistical(self) -> bool:
        """A claim that can fail by chance (not a finding, not certified or exact)."""
        return self.claim and self.false_failure_rate > 0

    def _demote(self, verdict: Verdict, reason: str) -> None:
        object.__setattr__(self, "verdict", verdict)
        object.__setattr__(self, "note", f"{reason}. {self.note}".strip())

    def to_dict(self) -> dict:
        """A JSON-ready dict (non-finite numbers become None: reports are valid JSON)."""
        data = asdict(self)
        if self.bias_span == 1.0:  # the studies' reports keep their fields
            del data["bias_span"]
        data["ci"] = [float(self.ci[0]), float(self.ci[1])]
        data = json_safe(data)
        if self.target == NO_TARGET:
            data["target"] = NO_TARGET_TEXT
        return data


def json_safe(value):
    """``value`` with every non-finite float replaced by None (NaN is not JSON), recursively."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    return value


def rms(sq_errors: np.ndarray) -> np.ndarray:
    """Root mean square over paths (axis 0) of squared errors shaped (paths, levels)."""
    return np.sqrt(np.mean(sq_errors, axis=0))


# resample indices or multiplicities held at once (``bootstrap_counts``, ``bootstrap_means_drawn``)
BOOTSTRAP_BYTES = 8 * 2**20


def bootstrap_counts(rng: np.random.Generator, paths: int, replicates: int, dtype=np.int64) -> np.ndarray:
    """Multiplicities of each path in ``replicates`` resamples with replacement: (replicates, paths) of ``dtype``
    (float64 for counts that several matrix products share).

    The resamples are ``rng.integers(0, paths, size=(replicates, paths))``, drawn a batch of replicates at a time
    (the generator's stream continues, so the draws are the same) so that only the result and one batch of indices
    are held: at 45056 paths and 400 replicates, one draw and its flattened copy page-faulted 288 MB per call."""
    check_int("paths", paths, minimum=1)
    check_int("replicates", replicates, minimum=1)
    out = np.empty((replicates, paths), dtype=dtype)
    batch = max(1, BOOTSTRAP_BYTES // (8 * paths))
    for start in range(0, replicates, batch):
        for row, resample in enumerate(rng.integers(0, paths, size=(min(batch, replicates - start), paths)), start):
            out[row] = np.bincount(resample, minlength=paths)
    return out


def bootstrap_medians(
    values: np.ndarray, rng: np.random.Generator, replicates: int, window: int | None = None
) -> np.ndarray:
    """Medians over paths of ``replicates`` resamples of ``values`` (paths, ...): shape (replicates, ...).

    Each resample is ``rng.integers(0, paths, paths)``, one replicate after the other, and its median equals
    ``np.median(values[resample], axis=0)`` bit for bit. Every column is sorted once; a resample's median is the
    average of its ((n-1)//2)-th and (n//2)-th order statistics, read off the cumulative multiplicities in that
    order. The cumulative multiplicity at a sorted position p is Binomial(n, p/n), so those ranks are reached
    within ``window`` (default 6 sqrt(n) + 16, about 12 standard deviations) positions of the middle: the
    multiplicities before that window are summed by one matrix product for a batch of replicates, and only the
    window is gathered and accumulated (a resample that reaches a rank outside it is read off its whole order).
    The result does not depend on ``window`` (integer sums, exact in float64).
    """
    check_int("replicates", replicates, minimum=1)
    paths = values.shape[0]
    columns = values.reshape(paths, -1).T
    order = np.argsort(columns, axis=1, kind="stable")
    ordered = np.take_along_axis(columns, order, axis=1)
    rows = np.arange(columns.shape[0])
    low, high = (paths - 1) // 2, paths // 2  # 0-based ranks of the two middle values
    half = int(6 * math.sqrt(paths)) + 16 if window is None else check_int("window", window, minimum=0)
    start, stop = max(0, low - half), min(paths, high + half + 1)
    before = np.zeros(columns.shape)  # per column, the paths sorted before the window
    before[rows[:, None], order[:, :start]] = 1.0
    inside = order[:, start:stop]
    out = np.empty((replicates, columns.shape[0]))
    batch = max(1, BOOTSTRAP_BYTES // (8 * max(paths, inside.size)))  # a batch's counts and its window's
    for first in range(0, replicates, batch):
        counts = bootstrap_counts(rng, paths, min(batch, replicates - first), np.float64)  # the same draws
        prefix = counts @ before.T  # (batch, columns): multiplicity sorted before the window
        cumulative = prefix[:, :, None] + np.cumsum(counts[:, inside], axis=2)
        # the first position whose cumulative multiplicity exceeds the rank (each row is non-decreasing)
        lo = start + np.sum(cumulative <= low, axis=2)
        hi = start + np.sum(cumulative <= high, axis=2)
        for r, c in zip(*np.nonzero((prefix > low) | (cumulative[:, :, -1] <= high))):  # a rank outside the window
            whole = np.cumsum(counts[r, order[c]])
            lo[r, c], hi[r, c] = np.sum(whole <= low), np.sum(whole <= high)
        out[first : first + len(counts)] = (ordered[rows, lo] + ordered[rows, hi]) / 2
    return out.reshape(replicates, *values.shape[1:])


def bootstrap_means(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Means over resampled paths of ``values`` (paths, levels): shape (replicates, levels)."""
    return (counts @ values) / counts.shape[1]


def bootstrap_means_drawn(values: np.ndarray, rng: np.random.Generator, replicates: int) -> np.ndarray:
    """``bootstrap_means(values, bootstrap_counts(rng, paths, replicates))``: the same resamples (the generator's
    stream continues from one batch of replicates to the next), drawn a batch at a time so that no (replicates,
    paths) array is held (at 10^5 paths and 400 replicates it took 1 GB, page-faulted afresh on every call)."""
    check_int("replicates", replicates, minimum=1)
    paths = values.shape[0]
    batch = max(1, BOOTSTRAP_BYTES // (8 * paths))
    return np.concatenate(
        [
            bootstrap_means(values, bootstrap_counts(rng, paths, min(batch, replicates - start)))
            for start in range(0, replicates, batch)
        ]
    )


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


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> np.ndarray:
    """Percentile interval over axis 0: shape (2, ...)."""
    alpha = 1.0 - confidence
    return np.quantile(replicates, [alpha / 2, 1 - alpha / 2], axis=0)


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
    lo, hi = fit.local_ci[:, 0], fit.local_ci[:, 1]
    off = (hi < expected - allowance) | (lo > expected + allowance)
    return np.append(off, False)


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


def paths_to_resolve(width: float, target_width: float, paths: int) -> int:
    """Paths that would shrink an interval of ``width`` (measured on ``paths``) to ``target_width``: width ~
    paths^-1/2."""
    return int(math.ceil(paths * (width / target_width) ** 2))


def paths_for_effect(
    ci: tuple[float, float],
    allowance: float,
    confidence: float,
    paths: int,
    effect: float,
    power: float = DETECTION_POWER,
    bias_span: float = 1.0,
) -> int | None:
    """Paths at which a check measured on ``paths`` (interval ``ci`` at ``confidence``, bias ``allowance``) would reject
    a departure of ``effect`` with probability ``power``: ``detectable_effect`` = allowance + (z_alpha + z_power) se,
    with se ~ paths^-1/2, solved for the paths. None when ``effect`` is within the allowance (no number of paths
    resolves it) or the interval is not finite."""
    z = confidence_z(confidence)
    se = (ci[1] - ci[0]) / (2 * z)
    floor = bias_span * allowance
    if not (math.isfinite(se) and se > 0 and effect > floor):
        return None
    return max(1, int(math.ceil(paths * ((z + float(stats.norm.ppf(power))) * se / (effect - floor)) ** 2)))


ADVICE_MARGIN = 1.25  # advice plans for the target with 25% more samples: the pilot's se is itself an estimate


def samples_to_decide(
    ci: tuple[float, float],
    allowance: float,
    confidence: float,
    paths: int,
    target: float,
    power: float = DETECTION_POWER,
    bias_span: float = 1.0,
) -> int | None:
    """The advice an inconclusive check gives: ``paths_for_effect`` at the ``target``, times ``ADVICE_MARGIN`` (at
    exactly the planned size the resolution reaches the target only about half the time; the margin, ~12% on the
    standard error, makes a run that follows the advice decide with high probability)."""
    planned = paths_for_effect(ci, allowance, confidence, paths, target, power, bias_span)
    return None if planned is None else int(math.ceil(ADVICE_MARGIN * planned))


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


def limit_verdict(ci: tuple[float, float], allowance: float, resolution: float) -> str:
    """For a plateau ``B`` (expected 0): ``fail`` when its interval lies above ``allowance`` (the
    reference's own mean-square error); ``inconclusive`` when the interval reaches ``resolution``
    (the finest level's mean-square error, so the data cannot tell a plateau from convergence) or lies
    below ``-allowance`` (B is a mean square, >= 0 up to the reference's error: an interval below it
    shows a biased fit, e.g. pre-asymptotic levels, not a pass); ``pass`` when the interval lies within
    +- ``allowance`` (the layer agrees with the claim to the reference's own accuracy, as an exact step does, whose
    errors are the reference's at every level); ``fail`` when any number is not finite."""
    if not all_finite(*ci, allowance, resolution):
        return FAIL
    lo, hi = ci
    if lo > allowance:
        return FAIL
    if hi < -allowance:
        return INCONCLUSIVE
    if lo >= -allowance and hi <= allowance:
        return PASS
    if hi >= resolution:
        return INCONCLUSIVE
    return PASS


def effect_verdict(ci: tuple[float, float], expected: float, allowance: float, resolution: float, target: float) -> str:
    """For an effect expected at ``expected`` (two-sided): ``fail`` when the interval misses
    ``expected +- allowance`` or any of them is not finite; ``inconclusive`` when the check's ``resolution`` (its
    detectable effect; infinite when it has no scale) exceeds ``target``; else ``pass``."""
    if not all_finite(*ci, expected, allowance):
        return FAIL
    lo, hi = ci
    if hi < expected - allowance or lo > expected + allowance:
        return FAIL
    return INCONCLUSIVE if resolution > target else PASS


def effect_check(
    name: str,
    expected: float,
    estimate: float,
    ci: tuple[float, float],
    allowance: float,
    target: float,
    config: dict | None = None,
    *,
    confidence: float = CONFIDENCE,
    power: float = DETECTION_POWER,
    scale: float | None = None,
    bias_span: float = 1.0,
    **fields,
) -> Check:
    """The check of an effect expected at ``expected`` +- ``allowance`` (two-sided), measured as ``estimate`` with
    interval ``ci`` at ``confidence``: its resolution is ``detectable_effect`` at ``power``, its verdict
    ``effect_verdict`` at ``target``; ``scale`` (when given and non-zero) turns the resolution into the relative one;
    ``bias_span`` as in ``detectable_effect`` (2: the allowance bounds a bias). ``fields``: the Check's other fields
    (``note``, ``false_failure_rate``, ``claim``)."""
    resolution = detectable_effect(ci, allowance, confidence, power, bias_span)
    return Check(
        name,
        expected,
        estimate,
        ci,
        effect_verdict(ci, expected, allowance, resolution, target),
        {} if config is None else config,
        allowance,
        confidence,
        resolution=resolution,
        target=target,
        relative_resolution=resolution / abs(scale) if scale else None,
        bias_span=bias_span,
        **fields,
    )


def combine_verdicts(verdicts: list[str]) -> Verdict:
    """A study fails if any check fails, is inconclusive if any is, and passes otherwise."""
    return Verdict.combine(verdicts)


def detection_rate(n: int, count: int, power: float = DETECTION_POWER) -> float:
    """The smallest per-trial rate p at which at least ``count`` of ``n`` trials occur with probability ``power``:
    P(Binomial(n, p) >= count) = I_p(count, n - count + 1) (the regularised incomplete beta function), so p is the
    ``power`` quantile of Beta(count, n - count + 1)."""
    check_int("n", n, minimum=1)
    check_int("count", count, minimum=1, maximum=n)
    return float(stats.beta.ppf(power, count, n - count + 1))


def excess_resolution(n: int, bound: float, z: float, power: float = DETECTION_POWER) -> float:
    """The resolution of "the fraction is not above ``bound``", which fails when the Wilson interval (at ``z``) of
    k successes in ``n`` lies above ``bound``: the smallest true fraction that fails with probability ``power``,
    ``detection_rate`` at the smallest such k (infinite when none is). With ``bound`` = 0 the check is "the fraction
    is positive" (one success): 1 - (1 - power)^(1/n) is the fraction seen with probability ``power``."""
    check_int("n", n, minimum=1)
    check_real("bound", bound, minimum=0.0, maximum=1.0)
    first = next((k for k in range(1, n + 1) if bound == 0 or wilson(k, n, z)[0] > bound), None)
    return math.inf if first is None else detection_rate(n, first, power)


def wilson(successes: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # The bounds are exactly 0 and 1 at the extremes (rounding would otherwise leave ~1e-18).
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi
