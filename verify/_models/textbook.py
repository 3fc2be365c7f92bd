"""Textbook SDEs with known solutions: the problems solver suites test against, stated once, symbolically.

Each is an Ito SDE ``dX = f(X) dt + g(X) dW`` driven by one scalar Brownian motion W, on coordinates ``X`` (one
real coordinate, or two where the coefficients depend on time: the time tau is then a coordinate with drift 1 and no
noise, so that every problem is autonomous). Constants and solutions are those of the SDE problem library of
DifferentialEquations.jl (SDEProblemLibrary: ``prob_sde_linear``, ``prob_sde_cubic``, ``prob_sde_wave``,
``prob_sde_additive``, ``prob_sde_nltest``, ``prob_sde_stiffquadito``), from Kloeden and Platen, "Numerical
Solution of Stochastic Differential Equations" (1992), section 4.4, Tocino and Ardanuy (2002) and Burrage and
Tian (2000); the Ornstein-Uhlenbeck process is the standard additive-noise case.

Every solution but the Ornstein-Uhlenbeck one sees the Brownian path through its increment alone, so the solution
is a one-step *flow* ``X(t + h) = phi(X(t), W(t + h) - W(t), h)`` (Markov property): an exact layer map, pathwise.
``flow_residuals`` proves it by Ito's formula, d phi = (d_h phi + phi_ww / 2) dh + phi_w dW, which must equal
f(phi) dh + g(phi) dW; and phi(x, 0, 0) = x. The Ornstein-Uhlenbeck step is exact in law only (its transition
is Gaussian with mean x e^{-theta h} and variance s^2 (1 - e^{-2 theta h}) / (2 theta)), which
``ornstein_uhlenbeck_moments`` proves from the moment equations m' = -theta m, v' = -2 theta v + s^2.
The Stratonovich form of each, f - (1/2) g' g (``stratonovich_drift``), is derived here, not written.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from .._calculus.stratonovich import ito_to_stratonovich

x, u, tau, y = sp.symbols("x u tau y", real=True)
w = sp.Symbol("w", real=True)  # the Brownian increment over the step
step = sp.Symbol("h", positive=True)


@dataclass(frozen=True)
class TextbookSDE:
    """``dX = drift dt + diffusion dW`` on ``coordinates`` (sympy column matrices), started at ``start``.

    ``flow``: the exact one-step solution phi(X, w, h) with w the Brownian increment (None: exact in law only,
    ``in_law``); ``source``: where the problem and its constants come from; ``positive``: the solution stays where
    the coefficients' real powers are the principal ones (the nonlinear test problem's cube roots, on x > 0);
    ``chart``: the state space as the image of a real symbol (the wave problem lives on (-pi/2, pi/2) = atan(R))."""

    name: str
    coordinates: tuple[sp.Symbol, ...]
    drift: sp.Matrix
    diffusion: sp.Matrix
    start: tuple[float, ...]
    source: str
    flow: sp.Matrix | None = None
    in_law: bool = False
    positive: bool = False
    chart: tuple[tuple[sp.Symbol, sp.Expr], ...] = ()

    @property
    def dim(self) -> int:
        return len(self.coordinates)

    @property
    def flow_arguments(self) -> tuple[sp.Symbol, ...]:
        """The flow's arguments in order: the coordinates, the Brownian increment w and the step h."""
        return (*self.coordinates, w, step)


def _column(*entries) -> sp.Matrix:
    return sp.Matrix([sp.sympify(e) for e in entries])


def _linear() -> TextbookSDE:
    a, b = sp.Rational(101, 100), sp.Rational(87, 100)
    return TextbookSDE(
        "linear",
        (x,),
        _column(a * x),
        _column(b * x),
        (0.5,),
        "geometric Brownian motion, prob_sde_linear (alpha = 1.01, beta = 0.87, X_0 = 1/2)",
        _column(x * sp.exp((a - b**2 / 2) * step + b * w)),
    )


def _cubic() -> TextbookSDE:
    return TextbookSDE(
        "cubic",
        (x,),
        _column(-sp.Rational(1, 4) * x * (1 - x**2)),
        _column(sp.Rational(1, 2) * (1 - x**2)),
        (0.5,),
        "Kloeden-Platen (4.4.47), prob_sde_cubic (X_0 = 1/2)",
        _column(sp.tanh(sp.atanh(x) + w / 2)),
    )


def _wave() -> TextbookSDE:
    return TextbookSDE(
        "wave",
        (x,),
        _column(-sp.Rational(1, 100) * sp.sin(x) * sp.cos(x) ** 3),
        _column(sp.Rational(1, 10) * sp.cos(x) ** 2),
        (1.0,),
        "Kloeden-Platen (4.4.48), prob_sde_wave (X_0 = 1)",
        _column(sp.atan(w / 10 + sp.tan(x))),
        chart=((x, sp.atan(y)),),
    )


