"""Ito <-> Stratonovich in explicit coordinates.

For ``dX = b dt + sum_r sigma_r(X) dW^r`` (Ito) the Stratonovich drift is
``b_S = b - 1/2 sum_r (D sigma_r) sigma_r``, and back ``b = b_S + 1/2 sum_r (D sigma_r) sigma_r``.
The noise components come from ``verify._calculus.coordinates`` (the same brute-force representation that
checks the generator), with the tokens' coordinates flattened into one vector.
"""

from __future__ import annotations

import sympy as sp

from .algebra import d
from .coordinates import gram_values, noise_components, token_symbols, vec_coordinates
from .generator import ParticleSystem


def _flat(vectors) -> sp.Matrix:
    return sp.Matrix.vstack(*vectors)


def correction(components, coords: sp.Matrix) -> sp.Matrix:
    """``1/2 sum_r (D sigma_r) sigma_r`` for flattened components sigma_r(coords)."""
    total = sp.zeros(coords.rows, 1)
    for comp in components:
        sigma_r = _flat(comp)
        total += sigma_r.jacobian(coords) * sigma_r
    return total / 2


def coordinate_form(system: ParticleSystem, dim: int, values: dict | None = None, kernel_coeffs=(0, 0, 0)):
    """(flattened coordinates, Ito drift, noise components) of ``system`` in dimension ``dim``."""
    values = dict(values or {})
    values[d] = dim
    xs = token_symbols(system.span.n, dim)
    gram = gram_values(xs)
    drift = _flat([vec_coordinates(b, xs, gram) for b in system.drift]).subs(values)
    comps = [[c.subs(values) for c in comp] for comp in noise_components(system, xs, gram, kernel_coeffs)]
    return _flat(xs), drift, comps


def ito_to_stratonovich(drift: sp.Matrix, components, coords: sp.Matrix) -> sp.Matrix:
    return drift - correction(components, coords)


def stratonovich_to_ito(drift: sp.Matrix, components, coords: sp.Matrix) -> sp.Matrix:
    return drift + correction(components, coords)
