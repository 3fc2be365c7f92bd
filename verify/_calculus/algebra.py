"""Linear algebra in the span of the tokens, with the dimension d as a symbol.

Every vector that appears in the models (tokens x_i, attention averages a_i, projections P_x v) is
a linear combination of the tokens, and every matrix is ``alpha I + sum_ab C_ab x_a x_b^T``. So
inner products reduce to the Gram matrix ``G_ab = <x_a, x_b>`` and traces to ``tr I = d`` and
``tr(x_a x_b^T) = G_ab``: no coordinates and no fixed dimension are needed.

    Vec:  column of n coefficients c, meaning sum_a c_a x_a
    Mat:  (alpha, C) meaning alpha I + sum_ab C_ab x_a x_b^T
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

d = sp.Symbol("d", positive=True, integer=True)


def gram_symbol(i: int, j: int) -> sp.Symbol:
    """The symbol of <x_i, x_j> (symmetric: g_ij with i <= j)."""
    i, j = min(i, j), max(i, j)
    return sp.Symbol(f"g_{i}{j}", real=True)


@dataclass(frozen=True)
class Span:
    """The span of ``n`` tokens. ``unit`` fixes |x_i| = 1 (G_ii = 1); otherwise G_ii are symbols."""

    n: int
    unit: bool = True

    @property
    def gram(self) -> sp.Matrix:
        return sp.Matrix(self.n, self.n, lambda i, j: 1 if (i == j and self.unit) else gram_symbol(i, j))

    @property
    def variables(self) -> list[sp.Symbol]:
        """The independent Gram symbols (off-diagonal, and diagonal when not ``unit``)."""
        return [gram_symbol(i, j) for i in range(self.n) for j in range(i, self.n) if i != j or not self.unit]

    def token(self, i: int) -> Vec:
        return Vec(self, sp.Matrix(self.n, 1, lambda a, _: 1 if a == i else 0))

    def zero(self) -> Vec:
        return Vec(self, sp.zeros(self.n, 1))

    def identity(self) -> Mat:
        return Mat(self, sp.Integer(1), sp.zeros(self.n, self.n))

    def outer(self, u: Vec, v: Vec) -> Mat:
        return Mat(self, sp.Integer(0), u.c * v.c.T)

    def projection(self, i: int) -> Mat:
        """``P_i = I - x_i x_i^T`` (the tangent projection at a unit token)."""
        x = self.token(i)
        return self.identity() - self.outer(x, x)

    def on_sphere(self, expr: sp.Expr) -> sp.Expr:
        """Substitute G_ii = 1."""
        return expr.subs({gram_symbol(i, i): 1 for i in range(self.n)})


@dataclass(frozen=True)
class Vec:
    span: Span
    c: sp.Matrix

    def __add__(self, other: Vec) -> Vec:
        return Vec(self.span, self.c + other.c)

    def __sub__(self, other: Vec) -> Vec:
        return Vec(self.span, self.c - other.c)

    def __neg__(self) -> Vec:
        return Vec(self.span, -self.c)

    def __mul__(self, scalar) -> Vec:
        return Vec(self.span, self.c * sp.sympify(scalar))

    __rmul__ = __mul__

    def dot(self, other: Vec) -> sp.Expr:
        return (self.c.T * self.span.gram * other.c)[0, 0]

    def norm2(self) -> sp.Expr:
        return self.dot(self)


@dataclass(frozen=True)
class Mat:
    span: Span
    alpha: sp.Expr
    C: sp.Matrix

    def __add__(self, other: Mat) -> Mat:
        return Mat(self.span, self.alpha + other.alpha, self.C + other.C)

    def __sub__(self, other: Mat) -> Mat:
        return Mat(self.span, self.alpha - other.alpha, self.C - other.C)

    def __mul__(self, scalar) -> Mat:
        s = sp.sympify(scalar)
        return Mat(self.span, self.alpha * s, self.C * s)

    __rmul__ = __mul__

    def __matmul__(self, other):
        g = self.span.gram
        if isinstance(other, Vec):
            return Vec(self.span, self.alpha * other.c + self.C * g * other.c)
        return Mat(
            self.span, self.alpha * other.alpha, self.alpha * other.C + other.alpha * self.C + self.C * g * other.C
        )

    @property
    def T(self) -> Mat:
        return Mat(self.span, self.alpha, self.C.T)

    def trace(self) -> sp.Expr:
        return self.alpha * d + (self.C * self.span.gram).trace()

    def bilinear(self, u: Vec, v: Vec) -> sp.Expr:
        """``u^T A v``."""
        return u.dot(self @ v)
