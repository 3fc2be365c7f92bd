"""A user's layer map, expanded symbolically: the limit SDE one step defines, checked against a claim.

The user writes one layer as a sympy function ``step(xs, z, s)``: ``xs`` the tokens (a list of n column
vectors of d real symbols), ``z`` the layer's noise as standard normal symbols (``noise="matrix"``: a d x d
matrix, the increment of a matrix Brownian motion is ``s sigma z``; ``"scalar"``: a 1 x 1 matrix) and
``s = sqrt(h)``; it returns the n new token vectors. Taylor's theorem in s at s = 0,

    x_i' = x_i + s c1_i + s^2 c2_i + O(s^3),

and the Gaussian moments E z = 0, E z_pq z_rs = [pq = rs] give the limit SDE of the layer map (Ito):

    drift_i = E c2_i,        covariance (i a, j b) = E c1_ia c1_jb,        E c1_i = 0 (required).

A claimed SDE ``dx = drift(x) dt + diffusion(x, dW)`` is consistent with the layer when its drift equals the
derived one and its diffusion has the derived covariance (the diffusion itself is determined up to a
rotation of the noise, which does not change the law).

c1 is linear and c2 quadratic in z, so only these two moments enter: the result holds for any entry law
with mean 0 and variance 1. ``check_limit`` evaluates the derived and the claimed coefficients at random
points of the sphere at ``dps`` digits and reports the largest differences; the claim is consistent when
they vanish to working precision. Everything is in explicit coordinates for the given n and d.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import mpmath
import sympy as sp

from ..calculus import token_symbols

NOISE_KINDS = ("matrix", "scalar")
s = sp.Symbol("s", positive=True)


def noise_symbols(kind: str, dim: int) -> sp.Matrix:
    """The standard normal entries of one layer's noise: d x d (``matrix``) or 1 x 1 (``scalar``)."""
    if kind not in NOISE_KINDS:
        raise ValueError(f"noise must be one of {NOISE_KINDS}, got {kind!r}")
    rows = cols = dim if kind == "matrix" else 1
    return sp.Matrix(rows, cols, lambda p, q: sp.Symbol(f"z_{p}_{q}", real=True))


@dataclass(frozen=True)
class StepLimit:
    """The derived limit of one step, written in the token symbols ``tokens``: the per-token drift vectors,
    the noise loadings (column k of the (n d) x K matrix is the order-s coefficient's derivative in z_k, so
    the diffusion covariance is ``loadings loadings^T``) and the mean of the order-s term (must be 0)."""

    tokens: list[sp.Matrix]
    drift: sp.Matrix
    loadings: sp.Matrix
    first_order_mean: sp.Matrix

    @property
    def covariance(self) -> sp.Matrix:
        return _gram(self.loadings)


def _gram(loadings: sp.Matrix) -> sp.Matrix:
    """The covariance J J^T of increments J z with z standard normal."""
    return loadings * loadings.T


def _stack(vectors: Sequence[sp.Matrix]) -> sp.Matrix:
    return sp.Matrix.vstack(*[sp.Matrix(v) for v in vectors])


def one_step_limit(step: Callable, tokens: int, dim: int, noise: str = "matrix") -> StepLimit:
    """Expand ``step(xs, z, s)`` to order s^2 and take Gaussian expectations (module docstring).

    Expectations use derivatives, never expansion: c1 is linear in z, so E c1 = c1(z = 0) and
    Cov c1 = J J^T with J_k = dc1/dz_k; c2 is quadratic, so E c2 = c2(0) + 1/2 sum_k d^2 c2 / dz_k^2.
    """
    xs = token_symbols(tokens, dim)
    z = list(noise_symbols(noise, dim))
    new = step(xs, noise_symbols(noise, dim), s)
    if len(new) != tokens:
        raise ValueError(f"step must return {tokens} token vectors, got {len(new)}")
    flat = _stack(new)
    at_zero = dict.fromkeys(z, 0)
    c1 = flat.diff(s).subs(s, 0)
    c2 = flat.diff(s, 2).subs(s, 0) / 2
    loadings = sp.Matrix.hstack(*[c1.diff(zk).subs(at_zero) for zk in z])
    drift = c2.subs(at_zero) + sum((c2.diff(zk, 2).subs(at_zero) for zk in z), sp.zeros(*c2.shape)) / 2
    return StepLimit(xs, drift, loadings, c1.subs(at_zero))


def claimed_loadings(diffusion: Callable, xs: list[sp.Matrix], noise: str) -> sp.Matrix:
    """The loadings of a claimed diffusion ``diffusion(xs, dW) -> list of vectors`` (linear in dW; dW of unit
    variance per unit time, so sigma belongs in ``diffusion``): column k is its derivative in dW_k."""
    z = noise_symbols(noise, xs[0].rows)
    flat = _stack(diffusion(xs, z))
    return sp.Matrix.hstack(*[flat.diff(zk).subs(dict.fromkeys(list(z), 0)) for zk in z])


def _random_sphere_point(xs: list[sp.Matrix], generator: random.Random) -> dict:
    """Values for the token symbols: uniform directions (normalised uniform cube points), as mpmath numbers."""
    values = {}
    for token in xs:
        v = [2 * mpmath.mpf(generator.random()) - 1 for _ in range(token.rows)]
        norm = mpmath.sqrt(sum(c * c for c in v))
        values.update({symbol: c / norm for symbol, c in zip(token, v)})
    return values


def check_limit(step: Callable, drift: Callable, diffusion: Callable, tokens: int, dim: int,
                noise: str = "matrix", points: int = 4, dps: int = 30, seed: int = 0) -> dict:
    """Derived against claimed coefficients at ``points`` random points of the sphere, ``dps`` digits.

    ``drift(xs) -> list of n vectors`` and ``diffusion(xs, dW) -> list of n vectors`` (sympy). Returns the
    largest absolute differences of drift, covariance and first-order mean, and ``consistent``: all three
    below 10^(5 - dps).
    """
    derived = one_step_limit(step, tokens, dim, noise)
    xs = derived.tokens
    symbols = [symbol for token in xs for symbol in token]
    functions = {
        "drift": (derived.drift, _stack(drift(xs))),
        "covariance": (derived.covariance, _gram(claimed_loadings(diffusion, xs, noise))),
        "first_order_mean": (derived.first_order_mean, sp.zeros(*derived.first_order_mean.shape)),
    }
    compiled = {name: sp.lambdify(symbols, a - b, "mpmath") for name, (a, b) in functions.items()}
    residuals = dict.fromkeys(functions, mpmath.mpf(0))
    generator = random.Random(seed)
    with mpmath.workdps(dps):
        for _ in range(points):
            point = _random_sphere_point(xs, generator)
            values = [point[symbol] for symbol in symbols]
            for name, fn in compiled.items():
                residuals[name] = max(residuals[name], max(abs(v) for v in mpmath.matrix(fn(*values))))
        tolerance = mpmath.mpf(10) ** (5 - dps)
        consistent = all(v < tolerance for v in residuals.values())
    return {**{k: float(v) for k, v in residuals.items()}, "consistent": consistent, "tolerance": float(tolerance)}
