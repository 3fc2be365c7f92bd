"""The latent diffusion sampler of docs/models.md section 4 (Wu et al., arXiv:2510.08409), simulated in latent space.

Data ``X_0 ~ N(0, diag(s_1^2 >= ... >= s_D^2))``; the encoder keeps all D coordinates here and the latent
dimension d is applied when decoding (the score is diagonal, so coordinate j's path does not depend on d:
one run serves every d). Backward time ``t_k = k h``, ``h = T / N``; the score of coordinate j at forward time
``u = T - t`` is ``-m_j(u) y`` with ``m_j = min(C, 1 / tau2_j(u))``, ``tau2_j(u) = 1 + e^{-2u} (q_j - 1)`` and
``q_j`` the variance the score is built from (``s_j^2`` exact, ``sigma_hat_j^2`` plug-in).

    Euler-Maruyama (backward SDE):  y <- y + h (1 - 2 m_j(T - t_k)) y + sqrt(2) dB,   dB ~ N(0, h)
    Euler (probability-flow ODE):   y <- y + h (1 - m_j(T - t_k)) y

Both are linear, so the law of the discrete sampler is exact algebra: ``discrete_variances`` runs
``v <- (1 + h (1 - 2m))^2 v + 2h`` (SDE) or ``v <- (1 + h (1 - m))^2 v`` (ODE) from the start variance; the Monte
Carlo samples are checked against it, and it is checked against the continuous closed form of
``verify._rigorous.latent_stopping`` as h -> 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from verify._common import check_choice, check_int
from verify._models import latent_variances
from verify._rigorous import STARTS

from .._runtime import lambdified

METHODS = ("sde", "ode")


@dataclass(frozen=True)
class LatentSampler:
    """The score model and start law of one backward run: ``score_variances`` q_j (length D), the cap C
    (None: no cap), horizon T, ``method`` ("sde" or "ode") and ``start`` ("forward": N(0, tau2(T)); "standard":
    N(0, 1))."""

    score_variances: tuple[float, ...]
    horizon: float = 2.0
    cap: float | None = None
    method: str = "sde"
    start: str = "forward"

    def __post_init__(self) -> None:
        values = tuple(float(v) for v in self.score_variances)
        if not values or not all(math.isfinite(v) and v >= 0 for v in values):
            raise ValueError(f"score_variances must be finite and >= 0, got {self.score_variances!r}")
        object.__setattr__(self, "score_variances", values)
        if not (math.isfinite(self.horizon) and self.horizon > 0):
            raise ValueError(f"horizon must be finite and > 0, got {self.horizon!r}")
        if self.cap is not None and not (math.isfinite(self.cap) and self.cap > 1):
            raise ValueError(f"cap must be finite and > 1, got {self.cap!r}")
        check_choice("method", self.method, METHODS)
        check_choice("start", self.start, STARTS)

    @property
    def dim(self) -> int:
        return len(self.score_variances)

    def model_variance(self, u: float | np.ndarray) -> np.ndarray:
        """``tau2_j(u)`` for every coordinate: shape (D,) for a time u, (len(u), D) for an array of times (each
        ``e^{-2u}`` from ``math.exp``, so an array gives the numbers its times give one at a time)."""
        decay = math.exp(-2.0 * u) if np.ndim(u) == 0 else np.array([math.exp(-2.0 * x) for x in u])[:, None]
        return 1.0 + decay * (np.asarray(self.score_variances) - 1.0)

    def score_coefficient(self, u: float | np.ndarray) -> np.ndarray:
        """``m_j(u) = min(C, 1 / tau2_j(u))``, shaped as ``model_variance``; u > 0 (tau2 > 0 there)."""
        m = 1.0 / self.model_variance(u)
        return m if self.cap is None else np.minimum(self.cap, m)

    def start_variance(self) -> np.ndarray:
        return self.model_variance(self.horizon) if self.start == "forward" else np.ones(self.dim)

    def growth(self, k: int | np.ndarray, h: float) -> np.ndarray:
        """The step's linear factor ``1 + h (1 - c m_j(T - t_k))`` (c = 2 for the SDE, 1 for the ODE): shape (D,)
        for a step k, (len(k), D) for an array of steps."""
        c = 2.0 if self.method == "sde" else 1.0
        return 1.0 + h * (1.0 - c * self.score_coefficient(self.horizon - k * h))

    def step(self, y: np.ndarray, k: int, h: float, db: np.ndarray | None) -> np.ndarray:
        """Step k of y shaped (paths, D); ``db`` the N(0, h) increments (ignored by the ODE)."""
        out = y * self.growth(k, h)
        if self.method == "sde":
            out += math.sqrt(2.0) * db
        return out


def discrete_variances(sampler: LatentSampler, steps: int, record_every: int = 0) -> np.ndarray:
    """Exact per-coordinate variance of the discrete sampler after k steps, at k = 0, r, 2r, ..., steps (r =
    ``record_every``, 0 means only the end): shape (records, D).

    The recursion ``v_{k+1} = g_k^2 v_k + a`` (a = 2h for the SDE, 0 for the ODE) summed in closed form between
    records: ``v_e = (prod_{b<=j<e} g_j^2) v_b + a sum_{b<=i<e} prod_{i<j<e} g_j^2``, the products by a reversed
    cumulative product (all factors positive: relative rounding at most about (e - b) epsilon, as the recursion's)."""
    steps = check_int("steps", steps, minimum=1)
    h = sampler.horizon / steps
    squared = sampler.growth(np.arange(steps), h) ** 2  # (steps, D)
    noise = 2.0 * h if sampler.method == "sde" else 0.0
    v = sampler.start_variance()
    out = [v] if record_every else []
    begin = 0
    for end in range(record_every, steps + 1, record_every) if record_every else (steps,):
        tail = np.cumprod(squared[begin:end][::-1], axis=0)[::-1]  # tail[i] = prod_{j >= begin + i} g_j^2
        v = tail[0] * v + noise * (np.sum(tail[1:], axis=0) + 1.0)
        out.append(v)
        begin = end
    return np.array(out)


def plugin_variances(variances: np.ndarray, samples: int, rng: np.random.Generator) -> np.ndarray:
    """The diagonal of the sample second moments of ``samples`` data points ``X_0 ~ N(0, diag(variances))``."""
    samples = check_int("samples", samples, minimum=1)
    x = rng.standard_normal((samples, len(variances))) * np.sqrt(np.asarray(variances, dtype=float))
    return np.mean(x * x, axis=0)


def distance_table(v: np.ndarray, variances: tuple[float, ...]) -> np.ndarray:
    """W2^2 for d = 1..D along the last axis, from decoded variances ``v`` (..., D) in float64:
    ``sum_{j<=d} (sqrt(v_j) - s_j)^2 + sum_{j>d} s_j^2`` (the closed form of
    ``verify._rigorous.latent_stopping.distance``)."""
    root = np.sqrt(np.asarray(variances))
    return np.cumsum((np.sqrt(v) - root) ** 2, axis=-1) + (np.sum(root**2) - np.cumsum(root**2))


@cache
def _continuous_variance():
    """The derived SDE variance closed form (``verify._models.latent_variances``) compiled for numpy: v(t, T, q, v0)."""
    return lambdified(
        (latent_variances.t, latent_variances.T, latent_variances.q, latent_variances.v0),
        latent_variances.backward_variance(),
    )


def joint_grid(horizon: float) -> np.ndarray:
    """Backward times for ``joint_optimum``: 2001 even points on [0, T] and 801 log-spaced ones within 0.1 of T."""
    return np.unique(np.concatenate([np.linspace(0.0, horizon, 2001), horizon - np.logspace(-9, -1, 801)]))


def joint_optimum(variances: tuple[float, ...], hat: np.ndarray, start: str, horizon: float) -> tuple[int, float]:
    """``(d*, t*)`` minimising W2^2 over d and a grid of t (dense near T) in float64; ties go to the smaller d and
    the later t. Float64 suffices here: the decisions (d* = d_0, t* < T) are separated by far more than rounding."""
    grid = joint_grid(horizon)
    start_variance = LatentSampler(tuple(hat), horizon, start=start).start_variance()[None, :]
    v = np.maximum(_continuous_variance()(grid[:, None], horizon, np.asarray(hat)[None, :], start_variance), 0.0)
    table = distance_table(v, variances)  # (grid, D): W2^2 for d = 1..D
    best_t = table.shape[0] - 1 - np.argmin(table[::-1], axis=0)  # latest minimiser per d
    values = table[best_t, np.arange(table.shape[1])]
    d_star = int(np.argmin(values))  # first (smallest) d on ties
    return d_star + 1, float(grid[best_t[d_star]])
