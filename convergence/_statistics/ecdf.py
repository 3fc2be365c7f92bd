"""Distances between laws from samples, with distribution-free simultaneous bounds: empirical CDFs, the
Dvoretzky-Kiefer-Wolfowitz band (Massart's constant), and the Kolmogorov and Wasserstein-1 distances of signed
combinations of empirical CDFs (a Richardson extrapolation of several laws is one).

Massart (1990): for N i.i.d. samples of any law with CDF F, P(sup_x |F_N(x) - F(x)| > eps) <= 2 exp(-2 N eps^2), so
``dkw_halfwidth(N, alpha)`` = sqrt(log(2 / alpha) / (2 N)) bounds the whole empirical CDF's error at level alpha. A
combination G = sum_k c_k F_k of independent laws, estimated by the same combination of empirical CDFs, errs by at
most sum_k |c_k| eps_k everywhere at once (a union bound over the k bands), so its Kolmogorov norm sup |G| does too,
and its L1 norm int |G| (the Wasserstein-1 distance when G is a difference of two CDFs) by the same times the length
of the support.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from verify._common import check_int, check_real


def dkw_halfwidth(samples: int, alpha: float) -> float:
    """sqrt(log(2 / alpha) / (2 N)): the empirical CDF of N samples lies within it of the true CDF everywhere with
    probability at least 1 - alpha (Massart's Dvoretzky-Kiefer-Wolfowitz inequality)."""
    check_int("samples", samples, minimum=1)
    check_real("alpha", alpha, minimum=0.0, maximum=1.0, strict_minimum=True)
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * samples))


def ecdf(values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The empirical CDF of ``values`` (N,) at ``points``: the fraction of values <= each point."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    return np.searchsorted(ordered, points, side="right") / ordered.shape[0]


def combination(laws: Sequence[np.ndarray], weights: Sequence[float], points: np.ndarray) -> np.ndarray:
    """sum_k c_k F_k(points) over the empirical CDFs of the samples ``laws`` with weights ``weights``."""
    return sum(c * ecdf(values, points) for c, values in zip(weights, laws) if c != 0)


def pooled_points(laws: Sequence[np.ndarray]) -> np.ndarray:
    """Every sample value, sorted: a signed combination of empirical CDFs is constant between consecutive ones, so
    its supremum is attained there and its integral is a sum over them."""
    return np.unique(np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in laws]))


def kolmogorov_norm(laws: Sequence[np.ndarray], weights: Sequence[float]) -> float:
    """sup_x |sum_k c_k F_k(x)| over the empirical CDFs, exactly (at the pooled sample points)."""
    points = pooled_points(laws)
    return float(np.max(np.abs(combination(laws, weights, points)), initial=0.0))


def l1_norm(laws: Sequence[np.ndarray], weights: Sequence[float]) -> float:
    """int |sum_k c_k F_k(x)| dx over the empirical CDFs, exactly: for two laws with weights 1, -1, the
    Wasserstein-1 distance of the samples. Outside the pooled sample range the combination is sum c_k (0 below; above,
    0 for weights that sum to 0, as every distance here has)."""
    points = pooled_points(laws)
    return float(np.sum(np.abs(combination(laws, weights, points[:-1])) * np.diff(points)))


def combined_halfwidth(sizes: Sequence[int], weights: Sequence[float], alpha_each: float) -> float:
    """sum_k |c_k| eps_k with eps_k = ``dkw_halfwidth(N_k, alpha_each)``: the sup-norm error of the combination when
    every band holds (probability at least 1 - (number of weights) alpha_each)."""
    return float(sum(abs(c) * dkw_halfwidth(n, alpha_each) for c, n in zip(weights, sizes) if c != 0))
