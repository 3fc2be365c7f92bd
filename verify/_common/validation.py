"""Input validation: every public entry point checks its parameters here.

Each check raises ``ValueError`` (or ``TypeError``) with a message that names the parameter and the
allowed range, so that a bad value fails at once and says how to fix it.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from numbers import Integral, Real

import numpy as np


def check_int(name: str, value: object, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as ``int`` if it is an integer in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    low = "-inf" if minimum is None else str(minimum)
    high = "inf" if maximum is None else str(maximum)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value}")
    return value


def check_real(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` in the given range (open at ``minimum`` if ``strict_minimum``)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    bracket = "(" if strict_minimum else "["
    low = "-inf" if minimum is None else f"{minimum:g}"
    high = "inf" if maximum is None else f"{maximum:g}"
    below = minimum is not None and (value <= minimum if strict_minimum else value < minimum)
    above = maximum is not None and value > maximum
    if below or above:
        raise ValueError(f"{name} must be in {bracket}{low}, {high}], got {value:g}")
    return value


def check_choice(name: str, value: object, choices: Collection[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return str(value)


def check_matrix(name: str, value: object, shape: tuple[int, ...]) -> np.ndarray:
    """Return ``value`` as a finite float64 array of the given shape."""
    array = np.asarray(value, dtype=np.float64)
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must have finite entries")
    return array


def check_tokens(name: str, x: object, *, tokens: int | None = None, dim: int | None = None) -> np.ndarray:
    """Return token positions as a finite float64 array shaped (paths, tokens, d)."""
    array = np.asarray(x, dtype=np.float64)
    if array.ndim != 3:
        raise ValueError(f"{name} must be shaped (paths, tokens, d), got shape {array.shape}")
    if tokens is not None and array.shape[1] != tokens:
        raise ValueError(f"{name} must hold {tokens} tokens on axis 1, got {array.shape[1]}")
    if dim is not None and array.shape[2] != dim:
        raise ValueError(f"{name} must have dimension d = {dim} on axis 2, got {array.shape[2]}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must have finite entries")
    return array


def check_ladder(
    name: str, values: object, *, minimum: int = 1, levels: int = 3, doubling: bool = False
) -> tuple[int, ...]:
    """Return ``values`` as a tuple of at least ``levels`` strictly increasing integers >= ``minimum``
    (``doubling``: each twice the previous, so the grids nest)."""
    ladder = tuple(values) if isinstance(values, (list, tuple)) else ()
    if len(ladder) < levels:
        raise ValueError(f"{name} must hold at least {levels} increasing integers, got {values!r}")
    for index, value in enumerate(ladder):
        check_int(f"{name}[{index}]", value, minimum=minimum)
    if any(b <= a for a, b in zip(ladder, ladder[1:])):
        raise ValueError(f"{name} must be strictly increasing, got {ladder}")
    if doubling and any(b != 2 * a for a, b in zip(ladder, ladder[1:])):
        raise ValueError(f"{name} must be a doubling ladder (each level twice the previous), got {ladder}")
    return ladder
