"""Model A's common noise: the random MLP block as a random field of position, three ways.

The MLP block of layer k is G_k(y) = m^{-1/2} W_k act(U_k y / sqrt(d) + b_k) + c_k (docs/models.md section 2),
one draw per layer shared by every token; the layer adds sqrt(h) G_k(Y_i) to each token. Its covariance
is E[G(x) G(y)^T] = k(<x, y>) I_d (``verify._analysis.kernels``). Each field below gives ``increment(y, dw, h)``,
the common noise term added to tokens y shaped (paths, n, d), from one layer's noise array ``dw``.

``FreshFeatureField``  The paper's block exactly: U, b, W, c fresh at every layer (finite width m).
    Not a Brownian increment (U and b enter at scale 1), so it cannot be refined in depth; as
    L -> infinity its layers average the feature kernel over U, b, and the limit SDE is driven by
    the Gaussian field with covariance k (the same limit as infinite width).

``FrozenFeatureField``  The depth-refinable version: the hidden features U (m x d) and b are drawn
    once and frozen; the output weights and bias are driven by a d x (m+1) matrix Brownian motion
    Omega, B(x, t) = Omega_t psi(x), psi(x) = (act(U x/sqrt(d) + b) / sqrt(m), sigma_W). B is a
    Brownian field with the finite-rank kernel k_m(x, y) = <psi(x), psi(y)> I_d, and one layer adds
    sqrt(h) G_k(y) = (Omega_{t+h} - Omega_t) psi(y): exactly the paper's block with U, b frozen.
    Increments nest (coarse = sum of fine), so pathwise depth comparisons are possible. Its limit
    SDE is driven by B: dX = P_X dB(X, t) + [v P_X a(X) - ((d-1)/2) k_m(X, X) X] dt. As m -> infinity
    k_m -> k almost surely (law of large numbers, fluctuations O(m^{-1/2})), so it tends to the
    limit of the paper's model; at fixed m it is the depth limit of a network with frozen features.

``GaussianField``  Infinite width: the centred Gaussian field with covariance k, sampled exactly and
    jointly at the n token positions: increment = F(Y) dZ with dZ an n x d matrix of N(0, h)
    entries and F the lower-triangular Cholesky factor of K(Y) = [k(<y_i, y_j>)]: continuous in Y
    where K is positive definite (distinct tokens), and nested: the first k tokens move as the
    k-token field driven by the first k rows of dZ. Merged tokens (K singular) keep rows of F equal
    to rounding (about 1e-8, as the symmetric root's) and move together. For n = 2 the factor is
    written with the deficit k(1) - k(u), which keeps full relative precision for close pairs. dZ is
    Brownian, so this field refines in depth too (the N-point motion is an SDE driven by Z with
    coefficient F(X)). F follows the token order: a permutation of the tokens permutes the field in
    law, not path by path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from verify._analysis import Kernel, KernelSpec, kernel
from verify._common import check_int
from verify._models import activation

from .noise import CommonNoise, psd_factor


def half_squared_distances(y: np.ndarray) -> np.ndarray:
    """z_ij = |y_i - y_j|^2 / 2 = 1 - <y_i, y_j> on the sphere, from differences (accurate for close pairs)."""
    diff = y[..., :, None, :] - y[..., None, :, :]
    return 0.5 * np.sum(diff * diff, axis=-1)


def preactivations(y: np.ndarray, u: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``U y_i / sqrt(d) + b`` for every token: (paths, n, m); ``u`` is (m, d) or (paths, m, d).

    U is scaled before the product and b added in place: one pass over the (paths, n, m) result instead of three."""
    out = y @ (np.swapaxes(u, -1, -2) / np.sqrt(y.shape[-1]))
    out += b[..., None, :]
    return out


