"""The Ito generator of particles driven by a common noise, on functions of the Gram matrix.

A system on n tokens: ``dx_i = b_i dt + M_i dN[v_i]`` (``b_i`` a vector and ``M_i`` a matrix in the
tokens' span, ``dN`` one common noise). For ``G_ij = <x_i, x_j>`` Ito's formula gives

    dG_ij = <dx_i, x_j> + <x_i, dx_j> + <dx_i, dx_j>
    drift:        <b_i, x_j> + <x_i, b_j> + tr(M_i^T M_j E[dN[v_j] dN[v_i]^T]) / dt
    martingale:   (M_i^T x_j)^T dN[v_i] + (M_j^T x_i)^T dN[v_j]
    covariation:  d<u^T dN[v], u'^T dN[v']> = u^T E[dN[v] dN[v']^T] u'

and the generator on f(G) is ``L f = sum_p drift_p df/dG_p + 1/2 sum_pq cov_pq d2f/dG_p dG_q``
over the independent Gram entries p.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import sympy as sp

from .algebra import Mat, Span, Vec, gram_symbol


@dataclass(frozen=True)
class ParticleSystem:
    """``dx_i = drift[i] dt + diffusion[i][0] dN[diffusion[i][1]]`` with noise law ``noise``."""

    span: Span
    drift: tuple[Vec, ...]
    diffusion: tuple[tuple[Mat, object], ...]
    noise: object

    def second_moment(self, v, w) -> Mat:
        """``E[dN[v] dN[w]^T] / dt`` (zero for a token without noise, ``v`` or ``w`` None)."""
        if v is None or w is None:
            return self.span.identity() * 0
        return self.noise.second_moment(self.span, v, w)

    def gram_drift(self, i: int, j: int) -> sp.Expr:
        xi, xj = self.span.token(i), self.span.token(j)
        (mi, vi), (mj, vj) = self.diffusion[i], self.diffusion[j]
        ito = ((mi.T @ mj) @ self.second_moment(vj, vi)).trace()
        return self.drift[i].dot(xj) + self.drift[j].dot(xi) + ito

    def gram_martingale(self, i: int, j: int) -> list[tuple[Vec, object]]:
        xi, xj = self.span.token(i), self.span.token(j)
        (mi, vi), (mj, vj) = self.diffusion[i], self.diffusion[j]
        return [(mi.T @ xj, vi), (mj.T @ xi, vj)]

    def gram_covariation(self, p: tuple[int, int], q: tuple[int, int]) -> sp.Expr:
        return sum(
            (
                self.second_moment(v, w).bilinear(u, z)
                for u, v in self.gram_martingale(*p)
                for z, w in self.gram_martingale(*q)
            ),
            sp.Integer(0),
        )

    @cached_property
    def pairs(self) -> list[tuple[int, int]]:
        """The index pairs of ``span.variables``."""
        n, unit = self.span.n, self.span.unit
        return [(i, j) for i in range(n) for j in range(i, n) if i != j or not unit]

    def generator(self, f: sp.Expr) -> sp.Expr:
        """``L f`` for f a function of the Gram symbols (not simplified)."""
        symbols = [gram_symbol(i, j) for i, j in self.pairs]
        first = sum((self.gram_drift(*p) * sp.diff(f, s) for p, s in zip(self.pairs, symbols)), sp.Integer(0))
        second = sp.Integer(0)
        for a, (p, s) in enumerate(zip(self.pairs, symbols)):
            for b, (q, t) in enumerate(zip(self.pairs, symbols)):
                d2 = sp.diff(f, s, t)
                if d2 != 0:
                    second += self.gram_covariation(p, q) * d2
        return first + second / 2
