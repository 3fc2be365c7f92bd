"""Reduced one-dimensional SDEs for the overlap rho = <x_1, x_2> of two tokens.

For two unit tokens the generator of any f(rho) only involves the drift of G_01 and its quadratic
variation (``verify._calculus.generator``), so rho is an autonomous diffusion ``d rho = b(rho) dt + sqrt(a(rho)) dB``
whenever b and a depend on rho alone, which holds for the models here (Q^T K = I or beta I).

``closed_form`` rewrites expressions in which beta enters only through exp(beta), exp(beta rho) in
terms of ``t = beta (1 - rho)``: dividing numerator and denominator by exp(beta (1 + rho)) makes them
Laurent polynomials in T = e^t that are symmetric under T -> 1/T, hence polynomials in cosh(j t).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from .._calculus import d, gram_symbol, sigma
from .._models import (
    MODELS,
    beta,
    fedorov_system,
    model_system,
)

rho = sp.Symbol("rho", real=True)
t = sp.Symbol("t", positive=True)
_Y, _T = sp.symbols("Y T", positive=True)


@dataclass(frozen=True)
class OverlapSDE:
    """``d rho = drift dt + sqrt(diffusion_squared) dB`` on [-1, 1]."""

    drift: sp.Expr
    diffusion_squared: sp.Expr

    def generator(self, f: sp.Expr) -> sp.Expr:
        return self.drift * sp.diff(f, rho) + self.diffusion_squared * sp.diff(f, rho, 2) / 2

    def scale_log_derivative(self) -> sp.Expr:
        """``-2 b / a``: the logarithmic derivative of the scale density s = exp(-int 2b/a)."""
        return sp.simplify(-2 * self.drift / self.diffusion_squared)


def _symmetric_laurent_to_cosh(poly: sp.Expr) -> sp.Expr:
    """A Laurent polynomial in T symmetric under T -> 1/T as ``c_0 + sum_j 2 c_j cosh(j t)``."""
    poly = sp.expand(poly)
    powers = sp.Poly(sp.expand(poly * _T**64), _T).as_dict()
    coeffs = {exp[0] - 64: c for exp, c in powers.items()}
    for j, c in coeffs.items():
        if sp.simplify(c - coeffs.get(-j, 0)) != 0:
            raise ValueError("not symmetric under T -> 1/T")
    return sp.factor(coeffs.get(0, 0) + sum(2 * c * sp.cosh(j * t) for j, c in coeffs.items() if j > 0))


def closed_form(expr: sp.Expr) -> sp.Expr:
    """Rewrite a rational function of exp(beta), exp(beta rho) in terms of cosh(j t), t = beta (1 - rho)."""
    e = sp.expand(expr, power_exp=True).subs({sp.exp(beta * rho): _Y, sp.exp(beta): _Y * _T})
    num, den = sp.fraction(sp.factor(sp.cancel(e)))
    if num.has(_Y) or den.has(_Y):
        raise ValueError("beta does not enter only through t")
    half = sp.Poly(den, _T).degree()
    if half % 2:
        return sp.factor(sp.cancel(e)).subs(_T, sp.exp(t))
    shift = _T ** (half // 2)
    return sp.factor(_symmetric_laurent_to_cosh(num / shift) / _symmetric_laurent_to_cosh(den / shift))


@cache
def overlap_sde(model: str = "fedorov", tokens: int = 2) -> tuple[sp.Expr, sp.Expr]:
    """``(drift, diffusion_squared)`` of rho = <x_1, x_2>, derived from the model's layer map.

    Symbols: ``rho, beta, d, sigma`` (model F; sigma^2 = entry variance per unit time), plus
    ``epsilon`` (hybrid), ``k`` and ``v`` (model A: kernel and value sign). For model F the result is
    returned in closed form with ``t = beta (1 - rho)`` substituted back.
    """
    if tokens != 2:
        raise ValueError(f"tokens must be 2 for a one-dimensional overlap SDE, got {tokens}")
    system = model_system(model)
    g = gram_symbol(0, 1)
    drift = system.gram_drift(0, 1).subs(g, rho)
    diffusion = system.gram_covariation((0, 1), (0, 1)).subs(g, rho)
    if model == "fedorov":
        drift, diffusion = (closed_form(e).subs(t, beta * (1 - rho)) for e in (drift, diffusion))
    else:
        drift, diffusion = sp.factor(sp.simplify(drift)), sp.factor(sp.simplify(diffusion))
    return drift, diffusion


def overlap(model: str = "fedorov") -> OverlapSDE:
    return OverlapSDE(*overlap_sde(model, 2))


def pair_overlap_sde(n: int, i: int = 0, j: int = 1) -> tuple[sp.Expr, sp.Expr]:
    """Model F with n tokens: drift and quadratic variation of rho_ij = <x_i, x_j> (Gram symbols g_ab)."""
    system = fedorov_system(n)
    return sp.simplify(system.gram_drift(i, j)), sp.simplify(system.gram_covariation((i, j), (i, j)))


__all__ = [
    "MODELS",
    "OverlapSDE",
    "change_variable",
    "closed_form",
    "d",
    "overlap",
    "overlap_sde",
    "pair_overlap_sde",
    "rho",
    "sigma",
]


def change_variable(
    drift: sp.Expr, diffusion_squared: sp.Expr, new: sp.Expr, inverse: sp.Expr, y: sp.Symbol
) -> tuple[sp.Expr, sp.Expr]:
    """Ito's formula for ``y = new(rho)``: drift ``new' b + new'' a / 2`` and diffusion ``new'^2 a``,
    written in y through ``rho = inverse(y)``."""
    first, second = sp.diff(new, rho), sp.diff(new, rho, 2)
    to_y = {rho: inverse}
    return (
        sp.simplify((first * drift + second * diffusion_squared / 2).subs(to_y)),
        sp.simplify((first**2 * diffusion_squared).subs(to_y)),
    )
