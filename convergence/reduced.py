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
from .fedorov import FedorovModel
from .model import Wrapper
from .noise import CommonNoise


def gram_factor(a: np.ndarray) -> np.ndarray:
    """F with F F^T = a a^T for a batch (paths, n, d) -> (paths, n, n), by symmetric eigen-decomposition."""
    gram = a @ np.swapaxes(a, -1, -2)
    values, vectors = np.linalg.eigh(gram)
    return vectors * np.sqrt(np.clip(values, 0.0, None))[..., None, :]


@dataclass(frozen=True)
class ReducedFedorov(Wrapper):
    """Model F's layer with the reduced sampler; its noise is a d x n matrix of N(0, h) entries."""

    model: FedorovModel

    def __post_init__(self) -> None:
        if self.model.law != "gaussian":
            raise ValueError(f"the reduced sampler is exact for Gaussian entries only, got law {self.model.law!r}")

    @property
    def noise(self) -> CommonNoise:
        return CommonNoise(shape=(self.model.dim, self.model.tokens), scale=1.0, law="gaussian")

    def layer(self, x: np.ndarray, dz: np.ndarray, h: float) -> np.ndarray:
        """``N(x_i + h M a_i + (V a_i) sqrt(h))`` with ``[sqrt(h) V a_i]_i = sigma dZ F^T``, dZ ~ N(0, h)."""
        a = self.model.attention(x)
        # (dZ F^T)^T = F dZ^T: rows are the tokens' increments.
        y = x + self.model.sigma * (gram_factor(a) @ np.swapaxes(dz, -1, -2))
        if self.model.mean_value is not None:
            y += h * (a @ self.model.mean_value.T)
        return normalise(y)
