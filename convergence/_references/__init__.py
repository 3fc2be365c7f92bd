"""References computed another way than the layer maps: the backward Kolmogorov equation of a diffusion on
[-1, 1] (``kolmogorov``).
"""

from __future__ import annotations

from .kolmogorov import expectation, lambdify_overlap

__all__ = [
    "expectation",
    "lambdify_overlap",
]
