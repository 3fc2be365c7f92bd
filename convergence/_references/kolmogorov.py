"""Deterministic weak reference: the backward Kolmogorov equation of a diffusion on [-1, 1].

For ``d rho = b(rho) dt + sqrt(a(rho)) dB`` with b(+-1) = a(+-1) = 0 (both ends degenerate), the
function ``u(t, rho) = E[f(rho_t) | rho_0 = rho]`` solves ``u_t = b u' + (a/2) u''`` with u(0) = f and
needs no boundary condition (the generator vanishes at the ends, which are absorbing for the
equation). Chebyshev collocation at the N + 1 Gauss-Lobatto points turns the generator into a matrix
A = diag(b) D + diag(a/2) D^2, so u(T) = expm(T A) f on the grid (scipy's scaling-and-squaring Pade),
and barycentric interpolation gives u(T, rho_0) anywhere. The error is estimated by refinement: the
same value at N and 2N points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import sympy as sp
from scipy.linalg import expm

from verify._common import check_int, check_real

from .._runtime import lambdified

Function = Callable[[np.ndarray], np.ndarray]


@cache
def chebyshev(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Lobatto points x_j = cos(pi j / n) and the differentiation matrix (Trefethen, Spectral
    Methods in MATLAB, cheb.m), with the diagonal from the negative row sums."""
    n = check_int("n", n, minimum=2)
    x = np.cos(np.pi * np.arange(n + 1) / n)
    c = np.ones(n + 1)
    c[0] = c[-1] = 2.0
    c *= (-1.0) ** np.arange(n + 1)
    dx = x[:, None] - x[None, :]
    dmat = np.outer(c, 1 / c) / (dx + np.eye(n + 1))
    dmat -= np.diag(dmat.sum(axis=1))
    return x, dmat


def barycentric(x_nodes: np.ndarray, values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Interpolate grid values at the Gauss-Lobatto nodes to points ``x`` (barycentric formula); ``values`` (nodes,
    ...) gives (points, ...)."""
    n = x_nodes.size - 1
    w = (-1.0) ** np.arange(n + 1)
    w[0] *= 0.5
    w[-1] *= 0.5
    x = np.atleast_1d(np.asarray(x, dtype=np.float64))
    diff = x[:, None] - x_nodes[None, :]
    exact = np.isclose(diff, 0.0, atol=1e-15)
    diff[exact] = 1.0
    terms = w / diff
    out = np.tensordot(terms, values, axes=1) / terms.sum(axis=1).reshape(-1, *[1] * (np.ndim(values) - 1))
    rows, cols = np.nonzero(exact)
    out[rows] = values[cols]
    return out


@dataclass(frozen=True)
class KolmogorovSolution:
    """``value`` = E[f(rho_T) | rho_0] at each requested rho_0; ``error`` = |value(N) - value(2N)|."""

    value: np.ndarray
    error: np.ndarray
    points: int


def generator_matrix(drift: Function, diffusion_squared: Function, n: int) -> tuple[np.ndarray, np.ndarray]:
    x, dmat = chebyshev(n)
    return x, drift(x)[:, None] * dmat + 0.5 * diffusion_squared(x)[:, None] * (dmat @ dmat)


def expectation(
    drift: Function,
    diffusion_squared: Function,
    observable: Function,
    horizon: float,
    rho0,
    points: int = 96,
) -> KolmogorovSolution:
    """E[f(rho_T) | rho_0] by collocation with ``points`` and ``2 points`` nodes (error estimate)."""
    horizon = check_real("horizon", horizon, minimum=0.0)
    rho0 = np.atleast_1d(np.asarray(rho0, dtype=np.float64))
    if np.any(np.abs(rho0) > 1):
        raise ValueError(f"rho0 must be in [-1, 1], got {rho0}")
    values = []
    for n in (points, 2 * points):
        x, a = generator_matrix(drift, diffusion_squared, n)
        values.append(barycentric(x, expm(horizon * a) @ observable(x), rho0))
    return KolmogorovSolution(value=values[1], error=np.abs(values[1] - values[0]), points=2 * points)


def value_gradients(
    drift: Function, diffusion_squared: Function, observable: Function, horizon: float, steps: int, points: int = 96
) -> tuple[np.ndarray, np.ndarray]:
    """The nodes x and u_rho(t_k, x) = d/d rho E[f(rho_T) | rho_{t_k} = rho] at the nodes for t_k = k T / ``steps``,
    k = 0 .. steps - 1: (steps, points + 1), from u(t_k) = expm((T - t_k) A) f (``generator_matrix``) and the
    Chebyshev differentiation matrix (the gradient a martingale control variate needs)."""
    x, a = generator_matrix(drift, diffusion_squared, points)
    one_step = expm((horizon / steps) * a)
    values = [observable(x)]  # u(T), u(T - h), ..., u(0)
    for _ in range(steps):
        values.append(one_step @ values[-1])
    _, dmat = chebyshev(points)
    return x, np.stack([dmat @ v for v in values[:0:-1]])  # u(0), u(h), ..., u(T - h)


def lambdify_overlap(drift: sp.Expr, diffusion_squared: sp.Expr, values: dict) -> tuple[Function, Function]:
    """numpy callables of a derived overlap SDE (``verify.overlap_sde``) with parameters substituted."""
    rho = sp.Symbol("rho", real=True)
    b = lambdified(rho, drift.subs(values))
    a = lambdified(rho, diffusion_squared.subs(values))

    def vectorised(fn):
        return lambda x: np.broadcast_to(np.asarray(fn(x), dtype=np.float64), np.shape(x)).copy()

    return vectorised(b), vectorised(a)
