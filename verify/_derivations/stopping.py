"""The latent diffusion model's derivations (docs/models.md section 4): the variance ODEs and their closed forms, the
capped score's minimiser, the Frechet distance, its monotonicity for the exact score, and the plug-in criterion from
the convexity of f_d."""

from __future__ import annotations

import sympy as sp

from .._models import latent_variances as ld
from .derivation import Derivation


def latent_diffusion() -> Derivation:
    """Section 4: variance ODEs, closed forms, capped minimiser, Frechet formula, monotonicity, switching times."""
    der = Derivation(
        "latent_diffusion",
        "Gaussian latent diffusion: decoded variance, W2 distance, its sign in t, "
        "switching times and the capped score (docs/models.md section 4)",
    )
    _latent_variances(der)
    _latent_distance(der)
    return der


def _latent_variances(der: Derivation) -> None:
    """The forward and backward variances (SDE, probability-flow ODE, capped) and the capped score's minimiser."""
    forward = ld.forward_variance()
    der.results["forward variance"] = forward
    der.check(
        "forward OU variance from dsolve equals a_u^2 + b_u^2 s^2",
        sp.simplify(forward - (1 - sp.exp(-2 * ld.u) + sp.exp(-2 * ld.u) * ld.s**2)) == 0,
    )
    der.results["backward SDE variance rate"] = ld.variance_rate(ld.m)
    der.results["probability-flow variance rate"] = ld.variance_rate(ld.m, flow=True)
    for flow, capped, label in (
        (False, False, "SDE"),
        (True, False, "probability-flow ODE"),
        (False, True, "capped SDE"),
    ):
        der.results[f"{label} variance"] = ld.backward_variance(flow, capped)
        der.check(
            f"{label}: the closed form solves its variance ODE with v(0) = v0", ld.solves_variance_ode(flow, capped)
        )
    exact_start = ld.backward_variance().subs(ld.v0, 1 + sp.exp(-2 * ld.T) * (ld.q - 1))
    der.check(
        "started from the model's law at T, the SDE reproduces tau2(T - t)",
        sp.simplify(exact_start - (1 + sp.exp(-2 * (ld.T - ld.t)) * (ld.q - 1))) == 0,
    )
    minimiser, convex = ld.capped_score_minimiser()
    der.results["score-matching loss"] = ld.score_matching_loss()
    der.results["unconstrained minimiser"] = minimiser
    der.check(
        "the loss is convex in m and minimised at 1/tau2 (so the capped minimiser is min(C, 1/tau2))",
        convex and sp.simplify(minimiser - 1 / (1 + sp.exp(-2 * ld.u) * (ld.q - 1))) == 0,
    )


def _latent_distance(der: Derivation) -> None:
    """The Frechet distance, its derivative in t for the exact score, and the plug-in criterion from the convexity of
    f_d."""
    a, b = sp.symbols("a1:4", positive=True), sp.symbols("b1:4", positive=True)
    der.check(
        "Frechet distance of diagonal Gaussians is sum (sqrt(a_j) - sqrt(b_j))^2",
        sp.simplify(ld.frechet_diagonal(list(a), list(b)) - sum((sp.sqrt(x) - sp.sqrt(y)) ** 2 for x, y in zip(a, b)))
        == 0,
    )
    der.results["exact-score derivative"] = ld.exact_derivative_closed_form()
    der.check(
        "d/dt (sqrt(v) - s)^2 = -2 (1 - s^2)^2 (1 - e^{-2u}) e^{-2u} / (sqrt(v) (sqrt(v) + s)) <= 0 (exact score)",
        sp.simplify(ld.exact_term_derivative() - ld.exact_derivative_closed_form()) == 0,
    )
    until = ld.helpful_until()
    der.results["u_j (coordinate j helps for u < u_j)"] = until
    der.check("u_j solves tau2(u_j) = 4 s^2", sp.simplify((1 + sp.exp(-2 * until) * (ld.s**2 - 1)) - 4 * ld.s**2) == 0)
    x, term = ld.plugin_remaining_term()
    der.results["plug-in term f_j(x), x = a^2 of the remaining time"] = term
    der.check(
        "the plug-in run from the model's law has decoded variance q (1 - x) + x, x = 1 - e^{-2u}",
        sp.simplify(ld.gaussian_model_variance(ld.q, ld.u).subs(sp.exp(-2 * ld.u), 1 - x) - (ld.q * (1 - x) + x)) == 0,
    )
    second = sp.simplify(sp.diff(term, x, 2))
    der.results["f_j''(x)"] = second
    der.check(
        "f_j''(x) = s (1 - q)^2 / (2 (q (1 - x) + x)^(3/2)) >= 0: f_d is convex, so monotone iff f_d'(0) >= 0",
        sp.simplify(second - ld.s * (1 - ld.q) ** 2 / (2 * (ld.q * (1 - x) + x) ** sp.Rational(3, 2))) == 0,
    )
    der.check(
        "f_j'(0) equals the paper's criterion term (1 - s/sigma_hat)(1 - sigma_hat^2)",
        sp.simplify(sp.diff(term, x).subs(x, 0) - ld.plugin_criterion_term()) == 0,
    )
    turn = ld.plugin_turning_time()
    der.results["plug-in turning time"] = turn
    der.check(
        "the plug-in path meets s^2 at its turning time",
        sp.simplify((1 + sp.exp(-2 * turn) * (ld.q - 1)) - ld.s**2) == 0,
    )
