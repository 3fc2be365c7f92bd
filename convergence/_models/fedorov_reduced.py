"""Reduced sampler for model F: draw V a_1 .. V a_n from their exact joint law instead of V itself.

Given the attention averages, the d-vectors ``V a_i`` (V with i.i.d. N(0, sigma^2) entries) are
jointly Gaussian with ``Cov((V a_i)_k, (V a_j)_l) = sigma^2 delta_kl <a_i, a_j>``. So with Z a d x n
matrix of standard normals and F any factor of the Gram matrix (F F^T = [<a_i, a_j>]),
``[V a_1 .. V a_n] = sigma Z F^T`` in law. F comes from a symmetric eigen-decomposition
(F = U diag(sqrt(max(lambda, 0)))), which stays valid when tokens merge and the Gram matrix is
singular (docs/models.md section 6: never plain Cholesky). This costs d n normals per layer instead of d^2;
it is exact in law for Gaussian entries only and cannot be coupled across depths (statistical
studies only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import normalise
from .fedorov import FedorovModel, FedorovSDE
from .noise import CommonNoise, psd_factor
from .protocols import Wrapper


def gram_factor(a: np.ndarray) -> np.ndarray:
    """F with F F^T = a a^T for a batch (paths, n, d) -> (paths, n, n).

    n = 2: Gram-Schmidt in closed form (``_factor_two``); otherwise a symmetric eigen-decomposition. Both
    stay valid when the Gram matrix is singular (merged tokens, a zero attention vector).
    """
    if a.shape[-2] == 2:
        return _factor_two(a)
    return psd_factor(a @ np.swapaxes(a, -1, -2))


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


def two_token_factor(x: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gram-Schmidt factor ``(r11, r12, r22)`` of [<a_i, a_j>] for two tokens, ``Q^T K = I``: each shaped (paths,).

    Written with ``s = x_1 + x_2`` and ``e = x_2 - x_1`` so that no small quantity is the difference of two
    large ones when the tokens merge or become antipodal. With unit tokens the scores are ``beta <x_i, x_j>``
    and the softmax weight of token i on the other token is ``w_1 = expit(-beta (|e|^2 - <s,e>) / 2)``,
    ``w_2 = expit(-beta (|e|^2 + <s,e>) / 2)``, evaluated as ``w - 1/2 = tanh(u / 2) / 2``; then
    ``a_1 = s/2 + (w_1 - 1/2) e``, ``a_2 = s/2 + (1/2 - w_2) e``,
    ``r11 = |a_1|``, ``r12 = <a_1, a_2> / r11`` and, since ``det[<a_i,a_j>] = det(W)^2 det[<x_i,x_j>]`` with
    ``det W = 1 - w_1 - w_2`` and ``det[<x_i,x_j>] = (|s|^2 |e|^2 - <s,e>^2) / 4``,
    ``r22 = |1 - w_1 - w_2| sqrt(|s|^2 |e|^2 - <s,e>^2) / (2 r11)`` (``|a_2|`` when ``a_1 = 0``).
    """
    x1, x2 = x[..., 0, :], x[..., 1, :]
    s, e = x1 + x2, x2 - x1
    return factor_from_products(np.vecdot(s, s), np.vecdot(e, e), np.vecdot(s, e), beta)


def factor_from_products(
    ss: np.ndarray, ee: np.ndarray, se: np.ndarray, beta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``two_token_factor`` from the products ``|s|^2``, ``|e|^2`` and ``<s, e>`` of the tokens' sum and difference."""
    half_1 = -0.5 * np.tanh(beta * (ee - se) / 4)  # w_1 - 1/2 (expit(u) - 1/2 = tanh(u/2)/2: no cancellation)
    half_2 = 0.5 * np.tanh(beta * (ee + se) / 4)  # 1/2 - w_2
    gram_11 = ss / 4 + half_1 * half_1 * ee + half_1 * se
    gram_22 = ss / 4 + half_2 * half_2 * ee + half_2 * se
    gram_12 = ss / 4 + half_1 * half_2 * ee + (half_1 + half_2) * se / 2
    r11 = np.sqrt(gram_11)
    nonzero = r11 > 0
    safe = np.where(nonzero, r11, 1.0)
    wedge = np.sqrt(np.maximum(ss * ee - se * se, 0.0))
    r22 = np.where(nonzero, np.abs(half_2 - half_1) * wedge / (2 * safe), np.sqrt(gram_22))
    return r11, gram_12 / safe, r22


def two_token_step(x: np.ndarray, dz: np.ndarray, beta: float, sigma: float) -> np.ndarray:
    """Model F's reduced layer for two tokens with ``Q^T K = I`` and ``M = 0``, before normalisation: (paths, 2, d).

    The increments ``sigma (r11 z_1, r12 z_1 + r22 z_2)`` (``z_1, z_2`` the columns of ``dz``, ``r`` from
    ``two_token_factor``) have the law of ``dW a_i``. Equal to the general path (``attention_average`` then
    ``gram_factor``) up to rounding, with a few passes over the tokens instead of batched 2 x 2 matrix products
    (numpy's slow case): about 5 times faster at d = 16.
    """
    r11, r12, r22 = two_token_factor(x, beta)
    z1, z2 = dz[..., 0], dz[..., 1]
    y = np.empty_like(x)
    y[..., 0, :] = x[..., 0, :] + (sigma * r11)[..., None] * z1
    y[..., 1, :] = x[..., 1, :] + (sigma * r12)[..., None] * z1 + (sigma * r22)[..., None] * z2
    return y


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
        """``N(x_i + h M a_i + (V a_i) sqrt(h))`` with ``[sqrt(h) V a_i]_i = sigma dZ F^T``, dZ ~ N(0, h).

        Two tokens with ``Q^T K = I`` and ``M = 0`` (the phase-transition setting) take ``two_token_step``.
        """
        model = self.model
        if model.tokens == 2 and model.interaction is None and model.mean_value is None:
            return normalise(two_token_step(x, dz, model.beta, model.sigma))
        return self.general_layer(x, dz, h)

    def general_layer(self, x: np.ndarray, dz: np.ndarray, h: float) -> np.ndarray:
        """The layer for any n, interaction and mean value: attention averages, then their Gram factor."""
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
