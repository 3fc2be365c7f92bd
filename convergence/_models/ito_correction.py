"""The Ito-Stratonovich correction of a limit SDE's drift.

A Stratonovich SDE dx = b(x) dt + G(x) o dW, with dW of covariance C dt (C = s^2 I for a packed increment of
scale s), is the Ito SDE dx = [b(x) + c(x)] dt + G(x) dW with

    c(x) = (1/2) s^2 sum_k DG_k(x) [G_k(x)],     G_k(x) = G(x) e_k, the diffusion applied to the k-th basis increment

(Kloeden and Platen, Numerical Solution of Stochastic Differential Equations, 1992, section 4.9, written for
the columns of G). The
directional derivative of each column along itself is taken by central differences at steps delta and 2 delta,
Richardson-extrapolated (error O(delta^4) plus rounding / delta, about 1e-11 relative for smooth coefficients at
delta = 1e-3 of the state's size): the diffusion is a user's numpy function, which cannot be differentiated
exactly (the suite's own models convert symbolically: ``verify._calculus.stratonovich``). Cost: 5 evaluations of the
diffusion on p stacked increments per state, p the noise's size.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

RELATIVE_STEP = 1e-3  # delta / max(1, the state's largest entry)

Diffusion = Callable[[np.ndarray, np.ndarray], np.ndarray]


def ito_correction(diffusion: Diffusion, noise_shape: tuple[int, ...], variance: float, x: np.ndarray) -> np.ndarray:
    """c(x) = (1/2) ``variance`` sum_k DG_k(x)[G_k(x)] (module docstring) per path: x (paths, n, d) -> (paths, n, d);
    ``diffusion(x, dw)`` is G(x) dw for increments dw shaped (paths, *noise_shape) of unit ``variance`` scale."""
    paths, size = x.shape[0], int(np.prod(noise_shape, dtype=int))
    basis = np.broadcast_to(np.eye(size).reshape(1, size, *noise_shape), (paths, size, *noise_shape))
    basis = basis.reshape(paths * size, *noise_shape)

    def columns(y: np.ndarray) -> np.ndarray:  # y (paths, size, n, d): G_k(y_k) for each k
        return diffusion(y.reshape(paths * size, *x.shape[1:]), basis).reshape(y.shape)

    stacked = np.broadcast_to(x[:, None], (paths, size, *x.shape[1:]))
    direction = columns(np.ascontiguousarray(stacked))
    length = np.sqrt(np.sum(direction**2, axis=(-2, -1), keepdims=True))
    unit = np.divide(direction, length, out=np.zeros_like(direction), where=length > 0)
    delta = RELATIVE_STEP * np.maximum(1.0, np.max(np.abs(x), axis=(-2, -1)))[:, None, None, None]

    def central(step: np.ndarray) -> np.ndarray:
        return (columns(stacked + step * unit) - columns(stacked - step * unit)) / (2 * step)

    derivative = (4 * central(delta) - central(2 * delta)) / 3  # along the unit direction; Richardson, O(delta^4)
    return 0.5 * variance * np.sum(length * derivative, axis=1)
