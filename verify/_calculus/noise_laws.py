"""Common-noise laws, described by the second moment of the noise acting on a token.

A token's martingale part is ``M dN[v]``: ``dN[v]`` is the noise evaluated on ``v`` (a vector for a
matrix or scalar noise, ``dN v``; a token index for a Brownian field, ``dB(x_i)``). Everything the
Ito calculus needs is the second moment per unit time ``E[dN[v] dN[v']^T] / dt`` as a matrix in
the tokens' span (``verify._calculus.algebra.Mat``):

    matrix Brownian motion W (entries variance sigma^2):  sigma^2 <v, v'> I
    symmetric Q = (B + B^T)/sqrt(2) (random quadratic form): <v, v'> I + v' v^T
    Brownian field with covariance k(<x, y>) I_d:           k(<x_i, x_j>) I
    scalar Brownian motion (v = coefficient vector):          v v'^T
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .algebra import Mat, Span, Vec

sigma = sp.Symbol("sigma", positive=True)
k = sp.Function("k")


@dataclass(frozen=True)
class MatrixBrownian:
    """A d x d matrix Brownian motion with i.i.d. entries of variance ``variance`` per unit time."""

    variance: sp.Expr = sigma**2

    def second_moment(self, span: Span, v: Vec, w: Vec) -> Mat:
        return span.identity() * (self.variance * v.dot(w))


@dataclass(frozen=True)
class SymmetricMatrixBrownian:
    """``Q = (B + B^T)/sqrt(2)``, B a matrix of independent standard Brownian motions."""

    def second_moment(self, span: Span, v: Vec, w: Vec) -> Mat:
        return span.identity() * v.dot(w) + span.outer(w, v)


@dataclass(frozen=True)
class BrownianField:
    """A common Brownian field ``B(x, t)`` with ``E[B(x,t) B(y,t)^T] = t kernel(<x, y>) I_d``."""

    kernel: sp.Function = k

    def second_moment(self, span: Span, i: int, j: int) -> Mat:
        return span.identity() * self.kernel(span.gram[i, j])


@dataclass(frozen=True)
class ScalarBrownian:
    """One scalar Brownian motion shared by all tokens; ``dN[v] = dB v``."""

    def second_moment(self, span: Span, v: Vec, w: Vec) -> Mat:
        return span.outer(v, w)
