"""Ito calculus with the dimension d as a symbol: the tokens' span algebra (``algebra``), noise laws by their
second moments (``noise_laws``), the generator of particles with a common noise (``generator``), one normalised
step expanded in sqrt(h) (``expansion``), and brute force in explicit coordinates (``coordinates``,
``stratonovich``).
"""

from __future__ import annotations

from .algebra import Span, Vec, d, gram_symbol
from .coordinates import (
    coordinate_generator_at,
    gram_generator_at,
    polynomial_kernel,
    token_symbols,
    vec_coordinates,
)
from .expansion import (
    TRS,
    XMU,
    XSX,
    NormalisedStep,
    expand_step,
    limit_system,
    step_drift_coefficients,
)
from .generator import ParticleSystem
from .noise_laws import (
    BrownianField,
    MatrixBrownian,
    ScalarBrownian,
    SymmetricMatrixBrownian,
    k,
    sigma,
)
from .stratonovich import coordinate_form, ito_to_stratonovich, stratonovich_to_ito

__all__ = [
    "BrownianField",
    "MatrixBrownian",
    "NormalisedStep",
    "ParticleSystem",
    "ScalarBrownian",
    "Span",
    "SymmetricMatrixBrownian",
    "TRS",
    "Vec",
    "XMU",
    "XSX",
    "coordinate_form",
    "coordinate_generator_at",
    "d",
    "expand_step",
    "gram_generator_at",
    "gram_symbol",
    "ito_to_stratonovich",
    "k",
    "limit_system",
    "polynomial_kernel",
    "sigma",
    "step_drift_coefficients",
    "stratonovich_to_ito",
    "token_symbols",
    "vec_coordinates",
]
