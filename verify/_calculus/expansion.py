"""One normalised layer step expanded in powers of s = sqrt(h): the limit SDE it defines.

Every layer map of the suite is, token by token, ``x' = N(x + s xi + s^2 mu)`` with N(y) = y/|y|,
``mu`` the drift part and ``xi = dN[v] / s`` the noise part (E xi = 0, E[xi xi^T] = S). sympy expands
the normalisation factor ``|x + s xi + s^2 mu|^{-1}`` in s, and the expectation rules

    E[<x,xi>] = 0,   E[<x,xi>^2] = x^T S x,   E[|xi|^2] = tr S,   E[<x,xi> xi] = S x

(exact for any noise with these two moments: Gaussian, Rademacher or uniform entries alike) turn
the s^1 and s^2 coefficients into the conditional mean and covariance of the increment:

    x' - x = s P_x xi + s^2 (...) + O(s^3),   E[x' - x] / h -> drift,   E[(x'-x)(x'-x)^T] / h -> P_x S P_x.

Because the increment starts at order s, its third absolute moment is O(h^{3/2}) = o(h).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from .algebra import Span, Vec
from .generator import ParticleSystem

s = sp.Symbol("s", positive=True)
# <x, xi>, |xi|^2, <x, mu>, <xi, mu>, |mu|^2 for a unit token x.
X1, X2, Y1, Z1, Z2 = sp.symbols("X1 X2 Y1 Z1 Z2", real=True)


@cache
def normalisation_series() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """Coefficients c0, c1, c2 of ``|x + s xi + s^2 mu|^{-1} = c0 + c1 s + c2 s^2 + O(s^3)`` for |x| = 1."""
    norm2 = 1 + 2 * s * X1 + s**2 * (X2 + 2 * Y1) + 2 * s**3 * Z1 + s**4 * Z2
    series = sp.series(norm2 ** sp.Rational(-1, 2), s, 0, 3).removeO()
    return tuple(sp.expand(series.coeff(s, k)) for k in range(3))


def increment_coefficients() -> dict[int, dict[str, sp.Expr]]:
    """``x' - x`` by powers of s, each a combination of the vectors x, xi, mu with scalar coefficients."""
    c0, c1, c2 = normalisation_series()
    # (x + s xi + s^2 mu)(c0 + c1 s + c2 s^2), collected by power of s.
    return {
        0: {"x": c0 - 1},
        1: {"x": c1, "xi": c0},
        2: {"x": c2, "xi": c1, "mu": c0},
    }


def _expect_scalar(poly: sp.Expr, xsx: sp.Expr, tr_s: sp.Expr, x_mu: sp.Expr) -> sp.Expr:
    """E of a polynomial of degree <= 2 in xi (through X1, X2) with the rules of the module docstring."""
    poly = sp.expand(poly.subs(Y1, x_mu))
    if sp.Poly(poly, X1, X2).total_degree() > 2 or poly.coeff(X1, 1).has(X2) or poly.coeff(X2, 1).has(X1):
        raise ValueError(f"cannot take the expectation of {poly}: degree in xi above 2")
    return sp.expand(poly.subs({X1**2: xsx}).subs({X2: tr_s, X1: 0}))


XSX, TRS, XMU = sp.symbols("xSx trS xmu", real=True)


@cache
def step_drift_coefficients() -> dict[str, sp.Expr]:
    """The order-h mean of ``N(x + s xi + s^2 mu) - x`` for a unit x, as ``c_mu mu + c_Sx (S x) + c_x x``.

    Coefficients are sympy expressions in ``xSx = x^T S x``, ``trS = tr S`` and ``xmu = <x, mu>``, where
    S = E[xi xi^T]. This is the single source of the Ito drift used by the numerical reference integrators.
    """
    order2 = increment_coefficients()[2]
    c1 = order2["xi"]
    return {
        "mu": _expect_scalar(order2["mu"], XSX, TRS, XMU),
        "Sx": sp.expand(c1.coeff(X1, 1)),
        "x": _expect_scalar(order2["x"], XSX, TRS, XMU),
    }


@dataclass(frozen=True)
class NormalisedStep:
    """One token's step ``N(x_i + s xi + s^2 mu)`` with ``xi = dN[noise_arg] / s`` (None: no noise)."""

    mu: Vec
    noise_arg: object | None = None


@dataclass(frozen=True)
class StepExpansion:
    """The order-h mean of one step (``drift``) and the order-s term (``P_x xi``); ``lowest_order`` is
    the lowest power of s in ``x' - x`` (1 means E|x' - x|^3 = O(h^{3/2}))."""

    drift: Vec
    lowest_order: int


def expand_step(span: Span, i: int, step: NormalisedStep, noise) -> StepExpansion:
    """Expand token i's normalised step; ``noise`` gives ``S = E[xi xi^T]`` through its second moment."""
    x = span.token(i)
    if step.noise_arg is None:
        cov = span.identity() * 0
    else:
        cov = noise.second_moment(span, step.noise_arg, step.noise_arg)
    values = {XSX: cov.bilinear(x, x), TRS: cov.trace(), XMU: x.dot(step.mu)}
    coeffs = increment_coefficients()
    lowest = min(k for k, terms in coeffs.items() if any(sp.simplify(c) != 0 for c in terms.values()))
    c1 = coeffs[2]["xi"]
    if sp.expand(c1 - c1.coeff(X1, 1) * X1) != 0:
        raise ValueError(f"unexpected xi coefficient {c1}")
    c = {name: coeff.subs(values) for name, coeff in step_drift_coefficients().items()}
    # E[c1 xi]: c1 is linear in X1 = <x, xi>, and E[<x, xi> xi] = S x.
    drift = step.mu * c["mu"] + (cov @ x) * c["Sx"] + x * c["x"]
    order1 = coeffs[1]
    if sp.simplify(order1["xi"] - 1) != 0 or sp.simplify(order1["x"] + X1) != 0:
        raise ValueError("the order-s term of a normalised step must be P_x xi")
    return StepExpansion(drift=drift, lowest_order=lowest)


def limit_system(span: Span, steps: list[list[NormalisedStep]], noise) -> ParticleSystem:
    """The Ito SDE defined by a layer made of consecutive normalised half-steps per token.

    ``steps[i]`` lists token i's half-steps. To order h their drifts add: a half-step moves x by
    O(h) (deterministic) or by O(s) with a mean-zero leading term, so the next half-step's order-h mean
    changes by o(h) and its order-s noise term by a mean-zero O(h) term plus O(h^{3/2}). At most one
    half-step may carry noise (its ``P_x xi`` is the diffusion).
    """
    drifts, diffusion = [], []
    for i, token_steps in enumerate(steps):
        noisy = [st for st in token_steps if st.noise_arg is not None]
        if len(noisy) > 1:
            raise ValueError("at most one half-step per layer may carry noise")
        total = span.zero()
        for st in token_steps:
            total = total + expand_step(span, i, st, noise).drift
        drifts.append(total)
        diffusion.append((span.projection(i), noisy[0].noise_arg if noisy else None))
    return ParticleSystem(span=span, drift=tuple(drifts), diffusion=tuple(diffusion), noise=noise)
