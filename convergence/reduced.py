"""Reduced sampler for model F: draw V a_1 .. V a_n from their exact joint law instead of V itself.

Given the attention averages, the d-vectors ``V a_i`` (V with i.i.d. N(0, sigma^2) entries) are
jointly Gaussian with ``Cov((V a_i)_k, (V a_j)_l) = sigma^2 delta_kl <a_i, a_j>``. So with Z a d x n
matrix of standard normals and F any factor of the Gram matrix (F F^T = [<a_i, a_j>]),
``[V a_1 .. V a_n] = sigma Z F^T`` in law. F comes from a symmetric eigen-decomposition
(F = U diag(sqrt(max(lambda, 0)))), which stays valid when tokens merge and the Gram matrix is
singular (MATH.md section 6: never plain Cholesky). This costs d n normals per layer instead of d^2;
it is exact in law for Gaussian entries only and cannot be coupled across depths (statistical
studies only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import normalise
from .fedorov import FedorovModel, FedorovSDE
from .model import Wrapper
from .noise import CommonNoise


def gram_factor(a: np.ndarray) -> np.ndarray:
    """F with F F^T = a a^T for a batch (paths, n, d) -> (paths, n, n).

    n = 2: Gram-Schmidt in closed form (``_factor_two``); otherwise a symmetric eigen-decomposition. Both
    stay valid when the Gram matrix is singular (merged tokens, a zero attention vector).
    """
    if a.shape[-2] == 2:
        return _factor_two(a)
    gram = a @ np.swapaxes(a, -1, -2)
    values, vectors = np.linalg.eigh(gram)
    return vectors * np.sqrt(np.clip(values, 0.0, None))[..., None, :]


def _factor_two(a: np.ndarray) -> np.ndarray:
    """Lower-triangular factor of [<a_i, a_j>] for two vectors by Gram-Schmidt: rows (r11, 0), (r12, r22).

    u = a_1 / |a_1| (any unit vector when a_1 = 0), r12 = <a_2, u>, r22 = |a_2 - r12 u|; exact whenever u is a
    unit vector, r22 is the norm of a residual vector (0 for merged tokens, never the root of a negative).
    """
    r11 = np.linalg.norm(a[..., 0, :], axis=-1)
    unit = a[..., 0, :] / np.where(r11 > 0, r11, 1.0)[..., None]
    unit[r11 == 0, 0] = 1.0
    r12 = np.sum(a[..., 1, :] * unit, axis=-1)
    r22 = np.linalg.norm(a[..., 1, :] - r12[..., None] * unit, axis=-1)
    factor = np.zeros(a.shape[:-2] + (2, 2))
    factor[..., 0, 0], factor[..., 1, 0], factor[..., 1, 1] = r11, r12, r22
    return factor


def reduced_noise(model: FedorovModel) -> CommonNoise:
    """The reduced noise dZ: a d x n matrix of N(0, h) entries (``sigma`` enters through the Gram factor)."""
    return CommonNoise(shape=(model.dim, model.tokens), scale=1.0, law="gaussian")


def reduced_increments(sigma: float, a: np.ndarray, dz: np.ndarray) -> np.ndarray:
    """The tokens' increments ``[dW a_i]_i`` in law: ``sigma F dZ^T`` (rows are tokens), (paths, n, d)."""
    return sigma * (gram_factor(a) @ np.swapaxes(dz, -1, -2))


@dataclass(frozen=True)
class ReducedFedorov(Wrapper):
    """Model F's layer with the reduced sampler; its noise is a d x n matrix of N(0, h) entries."""

    model: FedorovModel

    def __post_init__(self) -> None:
        if self.model.law != "gaussian":
            raise ValueError(f"the reduced sampler is exact for Gaussian entries only, got law {self.model.law!r}")

    @property
    def noise(self) -> CommonNoise:
        return reduced_noise(self.model)

    def layer(self, x: np.ndarray, dz: np.ndarray, h: float) -> np.ndarray:
        """``N(x_i + h M a_i + (V a_i) sqrt(h))`` with ``[sqrt(h) V a_i]_i = sigma dZ F^T``, dZ ~ N(0, h)."""
        a = self.model.attention(x)
        y = x + reduced_increments(self.model.sigma, a, dz)
        if self.model.mean_value is not None:
            y += h * (a @ self.model.mean_value.T)
        return normalise(y)

    def limit_sde(self) -> ReducedFedorovSDE:
        return ReducedFedorovSDE(self.model)


@dataclass(frozen=True, eq=False)
class ReducedFedorovSDE(FedorovSDE):
    """Model F's limit SDE with the same reduced noise: ``dW a_i`` drawn as ``sigma dZ F^T`` (exact in law,
    d n normals per step; not the same Brownian matrix path, so for weak and throughput use only)."""

    @property
    def noise(self) -> CommonNoise:
        return reduced_noise(self.model)

    def _noise(self, a: np.ndarray, dz: np.ndarray) -> np.ndarray:
        return reduced_increments(self.model.sigma, a, dz)
