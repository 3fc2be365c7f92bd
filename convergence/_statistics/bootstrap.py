"""The bootstrap over paths: resample multiplicities, means, medians and percentile intervals.

Levels share their paths (one Brownian path per sample at every depth), so uncertainty is estimated by resampling
paths, never levels: one bootstrap replicate draws P paths with replacement and recomputes every level. Every
function draws from the generator it is given, a batch of replicates at a time, with the same draws whatever the
batch.
"""

from __future__ import annotations

import math

import numpy as np

from verify._common import check_int

from .estimators import CONFIDENCE, confidence_z

MIN_TAIL_REPLICATES = 5  # a percentile interval needs this many bootstrap replicates beyond each end


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


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> np.ndarray:
    """Percentile interval over axis 0: shape (2, ...)."""
    alpha = 1.0 - confidence
    return np.quantile(replicates, [alpha / 2, 1 - alpha / 2], axis=0)
