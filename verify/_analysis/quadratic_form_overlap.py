"""The random quadratic form dX = -P_X o dQ X (Engel-Shalova): overlap process, invariant, merge probability.

The overlap SDE is derived from the normalised Euler step N(x - dQ x) (``verify._models.layer_steps``). Its scale
function S solves L S = 0, so S(rho_t) is a martingale: the invariant. sympy integrates the scale
density in closed form; the merge probability is P(rho -> 1 | rho_0) = (S(rho_0) - S(-1)) / (S(1) - S(-1)).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from .boundary import end_behaviour
from .hitting import scale_decomposition
from .overlap import overlap_sde, rho

theta = sp.Symbol("theta", positive=True)


@dataclass(frozen=True)
class QuadraticFormResults:
    drift: sp.Expr
    diffusion_squared: sp.Expr
    invariant: sp.Expr  # S(rho): zero drift
    invariant_of_angle: sp.Expr  # S(cos theta)
    merge_probability: sp.Expr  # as a function of rho
    exponent_diagonal: sp.Expr  # growth exponent of 1 - rho
    exponent_antipodal: sp.Expr  # growth exponent of 1 + rho


@cache
def quadratic_form_results() -> QuadraticFormResults:
    drift, diffusion = overlap_sde("quadratic_form")
    # s = exp(int_0^rho q) with q split as c_+/(1-rho) + c_-/(1+rho) + R: real logarithms on (-1, 1).
    parts = scale_decomposition("quadratic_form")
    density = sp.simplify(
        (1 - rho) ** (-parts.c_plus)
        * (1 + rho) ** parts.c_minus
        * sp.exp(sp.integrate(sp.simplify(parts.regular), (rho, 0, rho)))
    )
    invariant = sp.integrate(sp.powsimp(density, force=True), rho)
    invariant = sp.simplify(invariant - invariant.subs(rho, 0))
    low = sp.limit(invariant, rho, -1, "+")
    high = sp.limit(invariant, rho, 1, "-")
    merge = sp.simplify((invariant - low) / (high - low))
    # dS/dtheta along rho = cos(theta), 0 < theta < pi (where |sin theta| = sin theta).
    slope = sp.simplify(sp.diff(invariant.subs(rho, sp.cos(theta)), theta)).subs(sp.Abs(sp.sin(theta)), sp.sin(theta))
    angle = sp.simplify(invariant.subs(rho, 0) + sp.integrate(sp.simplify(slope), (theta, sp.pi / 2, theta)))
    return QuadraticFormResults(
        drift=drift,
        diffusion_squared=diffusion,
        invariant=invariant,
        invariant_of_angle=angle,
        merge_probability=merge,
        exponent_diagonal=end_behaviour(drift, diffusion, 1).growth_exponent,
        exponent_antipodal=end_behaviour(drift, diffusion, -1).growth_exponent,
    )
