"""Symbolic side of the latent diffusion model (docs/models.md section 4; Wu et al., arXiv:2510.08409).

One latent coordinate j at a time (everything is diagonal): data variance ``s2 = s_j^2``, estimated variance
``q = sigma_hat_j^2`` (``q = s2`` for the exact score), forward time ``u``, backward time ``t = T - u``.

* Forward Ornstein-Uhlenbeck ``dZ = -Z du + sqrt(2) dB``: Ito on Z^2 gives ``dv/du = -2 v + 2``, so
  ``v(u) = 1 + e^{-2u} (s2 - 1) = a_u^2 + b_u^2 s2``.
* A linear score ``-m(u) y`` (the Gaussian model with variance ``tau2(u) = 1 + e^{-2u}(q - 1)`` has ``m = 1/tau2``).
  Time reversal of the OU process gives the backward SDE ``dY = (Y + 2 score) dt + sqrt(2) dB`` and the
  probability-flow ODE ``dY = (Y + score) dt``; their variances solve
  ``dv/dt = 2 (1 - 2 m) v + 2`` and ``dv/dt = 2 (1 - m) v``.
* Closed forms with ``m = 1/tau2`` from a start variance ``v0`` at t = 0:
  SDE ``v(t) = tau2(T-t) + (v0 - tau2(T)) (tau2(T-t) / tau2(T))^2 e^{-2t}``; ODE ``v(t) = v0 tau2(T-t) / tau2(T)``.
  Starting from the model's own law at T (``v0 = tau2(T)``) both give ``v(t) = tau2(T - t)``.
* Score matching in the class ``-m x``: the loss is ``m^2 tau2 - 2 m`` (+ const), convex, minimised at
  ``1/tau2``; with ``|m| <= C`` the minimiser is ``min(C, 1/tau2)``. While capped, ``m = C`` and
  ``v(t) = 1/(2C - 1) + (v_s - 1/(2C - 1)) e^{-2(2C - 1)(t - t_s)}``.
* Decoding pads with zeros; the squared Wasserstein-2 (Frechet) distance between centred diagonal Gaussians is
  ``sum_j (sqrt(v_j) - s_j)^2`` (``v_j = 0`` beyond the latent dimension d).
* Exact score from the forward law:
  ``d/dt (sqrt(v) - s)^2 = -2 (1 - s2)^2 (1 - e^{-2u}) e^{-2u} / (sqrt(v) (sqrt(v) + s))
  <= 0``: the distance never increases. Plug-in: the coordinate's term is non-increasing on [0, T] iff
  ``(sqrt(q) - s)(q - 1) <= 0`` (sigma_hat between s and 1); otherwise it is minimal where ``tau2(u) = s2``.
* The paper's plug-in criterion: with ``x = a^2 = 1 - e^{-2u}`` at the remaining forward time u, the decoded
  variance from the model's own law is ``q (1 - x) + x``, linear in x, so each term ``f_j(x) = (sqrt(q (1 - x) + x)
  - s)^2`` is convex (strictly when s > 0, q != 1) and ``f_d = sum_{j<=d} f_j`` is. The distance is non-increasing
  in t (non-decreasing in x) on [0, T] iff ``f_d'(0) >= 0``, and ``f_j'(0) = (1 - s/sigma_hat)(1 - q)``
  (a zero-variance coordinate, s = q = 0, has ``f_j = x``: +1).
* Coordinate j lowers the distance iff ``v_j < 4 s2``; from the forward law with the exact score this holds for
  all t when ``s2 >= 1/4`` and otherwise exactly for ``u < u_j = log((1 - s2) / (1 - 4 s2)) / 2``.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

u, t, T, v0 = sp.symbols("u t T v_0", nonnegative=True)
s = sp.Symbol("s", positive=True)  # data standard deviation s_j
q = sp.Symbol("q", positive=True)  # estimated variance sigma_hat_j^2 (q = s^2 for the exact score)
m, C = sp.symbols("m C", positive=True)
x0, eps = sp.symbols("x_0 epsilon", real=True)


def gaussian_model_variance(variance: sp.Expr, time: sp.Expr) -> sp.Expr:
    """``tau2(u) = 1 + e^{-2u}(variance - 1)``: the forward marginal variance from ``variance`` at u = 0."""
    return 1 + sp.exp(-2 * time) * (variance - 1)


@cache
def forward_variance() -> sp.Expr:
    """Solve ``dv/du = -2 v + 2`` (the mean of Ito's formula for Z^2), ``v(0) = s^2``, with sympy's dsolve."""
    v = sp.Function("v")
    ode = sp.Eq(v(u).diff(u), -2 * v(u) + 2)
    return sp.simplify(sp.dsolve(ode, v(u), ics={v(0): s**2}).rhs)


def ito_variance_rate(drift_coefficient: sp.Expr, diffusion_squared: sp.Expr) -> sp.Expr:
    """d E[Y^2]/dt for ``dY = c Y dt + g dB`` (c, g deterministic): Ito gives ``2 c v + g^2`` with v = E[Y^2]."""
    y, dt, db, v = sp.symbols("y dt dB v")
    dy = drift_coefficient * y * dt + sp.sqrt(diffusion_squared) * db
    # d(y^2) = 2 y dy + (dy)^2 with dB^2 = dt, dt dB = dt^2 = 0; then E[y^2] = v
    square = sp.expand(2 * y * dy + dy**2).subs(db**2, dt).subs({db: 0})
    return sp.expand(square.coeff(dt)).subs(y**2, v)


def reverse_drift_coefficient(score_coefficient: sp.Expr, flow: bool) -> sp.Expr:
    """Drift coefficient c of the reversed OU process with score ``-m y``: ``-f + g^2 score`` (SDE) or
    ``-f + g^2 score / 2`` (probability flow), with ``f(y) = -y`` and ``g^2 = 2``."""
    return 1 - (1 if flow else 2) * score_coefficient


def variance_rate(score_coefficient: sp.Expr, flow: bool = False) -> sp.Expr:
    """``dv/dt`` of the backward SDE (``flow=False``) or probability-flow ODE, in terms of ``v``."""
    return ito_variance_rate(reverse_drift_coefficient(score_coefficient, flow), 0 if flow else 2)


def backward_variance(flow: bool = False, capped: bool = False) -> sp.Expr:
    """The closed-form variance at backward time t from ``v0`` at t = 0 (module docstring).

    ``capped``: the solution while the score coefficient is the constant C (SDE only), started at t = 0.
    """
    if capped:
        rest = 1 / (2 * C - 1)
        return rest + (v0 - rest) * sp.exp(-2 * (2 * C - 1) * t)
    tau_now, tau_start = gaussian_model_variance(q, T - t), gaussian_model_variance(q, T)
    if flow:
        return v0 * tau_now / tau_start
    return tau_now + (v0 - tau_start) * (tau_now / tau_start) ** 2 * sp.exp(-2 * t)


def solves_variance_ode(flow: bool = False, capped: bool = False) -> bool:
    """True when ``backward_variance`` satisfies its ODE and ``v(0) = v0`` identically (sympy simplify)."""
    v = sp.Symbol("v")
    coefficient = C if capped else 1 / gaussian_model_variance(q, T - t)
    solution = backward_variance(flow, capped)
    residual = solution.diff(t) - variance_rate(coefficient, flow).subs(v, solution)
    return sp.simplify(residual) == 0 and sp.simplify(solution.subs(t, 0) - v0) == 0


def score_matching_loss() -> sp.Expr:
    """Denoising score matching loss of ``-m x`` at forward time u, up to a constant in m.

    ``X_u = b X_0 + a eps`` with ``E[X_0^2] = q`` (the sample second moment), eps ~ N(0, 1) independent; the
    conditional score is ``-(X_u - b X_0)/a^2 = -eps/a``, so the loss is ``E[(-m X_u + eps/a)^2]``.
    """
    a, b = sp.sqrt(1 - sp.exp(-2 * u)), sp.exp(-u)
    expanded = sp.expand((-m * (b * x0 + a * eps) + eps / a) ** 2)
    moments = {x0**2: q, eps**2: 1, x0 * eps: 0}  # E over independent centred X_0 and eps
    poly = sp.Poly(expanded, x0, eps)
    loss = sum(coeff * moments[x0**i * eps**j] for (i, j), coeff in poly.terms())
    return sp.simplify(loss - loss.subs(m, 0))


def capped_score_minimiser() -> tuple[sp.Expr, bool]:
    """The unconstrained minimiser of the score-matching loss and whether the loss is convex in m.

    A convex quadratic minimised over [-C, C] has its minimiser clipped: ``min(C, 1/tau2)`` (1/tau2 > 0).
    """
    loss = score_matching_loss()
    (root,) = sp.solve(sp.diff(loss, m), m)
    growth = sp.Symbol("w", nonnegative=True)  # e^{2u} = 1 + w with w >= 0 for u >= 0
    curvature = sp.simplify(sp.diff(loss, m, 2).subs(u, sp.log(1 + growth) / 2))
    return sp.simplify(root), bool(curvature.is_positive)


def frechet_diagonal(variances_a: list[sp.Expr], variances_b: list[sp.Expr]) -> sp.Expr:
    """``tr(A + B - 2 (A^{1/2} B A^{1/2})^{1/2})`` for diagonal A and B (Frechet distance of centred Gaussians)."""
    a, b = sp.diag(*variances_a), sp.diag(*variances_b)
    root_a = a.applyfunc(sp.sqrt)
    middle = (root_a * b * root_a).applyfunc(sp.sqrt)  # diagonal: the matrix square root is entrywise
    return sp.simplify((a + b - 2 * middle).trace())


def coordinate_term(v: sp.Expr) -> sp.Expr:
    """One coordinate's share of the squared W2 distance: ``(sqrt(v) - s)^2``."""
    return (sp.sqrt(v) - s) ** 2


def exact_term_derivative() -> sp.Expr:
    """``d/dt (sqrt(v) - s)^2`` for the exact score from the forward law (``v = tau2(T - t)`` with q = s^2)."""
    return sp.diff(coordinate_term(gaussian_model_variance(s**2, T - t)), t)


def exact_derivative_closed_form() -> sp.Expr:
    """The non-positive form of ``exact_term_derivative`` stated in the module docstring."""
    e = sp.exp(-2 * (T - t))
    root = sp.sqrt(gaussian_model_variance(s**2, T - t))
    return -2 * (1 - s**2) ** 2 * (1 - e) * e / (root * (root + s))


def _forward_time_where(variance: sp.Expr, level: sp.Expr) -> sp.Expr:
    """The u with ``tau2(u) = level`` for the path from ``variance``: linear in ``e^{-2u}``, so solved for it."""
    decay = sp.Symbol("E", positive=True)
    (root,) = sp.solve(sp.Eq(1 + decay * (variance - 1), level), decay)
    return -sp.log(sp.factor(root)) / 2


def helpful_until() -> sp.Expr:
    """The forward time u_j below which coordinate j lowers the distance (exact score, forward law, s2 < 1/4):
    the root in u of ``tau2(u) = 4 s^2``."""
    return _forward_time_where(s**2, 4 * s**2)


def plugin_turning_time() -> sp.Expr:
    """Forward time where the plug-in path ``tau2(u)`` meets ``s^2`` (the overshooting coordinate's optimum)."""
    return _forward_time_where(q, s**2)


def plugin_remaining_term() -> tuple[sp.Symbol, sp.Expr]:
    """``(x, f_j(x))``: a coordinate's share of the distance against ``x = a^2`` of the remaining time (plug-in
    score, run from the model's own law: decoded variance ``q (1 - x) + x``)."""
    x = sp.Symbol("x", nonnegative=True)
    return x, coordinate_term(q * (1 - x) + x)


def plugin_criterion_term() -> sp.Expr:
    """The paper's criterion term ``(1 - s / sqrt(q)) (1 - q)`` (docs/models.md section 4)."""
    return (1 - s / sp.sqrt(q)) * (1 - q)
