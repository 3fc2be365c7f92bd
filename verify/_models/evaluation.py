"""Numbers from symbolic limits: expressions evaluated at a point in mpmath, memoised per node of the expression DAG
(``Evaluation``), at points given as states (``given_point``) or drawn uniformly on the sphere
(``random_sphere_point``)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import mpmath
import sympy as sp


def random_sphere_point(xs: list[sp.Matrix], generator: random.Random) -> dict:
    """Values for the token symbols: uniform directions (normalised uniform cube points), as mpmath numbers."""
    values = {}
    for token in xs:
        v = [2 * mpmath.mpf(generator.random()) - 1 for _ in range(token.rows)]
        norm = mpmath.sqrt(sum(c * c for c in v))
        values.update({symbol: c / norm for symbol, c in zip(token, v)})
    return values


MPMATH_FUNCTIONS = {
    "exp": mpmath.exp,
    "log": mpmath.log,
    "erf": mpmath.erf,
    "erfc": mpmath.erfc,
    "sin": mpmath.sin,
    "cos": mpmath.cos,
    "tan": mpmath.tan,
    "tanh": mpmath.tanh,
    "sinh": mpmath.sinh,
    "cosh": mpmath.cosh,
    "atan": mpmath.atan,
    "asin": mpmath.asin,
    "acos": mpmath.acos,
    "Abs": abs,
    "sign": mpmath.sign,
}


class Evaluation:
    """Numeric values of expressions at one point, in mpmath at the working precision, memoised per node: a step's
    expression is a small DAG of shared subexpressions but a huge tree, which ``lambdify`` and ``evalf`` walk
    whole. Frozen symbols are evaluated from their ``definitions`` when first met."""

    def __init__(self, point: dict, definitions: dict[sp.Symbol, sp.Expr]):
        self._values: dict = dict(point)
        self._definitions = definitions

    def matrix(self, m: sp.Matrix) -> mpmath.matrix:
        out = mpmath.matrix(m.rows, m.cols)
        for r in range(m.rows):
            for c in range(m.cols):
                out[r, c] = self(m[r, c])
        return out

    def __call__(self, e: sp.Expr):
        known = self._values.get(e)
        if known is None:
            known = self._evaluate(e)
            self._values[e] = known
        return known

    def _evaluate(self, e: sp.Expr):
        if e.is_Symbol:
            if e not in self._definitions:
                raise ValueError(f"check_limit: no value for the symbol {e}")
            return self(self._definitions[e])
        if e.is_Integer:
            return mpmath.mpf(int(e))
        if e.is_Rational:
            return mpmath.mpf(e.p) / e.q
        if e.is_Float:
            return mpmath.mpf(e)
        if e.is_NumberSymbol:
            return mpmath.mpf(e.evalf(mpmath.mp.dps + 5))
        if e.is_Add:
            return mpmath.fsum(self(a) for a in e.args)
        if e.is_Mul:
            return mpmath.fprod(self(a) for a in e.args)
        if e.is_Pow:
            base, exponent = self(e.base), e.exp
            if exponent.is_Integer:
                return base ** int(exponent)
            if exponent == sp.S.Half:
                return mpmath.sqrt(base)
            return base ** self(exponent)
        function = MPMATH_FUNCTIONS.get(type(e).__name__)
        if function is None:
            return mpmath.mpf(e.evalf(mpmath.mp.dps + 5, subs={s: self(s) for s in e.free_symbols}))
        return function(*[self(a) for a in e.args])


def given_point(xs: list[sp.Matrix], state: Sequence[Sequence[float]]) -> dict:
    """Values for the token symbols from a state shaped (n, d) (floats, read exactly)."""
    rows = [list(row) for row in state]
    if len(rows) != len(xs) or any(len(row) != token.rows for row, token in zip(rows, xs)):
        raise ValueError(
            f"points must be states shaped ({len(xs)}, {xs[0].rows}), got one shaped "
            f"({len(rows)}, {len(rows[0]) if rows else 0})"
        )
    return {symbol: mpmath.mpf(float(value)) for token, row in zip(xs, rows) for symbol, value in zip(token, row)}
