"""Two-point exponents: the almost-sure rate (median of log-distance) and the mean-square rate.

Experiment. Pairs start at a small distance delta_0 (x uniform, y = N(x + delta_0 e), e a uniform unit
tangent vector), and the layer map runs at steps h and 2h on the same Brownian path. Recorded at
equally spaced times: the log of a distance-like quantity r (|x - y| near collapse, |x + y| near the
antipodal state).

Estimators (per level, then extrapolated):
  median exponent  slope of t -> median_paths log r_t   (lambda_1 for |x - y|: an almost-sure rate)
  mean-square      slope of t -> log mean_paths r_t^2   (lambda_bar for |x - y|: a mean-square rate)
Both are least-squares slopes over the record times. In the linear regime (r small) the log-distance
of the two-point motion is a Brownian motion with drift (the overlap is an autonomous diffusion), so
both slopes are exact from t = 0. The two levels give a Richardson estimate 2 s(h) - s(2h), which
removes the O(h) bias of the discrete layers; intervals are bootstrap percentile intervals over
paths (both levels resampled together).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from verify._common import check_int, check_real

from .._models import LayerMap
from .._paths import PathStreams, RecordGrid, record_at_two_steps, uniform_sphere
from .._statistics import (
    CONFIDENCE,
    INCONCLUSIVE,
    PASS,
    Check,
    bootstrap_interval,
    bootstrap_means_drawn,
    bootstrap_medians,
    effect_check,
    least_squares_slope,
    percentile_interval,
)


@dataclass(frozen=True, kw_only=True)
class ExponentDesign(RecordGrid):
    """Horizon T, fine steps L (level h = T/L and 2h), records, paths, delta_0, bootstrap replicates."""

    paths: int = 8192
    delta0: float = 1e-4
    block_paths: int = 4096
    replicates: int = 400
    # The largest exponent error the checks may miss, allowance included, relative to max(|expected|, 0.05)
    target: float = 0.3

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("records", self.records, minimum=2)  # a slope needs three record times
        check_real("delta0", self.delta0, minimum=0.0, maximum=0.1, strict_minimum=True)


def close_pair(delta0: float, antipodal: bool = False):
    """Initial state: x uniform, y = N(+-x + delta0 e) with e a uniform unit vector orthogonal to x."""

    def initial(streams: PathStreams, tokens: int, dim: int) -> np.ndarray:
        x = uniform_sphere(streams, 1, dim)[:, 0]
        e = streams.initial(lambda rng, m: rng.standard_normal((m, dim)))
        e -= np.sum(e * x, axis=-1, keepdims=True) * x
        e /= np.linalg.norm(e, axis=-1, keepdims=True)
        y = (-x if antipodal else x) + delta0 * e
        return np.stack([x, y / np.linalg.norm(y, axis=-1, keepdims=True)], axis=1)

    return initial


def log_distance(antipodal: bool = False) -> Callable[[np.ndarray], np.ndarray]:
    """log |x_0 - x_1| (or log |x_0 + x_1|) per path."""
    sign = 1.0 if antipodal else -1.0
    return lambda x: np.log(np.linalg.norm(x[:, 0] + sign * x[:, 1], axis=-1))


def record_log_distances(
    model: LayerMap, design: ExponentDesign, seed: int, key: Sequence[int], antipodal: bool = False, progress=None
) -> np.ndarray:
    """log r at the record times for levels h and 2h: shape (paths, 2, records + 1)."""
    return record_at_two_steps(
        model, design, seed, key, close_pair(design.delta0, antipodal), log_distance(antipodal), progress
    )


@dataclass(frozen=True)
class ExponentEstimate:
    """Slopes at h and 2h, the Richardson estimate and its interval, and the curve at level h."""

    at_h: float
    at_2h: float
    estimate: float
    ci: tuple[float, float]
    curve: np.ndarray
    curve_ci: np.ndarray


def median_exponent(
    logs: np.ndarray, design: ExponentDesign, rng: np.random.Generator, confidence: float = CONFIDENCE
) -> ExponentEstimate:
    """Slope of the median over paths of log r (both levels), Richardson-extrapolated; interval at ``confidence``."""
    times = design.times
    med = np.median(logs, axis=0)  # (2, records+1)
    slopes = least_squares_slope(times, med)
    samples = bootstrap_medians(logs, rng, design.replicates)  # (replicates, 2, records+1)
    boot, curves = least_squares_slope(times, samples), samples[:, 0]
    rich = 2 * boot[:, 0] - boot[:, 1]
    estimate = float(2 * slopes[0] - slopes[1])
    return ExponentEstimate(
        float(slopes[0]),
        float(slopes[1]),
        estimate,
        tuple(float(v) for v in bootstrap_interval(estimate, rich, confidence)),
        med[0],
        percentile_interval(curves),
    )


def mean_square_exponent(
    logs: np.ndarray, design: ExponentDesign, rng: np.random.Generator, confidence: float = CONFIDENCE
) -> ExponentEstimate:
    """Slope of log mean over paths of (r / delta_0)^2 (both levels), Richardson-extrapolated; interval at
    ``confidence``."""
    times = design.times
    paths = logs.shape[0]
    sq = np.exp(2 * (logs - np.log(design.delta0))).reshape(paths, -1)
    log_ms = np.log(sq.mean(axis=0)).reshape(2, -1)
    slopes = least_squares_slope(times, log_ms)
    boot_ms = np.log(bootstrap_means_drawn(sq, rng, design.replicates)).reshape(design.replicates, 2, -1)
    boot = least_squares_slope(times, boot_ms)
    rich = 2 * boot[:, 0] - boot[:, 1]
    estimate = float(2 * slopes[0] - slopes[1])
    return ExponentEstimate(
        float(slopes[0]),
        float(slopes[1]),
        estimate,
        tuple(float(v) for v in bootstrap_interval(estimate, rich, confidence)),
        log_ms[0],
        percentile_interval(boot_ms[:, 0]),
    )


def exponent_check(
    name: str,
    expected: float,
    est: ExponentEstimate,
    design: ExponentDesign,
    config: dict,
    allowance_floor: float = 0.005,
    note: str = "",
    confidence: float = CONFIDENCE,
) -> Check:
    """``fail`` when the interval misses expected +- allowance; ``inconclusive`` when its resolution exceeds
    ``design.target`` x max(|expected|, 0.05) or it cannot tell the exponent's sign (contains 0).

    Allowance: half the first-order correction |s(h) - s(2h)| (the Richardson estimate's remaining
    O(h^2) bias is smaller when the expansion in h is regular) plus ``allowance_floor`` for the
    linearisation (distances stay below about 100 delta_0).
    """
    allowance = 0.5 * abs(est.at_h - est.at_2h) + allowance_floor
    scale = max(abs(expected), 0.05)
    detail = f"slopes at h: {est.at_h:.4g}, at 2h: {est.at_2h:.4g}; Richardson 2 s(h) - s(2h)"
    check = effect_check(
        name,
        float(expected),
        est.estimate,
        est.ci,
        allowance,
        design.target * scale,
        config,
        confidence=confidence,
        scale=scale,
        note=f"{detail}. {note}".strip(),
    )
    if check.verdict == PASS and est.ci[0] <= 0 <= est.ci[1]:
        return replace(check, verdict=INCONCLUSIVE, note=f"interval holds 0: the sign is not decided. {check.note}")
    return check
