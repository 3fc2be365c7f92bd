"""References computed another way than the layer maps: the backward Kolmogorov equation of a diffusion on
[-1, 1] (``kolmogorov``).
"""

from __future__ import annotations

from .kolmogorov import barycentric, expectation, lambdify_overlap, value_gradients

__all__ = [
    "barycentric",
    "expectation",
    "lambdify_overlap",
    "value_gradients",
]
