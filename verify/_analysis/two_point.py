"""Model A (attention + random MLP blocks): the two-point motion and its exponents.

From model A's layer map (``verify._models.layer_steps.agazzi_layer``) with no attention (v = 0), the overlap
u = <x, y> of two points is a diffusion whose coefficients involve the kernel k only through k(u)
and k(1). Linearising at u = 1 (z = 1 - u; the distance |x - y| = sqrt(2 z)):

    lambda_1   = (growth exponent of log z) / 2   almost-sure exponent of |x - y|
    lambda_bar = mean exponent of z                 exponent of E|x - y|^2

and, for the energy E_beta, ``G(u) = (L e^{beta u}) / (beta e^{beta u})``, the generator of
exp(beta <x, y>) divided by beta exp(beta u).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from .._calculus import k
from .._models import beta, v_sign
from .boundary import end_behaviour
from .overlap import overlap_sde, rho

u = sp.Symbol("u", real=True)
k1, k1p = sp.symbols("k1 k1_prime", real=True)


def _kernel_at_one(expr: sp.Expr) -> sp.Expr:
    """Name k(1) and k'(1) as symbols."""
    expr = sp.sympify(expr)
    for sub in expr.atoms(sp.Subs):
        (var,), (point,) = sub.variables, sub.point
        if sub.expr == sp.Derivative(k(var), var) and point == 1:
            expr = expr.subs(sub, k1p)
    return sp.simplify(expr.subs(k(1), k1))


@dataclass(frozen=True)
class AgazziTwoPoint:
    drift: sp.Expr  # of u, pure noise
    diffusion_squared: sp.Expr
    lambda_1: sp.Expr
    lambda_bar: sp.Expr
    G: sp.Expr
    drift_with_attention: sp.Expr


@cache
def agazzi_two_point() -> AgazziTwoPoint:
    drift_full, diffusion = overlap_sde("agazzi")
    drift = sp.simplify(drift_full.subs(v_sign, 0))
    end = end_behaviour(drift, diffusion, 1)
    lambda_1 = _kernel_at_one(end.growth_exponent / 2)
    lambda_bar = _kernel_at_one(end.mean_exponent)
    f = sp.exp(beta * rho)
    generator = drift * sp.diff(f, rho) + diffusion * sp.diff(f, rho, 2) / 2
    g = sp.expand(sp.simplify(generator / (beta * f)))
    return AgazziTwoPoint(
        drift=_kernel_at_one(drift).subs(rho, u),
        diffusion_squared=_kernel_at_one(diffusion).subs(rho, u),
        lambda_1=sp.factor(lambda_1),
        lambda_bar=sp.factor(lambda_bar),
        G=_kernel_at_one(g).subs(rho, u),
        drift_with_attention=_kernel_at_one(drift_full).subs(rho, u),
    )
