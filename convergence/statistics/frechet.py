"""Frechet (Gaussian Wasserstein-2) distance of samples to a centred diagonal Gaussian, with a bootstrap.

For samples with mean ``mu`` and covariance ``S`` (d x d, decoded with zeros beyond d) and the target
``N(0, diag(s^2))`` in R^D:

    FD = |mu|^2 + tr S + sum_j s_j^2 - 2 tr (diag(s) S diag(s))^{1/2},

the matrix square root taken through a symmetric eigen-decomposition (S is singular for a degenerate
sample, and the target may have zero variances). The plug-in estimator is biased by O(1/paths); the
bootstrap gives its standard error, a percentile interval and the bias estimate ``mean(replicates) - FD``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .estimators import CONFIDENCE


def frechet_from_moments(mean: np.ndarray, second: np.ndarray, target_variances: np.ndarray) -> np.ndarray:
    """FD from means (..., d) and uncentred second moments (..., d, d) of the first d coordinates."""
    d = mean.shape[-1]
    cov = second - mean[..., :, None] * mean[..., None, :]
    root = np.sqrt(np.asarray(target_variances, dtype=float))
    scaled = cov * root[:d, None] * root[None, :d]
    eig = np.clip(np.linalg.eigvalsh(scaled), 0.0, None)
    trace = np.trace(cov, axis1=-2, axis2=-1)
    return np.sum(mean * mean, axis=-1) + trace + np.sum(target_variances) - 2.0 * np.sum(np.sqrt(eig), axis=-1)


@dataclass(frozen=True)
class FrechetEstimate:
    """The FD of the samples, its bootstrap standard error, percentile interval, bias estimate and replicates
    (replicates of two estimates made with the same counts give the bootstrap of their difference)."""

    value: float
    standard_error: float
    ci: tuple[float, float]
    bias: float
    replicates: np.ndarray


def frechet_estimate(samples: np.ndarray, target_variances: np.ndarray, counts: np.ndarray,
                     confidence: float = CONFIDENCE) -> FrechetEstimate:
    """FD of ``samples`` (paths, d) with bootstrap replicates from ``counts`` (replicates, paths)."""
    paths = samples.shape[0]
    target_variances = np.asarray(target_variances, dtype=float)
    if samples.shape[1] == 0:
        value = float(np.sum(target_variances))
        return FrechetEstimate(value, 0.0, (value, value), 0.0, np.full(counts.shape[0], value))
    outer = samples[:, :, None] * samples[:, None, :]
    value = float(frechet_from_moments(samples.mean(0), outer.mean(0), target_variances))
    weights = counts / paths
    means = weights @ samples
    seconds = (weights @ outer.reshape(paths, -1)).reshape(-1, *outer.shape[1:])
    replicates = frechet_from_moments(means, seconds, target_variances)
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(replicates, [tail, 1 - tail])
    return FrechetEstimate(value, float(np.std(replicates, ddof=1)), (float(lo), float(hi)),
                           float(np.mean(replicates) - value), replicates)