@dataclass(frozen=True, eq=False)
class GaussianField:
    """The infinite-width field with covariance k at ``tokens`` points (see the module docstring)."""

    spec: KernelSpec
    tokens: int
    # law-only sampling: the pivoted Cholesky factor of K(Y) from the Gram matrix (``psd_factor(form="pivoted")``),
    # about 60 times cheaper at n = 64 but not continuous in Y (no pathwise couplings); the Gram form resolves pairs
    # down to distances of about 1e-7 (1 - <y_i, y_j> carries an absolute rounding of 1e-16), below which they move
    # together to rounding
    pivoted: bool = False
    isotropic: ClassVar[bool] = True  # covariance k(<x, y>) I: the field verify's model A assumes

    def __post_init__(self) -> None:
        check_int("tokens", self.tokens, minimum=1)

    @property
    def dim(self) -> int:
        return self.spec.dim

    @property
    def kernel(self) -> Kernel:
        return kernel(self.spec)

    @property
    def noise(self) -> CommonNoise:
        return CommonNoise(shape=(self.tokens, self.dim))

    def factor(self, y: np.ndarray) -> np.ndarray:
        """F(Y) with F F^T = K(Y), shaped (paths, n, n)."""
        k = self.kernel
        if self.tokens == 2:
            gap = k.deficit(0.5 * np.sum((y[:, 0] - y[:, 1]) ** 2, axis=-1))
            f = np.zeros(y.shape[:-2] + (2, 2))
            root = np.sqrt(k.k1)
            f[:, 0, 0] = root
            f[:, 1, 0] = root - gap / root  # k(u) / sqrt(k1)
            f[:, 1, 1] = np.sqrt(np.clip(gap * (2.0 - gap / k.k1), 0.0, None))  # k1 - k(u)^2/k1
            return f
        upper = np.triu_indices(self.tokens, 1)  # K is symmetric with k(1) on its diagonal: half the kernel calls
        if self.pivoted:
            gram = y @ np.swapaxes(y, -1, -2)  # BLAS: 40 times cheaper than the pairs' dot products at d = 64
            z = 1.0 - gram[..., upper[0], upper[1]]
        else:  # 1 - <y_i, y_j> from differences: full relative precision for close pairs
            diff = y[..., upper[0], :] - y[..., upper[1], :]
            z = 0.5 * np.einsum("...k,...k->...", diff, diff)
        off = k.k1 - k.deficit(z)
        covariance = np.full(y.shape[:-2] + (self.tokens, self.tokens), k.k1)
        covariance[..., upper[0], upper[1]] = off
        covariance[..., upper[1], upper[0]] = off
        return psd_factor(covariance, "pivoted" if self.pivoted else "lower")

    def increment(self, y: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        return self.factor(y) @ dw

    def rotate_noise(self, dw: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The noise that makes the field equivariant under the rotation ``q`` (points y -> y q^T): its rows, the
        field's values in R^d (covariance k(<y_i, y_j>) I, unchanged by q), rotate as the points do."""
        return dw @ np.swapaxes(q, -1, -2)

    def kernel_diagonal(self, y: np.ndarray) -> np.ndarray:
        return np.full(y.shape[:-1] + (1,), self.kernel.k1)

    def increment_and_diagonal(self, y: np.ndarray, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.increment(y, dw, 0.0), self.kernel_diagonal(y)


@dataclass(frozen=True, eq=False)
class FrozenFeatureField:
    """Width-m field with frozen hidden features and Brownian output weights (see the module docstring).

    ``features`` = (U, b) with U (m, d) standard normal and b (m,) ~ N(0, sigma_U^2); draw them with
    ``FrozenFeatureField.draw(spec, width, rng)``.
    """

    spec: KernelSpec
    u: np.ndarray = field(repr=False)
    b: np.ndarray = field(repr=False)

    @classmethod
    def draw(cls, spec: KernelSpec, width: int, rng: np.random.Generator) -> FrozenFeatureField:
        width = check_int("width", width, minimum=1)
        u = rng.standard_normal((width, spec.dim))
        b = spec.sigma_u * rng.standard_normal(width)
        return cls(spec, u, b)

    @property
    def dim(self) -> int:
        return self.spec.dim

    @property
    def width(self) -> int:
        return self.u.shape[0]

    @property
    def noise(self) -> CommonNoise:
        return CommonNoise(shape=(self.dim, self.width + 1))

    def features(self, y: np.ndarray) -> np.ndarray:
        """psi(y) = (act(U y/sqrt(d) + b)/sqrt(m), sigma_W), shaped (paths, n, m+1)."""
        act = activation(self.spec.activation).numpy
        hidden = act(preactivations(y, self.u, self.b)) / np.sqrt(self.width)
        bias = np.full(hidden.shape[:-1] + (1,), self.spec.sigma_w)
        return np.concatenate([hidden, bias], axis=-1)

    def increment(self, y: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        """(Omega_{t+h} - Omega_t) psi(y_i) for each token; ``dw`` is (paths, d, m+1)."""
        return self.features(y) @ np.swapaxes(dw, -1, -2)

    def kernel_diagonal(self, y: np.ndarray) -> np.ndarray:
        """k_m(y, y) = |psi(y)|^2, shaped (paths, n, 1)."""
        psi = self.features(y)
        return np.sum(psi * psi, axis=-1, keepdims=True)

    def increment_and_diagonal(self, y: np.ndarray, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``increment`` and ``kernel_diagonal`` from one evaluation of the features."""
        psi = self.features(y)
        return psi @ np.swapaxes(dw, -1, -2), np.sum(psi * psi, axis=-1, keepdims=True)


@dataclass(frozen=True, eq=False)
class FreshFeatureField:
    """The paper's width-m block with every weight fresh at each layer (not refinable in depth).

    One layer's noise packs standard normals in an (m+1, 2d+1) array: rows < m hold U's row, b's
    entry (unit scale) and W's column (scale sqrt(h)); row m holds c (scale sqrt(h)) in its last d
    entries. Drawn as ``sqrt(h)`` times standard normals; the unit-scale parts are rescaled here.
    """

    spec: KernelSpec
    width: int

    def __post_init__(self) -> None:
        check_int("width", self.width, minimum=1)

    @property
    def dim(self) -> int:
        return self.spec.dim

    @property
    def noise(self) -> CommonNoise:
        return CommonNoise(shape=(self.width + 1, 2 * self.dim + 1), nested=False)

    def increment(self, y: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        d, m = self.dim, self.width
        unit = dw[..., :m, : d + 1] / np.sqrt(h)
        u, b = unit[..., :d], self.spec.sigma_u * unit[..., d]
        w_t, c = dw[..., :m, d + 1 :], self.spec.sigma_w * dw[..., m, d + 1 :]
        act = activation(self.spec.activation).numpy
        return act(preactivations(y, u, b)) @ w_t / np.sqrt(m) + c[..., None, :]
