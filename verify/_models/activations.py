"""The activations of model A's MLP blocks, in numpy (simulation, quadrature) and mpmath (high precision).

Each activation carries its first derivative (Price's theorem turns k'(u) into an expectation of
act' x act'), the points where that derivative jumps (quadrature splits there) and whether the
function is odd (an odd field without biases makes antipodal pairs, docs/models.md section 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mpmath
import numpy as np
from scipy.special import expit

from .._common import check_choice


@dataclass(frozen=True)
class Activation:
    name: str
    numpy: Callable[[np.ndarray], np.ndarray]
    numpy_derivative: Callable[[np.ndarray], np.ndarray]
    mpmath: Callable
    mpmath_derivative: Callable
    kinks: tuple[float, ...] = ()
    odd: bool = False


def _mp_sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


def _silu_derivative(x: np.ndarray) -> np.ndarray:
    s = expit(x)
    return s * (1 + x * (1 - s))


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(
        "relu",
        lambda x: np.maximum(x, 0.0),
        lambda x: (x > 0).astype(np.float64),
        lambda x: max(x, 0),
        lambda x: mpmath.mpf(1) if x > 0 else mpmath.mpf(0),
        kinks=(0.0,),
    ),
    "tanh": Activation(
        "tanh", np.tanh, lambda x: 1.0 / np.cosh(x) ** 2, mpmath.tanh, lambda x: mpmath.sech(x) ** 2, odd=True
    ),
    "sigmoid": Activation(
        "sigmoid",
        expit,
        lambda x: expit(x) * (1 - expit(x)),
        _mp_sigmoid,
        lambda x: _mp_sigmoid(x) * (1 - _mp_sigmoid(x)),
    ),
    "silu": Activation(
        "silu",
        lambda x: x * expit(x),
        _silu_derivative,
        lambda x: x * _mp_sigmoid(x),
        lambda x: _mp_sigmoid(x) * (1 + x * (1 - _mp_sigmoid(x))),
    ),
    "linear": Activation(
        "linear",
        lambda x: np.asarray(x, dtype=np.float64),
        lambda x: np.ones_like(x, dtype=np.float64),
        lambda x: x,
        lambda x: mpmath.mpf(1),
        odd=True,
    ),
}


def activation(name: str) -> Activation:
    """The activation called ``name`` (one of relu, tanh, sigmoid, silu, linear)."""
    return ACTIVATIONS[check_choice("activation", name, ACTIVATIONS)]