def _additive() -> TextbookSDE:
    a, b = sp.Rational(1, 10), sp.Rational(1, 20)
    root, later = sp.sqrt(1 + tau), sp.sqrt(1 + tau + step)
    return TextbookSDE(
        "additive",
        (u, tau),
        _column(b / root - u / (2 * (1 + tau)), 1),
        _column(a * b / root, 0),
        (1.0, 0.0),
        "additive noise with time-dependent coefficients, prob_sde_additive (alpha = 0.1, beta = 0.05, X_0 = 1); "
        "time tau is the second coordinate",
        _column((u * root + b * (step + a * w)) / later, tau + step),
    )


def _nonlinear() -> TextbookSDE:
    return TextbookSDE(
        "nonlinear test",
        (x,),
        _column(sp.cbrt(x) / 3 + 6 * sp.cbrt(x) ** 2),
        _column(sp.cbrt(x) ** 2),
        (1.0,),
        "Tocino-Ardanuy, prob_sde_nltest: X_t = (2 t + 1 + W_t / 3)^3 from X_0 = 1",
        _column((sp.cbrt(x) + 2 * step + w / 3) ** 3),
        positive=True,
    )


def _stiff_quadratic() -> TextbookSDE:
    a, b = 1, 1
    return TextbookSDE(
        "stiff quadratic",
        (x,),
        _column(-(a + b**2 * x) * (1 - x**2)),
        _column(b * (1 - x**2)),
        (0.5,),
        "Burrage-Tian, prob_sde_stiffquadito (alpha = beta = 1, X_0 = 1/2)",
        _column(sp.tanh(sp.atanh(x) - a * step + b * w)),
    )


THETA, OU_SCALE = 1, sp.Rational(7, 10)


def _ornstein_uhlenbeck() -> TextbookSDE:
    return TextbookSDE(
        "Ornstein-Uhlenbeck",
        (x,),
        _column(-THETA * x),
        _column(OU_SCALE),
        (1.0,),
        "the Ornstein-Uhlenbeck process dX = -theta X dt + s dW (theta = 1, s = 0.7, X_0 = 1): additive noise, where "
        "Euler-Maruyama has strong order 1",
        _column(
            x * sp.exp(-THETA * step) + OU_SCALE * sp.sqrt((1 - sp.exp(-2 * THETA * step)) / (2 * THETA * step)) * w
        ),
        in_law=True,
    )


@cache
def textbook_sdes() -> dict[str, TextbookSDE]:
    """The library, by name."""
    problems = (_linear, _cubic, _wave, _additive, _nonlinear, _stiff_quadratic, _ornstein_uhlenbeck)
    return {sde.name: sde for sde in (make() for make in problems)}


def stratonovich_drift(sde: TextbookSDE) -> sp.Matrix:
    """The drift of the same SDE read in Stratonovich form, f - (1/2) (Dg) g (``verify._calculus.stratonovich``)."""
    coords = sp.Matrix(sde.coordinates)
    return sp.simplify(ito_to_stratonovich(sde.drift, [[sde.diffusion]], coords))


def _simplified(expr: sp.Expr, positive: bool) -> sp.Expr:
    return sp.simplify(sp.powdenest(expr, force=True) if positive else expr)


def flow_residuals(sde: TextbookSDE) -> list[sp.Expr]:
    """Ito's formula on the flow: d_h phi + phi_ww / 2 - f(phi), phi_w - g(phi) and phi(X, 0, 0) - X, componentwise,
    simplified (all zero when the flow solves the SDE). For ``positive`` problems, real powers are principal."""
    if sde.flow is None or sde.in_law:
        raise ValueError(f"{sde.name!r} has no pathwise flow to check")
    at_flow = dict(zip(sde.coordinates, sde.flow))
    drift = sde.drift.subs(at_flow, simultaneous=True)
    diffusion = sde.diffusion.subs(at_flow, simultaneous=True)
    residuals = [
        *(sde.flow.diff(step) + sde.flow.diff(w, 2) / 2 - drift),
        *(sde.flow.diff(w) - diffusion),
        *(sde.flow.subs({w: 0, step: 0}) - sp.Matrix(sde.coordinates)),
    ]
    return [_simplified(r.subs(dict(sde.chart)), sde.positive) for r in residuals]


def ornstein_uhlenbeck_moments() -> tuple[sp.Expr, sp.Expr]:
    """The exact-in-law step's mean and variance less the solutions of m' = -theta m, v' = -2 theta v + s^2 (m(0) = x,
    v(0) = 0): both zero. The step is phi(x, w, h) with w ~ N(0, h), so its mean is phi(x, 0, h) and its variance
    (d phi / d w)^2 h."""
    sde = textbook_sdes()["Ornstein-Uhlenbeck"]
    phi = sde.flow[0]
    mean, variance = phi.subs(w, 0), phi.diff(w) ** 2 * step
    m, v = sp.Function("m"), sp.Function("v")
    solved_mean = sp.dsolve(sp.Eq(m(step).diff(step), -THETA * m(step)), ics={m(0): x}).rhs
    solved_variance = sp.dsolve(sp.Eq(v(step).diff(step), -2 * THETA * v(step) + OU_SCALE**2), ics={v(0): 0}).rhs
    return sp.simplify(mean - solved_mean), sp.simplify(variance - solved_variance)
