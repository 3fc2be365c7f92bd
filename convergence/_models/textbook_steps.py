"""Textbook SDEs with known solutions as layer maps and limit SDEs: the cases every check must get right.

The problems, their constants and their solutions are stated once, symbolically, in ``verify._models.textbook`` (which
proves each flow by Ito's formula and derives each Stratonovich drift); this module compiles them for numpy. One
token, d = the problem's coordinates (1, or 2 with time as a coordinate), one scalar Brownian noise of scale 1.

For each problem: ``TextbookProblem`` is its Ito SDE (a ``LimitSDE``), ``exact_step()`` its one-step solution
X(t + h) = phi(X(t), dW, h) (exact pathwise; the Ornstein-Uhlenbeck step exact in law only) and ``euler_step()`` its
Euler-Maruyama step x + h f(x) + g(x) dW. Both steps are layer maps whose limit is the SDE: an exact map, which
every check must pass against its own claim (Ito, and the Stratonovich form with ``stratonovich_drift``), whatever
rounding and sample size; and whose near misses (a drift or a noise a few percent off) every check must fail.
Real powers with denominator 3 are real cube roots (``np.cbrt``), so a state that crosses 0 stays finite.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np
import sympy as sp

from verify._models import TextbookSDE, stratonovich_drift, textbook_sdes

from .._runtime import lambdified
from .noise import CommonNoise

_REAL_CBRT = sp.Function("real_cbrt")


def _real_roots(expr: sp.Expr) -> sp.Expr:
    """``expr`` with every power b^(p/3) written real_cbrt(b)^p (the real branch; sympy's is the principal one)."""
    return expr.replace(
        lambda e: e.is_Pow and e.exp.is_Rational and e.exp.q == 3,
        lambda e: _REAL_CBRT(e.base) ** e.exp.p,
    )


def _compiled(entries: sp.Matrix, symbols: tuple[sp.Symbol, ...]) -> Callable[..., np.ndarray]:
    """The column ``entries`` as a numpy function of ``symbols`` (arrays of one shape), stacked on a last axis."""
    functions = [lambdified(symbols, _real_roots(entry), [{"real_cbrt": np.cbrt}, "numpy"]) for entry in entries]

    def evaluate(*arrays: np.ndarray) -> np.ndarray:
        shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
        return np.stack([np.broadcast_to(f(*arrays), shape) for f in functions], axis=-1).astype(np.float64)

    return evaluate


NOISE = CommonNoise(shape=(1,), scale=1.0)


@dataclass(frozen=True, eq=False)
class TextbookProblem:
    """A textbook SDE dX = f(X) dt + g(X) dW (module docstring) as a ``LimitSDE`` on (paths, 1, d) arrays, d its
    coordinates, driven by one scalar Brownian noise (``dw`` shaped (paths, 1))."""

    name: str
    tokens: int = 1

    @cached_property
    def symbolic(self) -> TextbookSDE:
        return textbook_sdes()[self.name]

    @property
    def dim(self) -> int:
        return self.symbolic.dim

    @property
    def noise(self) -> CommonNoise:
        return NOISE

    @property
    def start(self) -> np.ndarray:
        """The problem's initial state, (1, d)."""
        return np.array([self.symbolic.start], dtype=np.float64)

    @property
    def exact_in_law_only(self) -> bool:
        """True when ``exact_step`` is exact in law but not pathwise (Ornstein-Uhlenbeck)."""
        return self.symbolic.in_law

    @cached_property
    def _functions(self) -> dict[str, Callable[..., np.ndarray]]:
        sde, coords = self.symbolic, self.symbolic.coordinates
        return {
            "drift": _compiled(sde.drift, coords),
            "diffusion": _compiled(sde.diffusion, coords),
            "stratonovich": _compiled(stratonovich_drift(sde), coords),
            "flow": _compiled(sde.flow, sde.flow_arguments),
        }

    def _at(self, name: str, x: np.ndarray, *more) -> np.ndarray:
        return self._functions[name](*np.moveaxis(x, -1, 0), *more)

    def drift(self, x: np.ndarray) -> np.ndarray:
        """f(x): the Ito drift."""
        return self._at("drift", x)

    def stratonovich_drift(self, x: np.ndarray) -> np.ndarray:
        """f(x) - (1/2) g'(x) g(x): the drift of the same SDE read in Stratonovich form."""
        return self._at("stratonovich", x)

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        """g(x) dW."""
        return self._at("diffusion", x) * dw[:, :, None]

    def flow(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        """phi(x, dW, h): the exact one-step solution (exact in law only where ``exact_in_law_only``)."""
        return self._at("flow", x, dw, h)

    def exact_step(self) -> TextbookStep:
        return TextbookStep(self, "exact")

    def euler_step(self) -> TextbookStep:
        return TextbookStep(self, "Euler")


@dataclass(frozen=True, eq=False)
class TextbookStep:
    """One step of a textbook problem as a layer map: its exact solution ("exact") or its Euler-Maruyama step
    ("Euler")."""

    problem: TextbookProblem
    kind: str

    @property
    def tokens(self) -> int:
        return 1

    @property
    def dim(self) -> int:
        return self.problem.dim

    @property
    def noise(self) -> CommonNoise:
        return NOISE

    @property
    def name(self) -> str:
        return f"{self.problem.name}, {self.kind} step"

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        if self.kind == "exact":
            return self.problem.flow(x, dw, h)
        return x + h * self.problem.drift(x) + self.problem.diffusion(x, dw)


@cache
def textbook_problems() -> dict[str, TextbookProblem]:
    """Every problem of ``verify._models.textbook``, by name."""
    return {name: TextbookProblem(name) for name in textbook_sdes()}
