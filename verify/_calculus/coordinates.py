"""Brute force in explicit coordinates: the generator of a particle system for a fixed dimension.

Tokens are d-vectors of symbols; the common noise is written out component by component
(``noise_components``) and the generator of F(x) is the textbook formula

    L F = sum_{i,a} b_{ia} dF/dx_{ia} + 1/2 sum_r sum_{ia,jb} sigma^r_{ia} sigma^r_{jb} d2F/dx_{ia} dx_{jb}.

Nothing here reduces expectations to inner products, so agreement with ``verify._calculus.generator`` (which
works with d as a symbol) checks that reduction. A Brownian field is represented exactly by finitely
many components when its kernel is a polynomial, k(u) = c0 + c1 u + c2 u^2:
B(x) = sqrt(c0) sum_p e_p b_p + sqrt(c1) sum_pq e_p x_q b_pq + sqrt(c2) sum_pqr e_p x_q x_r b_pqr.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import sympy as sp

from .algebra import Mat, Vec, d, gram_symbol
from .generator import ParticleSystem
from .noise_laws import (
    BrownianField,
    MatrixBrownian,
    ScalarBrownian,
    SymmetricMatrixBrownian,
)


def token_symbols(n: int, dim: int) -> list[sp.Matrix]:
    return [sp.Matrix([sp.Symbol(f"x{i}_{a}", real=True) for a in range(dim)]) for i in range(n)]


def gram_values(xs: Sequence[sp.Matrix]) -> dict[sp.Symbol, sp.Expr]:
    return {gram_symbol(i, j): (xs[i].T * xs[j])[0, 0] for i in range(len(xs)) for j in range(i, len(xs))}


def vec_coordinates(v: Vec, xs: Sequence[sp.Matrix], gram: dict) -> sp.Matrix:
    return sum((xs[a] * v.c[a].subs(gram) for a in range(len(xs))), sp.zeros(xs[0].rows, 1))


def mat_coordinates(m: Mat, xs: Sequence[sp.Matrix], gram: dict) -> sp.Matrix:
    dim = xs[0].rows
    out = sp.eye(dim) * sp.sympify(m.alpha).subs(gram)
    for a, b in product(range(len(xs)), repeat=2):
        if m.C[a, b] != 0:
            out += m.C[a, b].subs(gram) * xs[a] * xs[b].T
    return out


def noise_components(system: ParticleSystem, xs, gram, kernel_coeffs=(0, 0, 0)) -> list[list[sp.Matrix]]:
    """For each independent scalar Brownian motion r, every token's coefficient vector sigma^r_i."""
    dim, n = xs[0].rows, len(xs)
    noise = system.noise
    mats = [mat_coordinates(m, xs, gram) for m, _ in system.diffusion]
    args = [arg for _, arg in system.diffusion]
    e = [sp.eye(dim)[:, p] for p in range(dim)]
    components = []
    if isinstance(noise, MatrixBrownian):
        scale = sp.sqrt(noise.variance)
        vs = [vec_coordinates(v, xs, gram) for v in args]
        for p, q in product(range(dim), repeat=2):
            components.append([scale * mats[i] * e[p] * vs[i][q] for i in range(n)])
    elif isinstance(noise, SymmetricMatrixBrownian):
        vs = [vec_coordinates(v, xs, gram) for v in args]
        for p, q in product(range(dim), repeat=2):
            basis = (e[p] * e[q].T + e[q] * e[p].T) / sp.sqrt(2)
            components.append([mats[i] * basis * vs[i] for i in range(n)])
    elif isinstance(noise, ScalarBrownian):
        vs = [vec_coordinates(v, xs, gram) for v in args]
        components.append([mats[i] * vs[i] for i in range(n)])
    elif isinstance(noise, BrownianField):
        c0, c1, c2 = (sp.sympify(c) for c in kernel_coeffs)
        points = [xs[i] for i in args]
        for p in range(dim):
            components.append([sp.sqrt(c0) * mats[i] * e[p] for i in range(n)])
            for q in range(dim):
                components.append([sp.sqrt(c1) * mats[i] * e[p] * points[i][q] for i in range(n)])
                for r in range(dim):
                    components.append([sp.sqrt(c2) * mats[i] * e[p] * points[i][q] * points[i][r] for i in range(n)])
    else:
        raise TypeError(f"no coordinate form for noise {type(noise).__name__}")
    return components


def exact_number(value) -> sp.Rational:
    """A rational within rounding of a float (0.947 -> 947/1000), the same on both sides of a comparison, so both
    evaluate at one exact point (plain ``nsimplify`` may return a nearby surd instead, a different point by ~1e-16)."""
    return sp.nsimplify(value, rational=True)


def coordinate_generator_at(
    system: ParticleSystem,
    f: sp.Expr,
    dim: int,
    point,
    kernel_coeffs=(0, 0, 0),
    values: dict | None = None,
    digits: int = 30,
) -> sp.Float:
    """``L F`` at ``point`` (n x dim numbers) for F(x) = f(Gram(x)), by brute force in coordinates."""
    n = system.span.n
    xs = token_symbols(n, dim)
    gram = gram_values(xs)
    subs_point = {xs[i][a]: exact_number(point[i][a]) for i in range(n) for a in range(dim)}
    values = dict(values or {})
    values[d] = dim
    big_f = f.subs(gram)
    flat = [xs[i][a] for i in range(n) for a in range(dim)]

    kernel = polynomial_kernel(kernel_coeffs)

    def at(expr):
        expr = sp.sympify(expr)
        if isinstance(system.noise, BrownianField):
            expr = expr.replace(system.noise.kernel, kernel)
        return expr.subs(values).subs(subs_point)

    grad = [at(sp.diff(big_f, v)) for v in flat]
    hess = [[at(sp.diff(big_f, v, w)) for w in flat] for v in flat]
    drift = [at(c) for i in range(n) for c in vec_coordinates(system.drift[i], xs, gram)]
    total = sum(b * g for b, g in zip(drift, grad))
    for comp in noise_components(system, xs, gram, kernel_coeffs):
        sig = [at(c) for i in range(n) for c in comp[i]]
        total += sp.Rational(1, 2) * sum(
            sig[p] * hess[p][q] * sig[q]
            for p in range(len(flat))
            for q in range(len(flat))
            if sig[p] != 0 and sig[q] != 0
        )
    return sp.N(total, digits)


def polynomial_kernel(coeffs) -> sp.Lambda:
    u = sp.Dummy("u")
    c0, c1, c2 = (sp.sympify(c) for c in coeffs)
    return sp.Lambda(u, c0 + c1 * u + c2 * u**2)


def gram_generator_at(
    system: ParticleSystem,
    f: sp.Expr,
    dim: int,
    point,
    kernel_coeffs=(0, 0, 0),
    values: dict | None = None,
    digits: int = 30,
) -> sp.Float:
    """``L f`` from ``verify._calculus.generator`` (d symbolic), evaluated at the same point with d = dim."""
    n = system.span.n
    gram = {
        gram_symbol(i, j): sum(exact_number(point[i][a]) * exact_number(point[j][a]) for a in range(dim))
        for i in range(n)
        for j in range(i, n)
    }
    expr = system.generator(f)
    if isinstance(system.noise, BrownianField):
        expr = expr.replace(system.noise.kernel, polynomial_kernel(kernel_coeffs))
    values = dict(values or {})
    values[d] = dim
    return sp.N(expr.subs(values).subs(gram), digits)
