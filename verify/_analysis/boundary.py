"""Boundary behaviour of an overlap diffusion at rho = +-1, and the critical parameters it implies.

Near an end e where b(e) = a(e) = 0, linearise: ``b ~ b1 (rho - e)``, ``a ~ a2 (rho - e)^2``. Then
z = |rho - e| is locally a geometric Brownian motion ``dz = b1 z dt + sqrt(a2) z dW`` and

    growth exponent (almost sure, of log z):  lambda = b1 - a2 / 2      (the Ito correction of the log)
    mean exponent (of E z):                     b1
    scale density near e:                       s ~ z^(-2 b1 / a2)

The end is attracting with positive probability iff the scale density is integrable there, i.e.
iff ``-2 b1 / a2 > -1``, i.e. iff ``lambda < 0``. The speed density 2/(a s) ~ z^(2 b1/a2 - 2) makes
Feller's two integrals diverge logarithmically in every case, so both ends are natural boundaries
(never reached in finite time): "attracting" means rho -> e as t -> infinity with positive probability.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from .._calculus import d, sigma
from .._common import holding_precision
from .._models import beta, eps
from .overlap import overlap_sde, rho

ENDS = (1, -1)


@dataclass(frozen=True)
class EndBehaviour:
    """Linearisation at one end ``e``: coefficients and what they imply."""

    end: int
    b1: sp.Expr
    a2: sp.Expr
    growth_exponent: sp.Expr
    mean_exponent: sp.Expr
    scale_exponent: sp.Expr


def _first_order(expr: sp.Expr, end: int, power: int) -> sp.Expr:
    """``lim expr / (rho - end)^power`` as rho -> end, with the model's functions expanded."""
    z = sp.Symbol("z", positive=True)
    shifted = expr.subs(rho, end + z)
    leading = sp.series(shifted, z, 0, power + 1).removeO().coeff(z, power)
    return sp.simplify(leading.doit())


def end_behaviour(drift: sp.Expr, diffusion_squared: sp.Expr, end: int) -> EndBehaviour:
    """Exponents at ``end`` (+1 or -1) derived from the overlap SDE."""
    if end not in ENDS:
        raise ValueError(f"end must be 1 or -1, got {end}")
    if sp.simplify(drift.subs(rho, end)) != 0 or sp.simplify(diffusion_squared.subs(rho, end)) != 0:
        raise ValueError(f"rho = {end} is not a degenerate end of this diffusion")
    b1 = _first_order(drift, end, 1)
    a2 = _first_order(diffusion_squared, end, 2)
    return EndBehaviour(
        end=end,
        b1=b1,
        a2=a2,
        growth_exponent=sp.simplify(b1 - a2 / 2),
        mean_exponent=b1,
        scale_exponent=sp.simplify(-2 * b1 / a2),
    )


@cache
def fedorov_ends() -> dict[int, EndBehaviour]:
    drift, diffusion = overlap_sde("fedorov")
    return {end: end_behaviour(drift, diffusion, end) for end in ENDS}


@holding_precision()  # floats substituted into cosh (sympy evaluates it through mpmath.workprec)
def boundary_exponents(d_value, beta_value, sigma_value=1) -> tuple[sp.Expr, sp.Expr]:
    """Growth exponents (almost sure) of ``1 - rho`` near +1 and of ``1 + rho`` near -1 for model F."""
    ends = fedorov_ends()
    values = {d: d_value, beta: beta_value, sigma: sigma_value}
    return tuple(sp.simplify(ends[e].growth_exponent.subs(values)) for e in ENDS)


@cache
def critical_beta_closed_form() -> sp.Expr:
    """The beta > 0 at which the antipodal end's growth exponent changes sign (sympy ``solve``)."""
    lam = fedorov_ends()[-1].growth_exponent
    roots = [r for r in sp.solve(sp.Eq(lam, 0), beta) if _is_nonnegative_branch(r)]
    if len(roots) != 1:
        raise ValueError(f"expected one non-negative root, got {roots}")
    return sp.simplify(roots[0])


def _is_nonnegative_branch(root: sp.Expr) -> bool:
    value = root.subs(d, 10)
    return bool(value.is_real and value >= 0)


@cache
def hybrid_ends() -> dict[int, EndBehaviour]:
    drift, diffusion = overlap_sde("hybrid")
    return {end: end_behaviour(drift, diffusion, end) for end in ENDS}


@cache
def critical_eps2_closed_form() -> sp.Expr:
    """The eps^2 at which the hybrid model's dichotomy switches (both ends' exponents change sign)."""
    e2 = sp.Symbol("e2", positive=True)
    roots = {
        end: sp.solve(sp.Eq(behaviour.growth_exponent.subs(eps, sp.sqrt(e2)), 0), e2)
        for end, behaviour in hybrid_ends().items()
    }
    if len(roots[1]) != 1 or len(roots[-1]) != 1 or sp.simplify(roots[1][0] - roots[-1][0]) != 0:
        raise ValueError(f"the two ends do not switch at one eps^2: {roots}")
    return sp.simplify(roots[1][0])
