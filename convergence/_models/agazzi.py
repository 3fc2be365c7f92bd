"""Model A: attention plus random MLP blocks (Agazzi et al., arXiv:2604.26898), and its Ito limit.

Layer map (docs/models.md section 2), step h = T / L, tokens (paths, n, d), two normalised half-steps:

    Y_i  = N(X_i + h v a_i(X)),      a_i = sum_j softmax_j(beta <X_i, X_j>) X_j   (Q^T K = beta I, V = v I)
    X_i' = N(Y_i + sqrt(h) G_k(Y_i)),

v = +1 attractive, 0 no attention, -1 repulsive; G_k the layer's MLP field (``convergence._models.mlp_field``).

Limit SDE (Ito), from ``verify._calculus.expansion``'s drift of a normalised step applied to each half-step
(first: mu = v a, S = 0; second: mu = 0, S = E[xi xi^T]/h = k(X, X) I); the second half-step is
evaluated at Y = X + O(h), which changes nothing at order h:

    dX_i = P_{X_i} dB(X_i, t) + [v P_{X_i} a_i - ((d - 1)/2) k(X_i, X_i) X_i] dt,

with B the field's Brownian version (k(x, x) = k(1) for the Gaussian field, |psi(x)|^2 for frozen
features). Coefficients are evaluated at X / |X| (0-homogeneous extension) so an unprojected
Euler-Maruyama reference sees whether the radial term is right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from verify._analysis import KernelSpec
from verify._common import check_int, check_real
from verify._models import MODELS as SYMBOLIC

from .._runtime import random_stream
from .attention import attention_average, normalise, tangent_projection
from .mlp_field import FrozenFeatureField, GaussianField
from .noise import CommonNoise
from .normalised_step import normalised_step_drift
from .protocols import Claims, Wrapper, exemptions, in_law_only

MAX_BETA = 1e3
ATTENTION = {"attractive": 1.0, "none": 0.0, "repulsive": -1.0}


def attention_half_step(x: np.ndarray, h: float, beta: float, v: float) -> np.ndarray:
    """Model A's first half-step ``N(X + h v a(X))``, softmax with Q^T K = beta I (the identity when v = 0)."""
    if v == 0.0:
        return x
    return normalise(x + (h * v) * attention_average(x, beta))


class MLPField(Protocol):
    dim: int

    @property
    def noise(self) -> CommonNoise: ...

    def increment(self, y: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray: ...


@dataclass(frozen=True, eq=False)
class AgazziModel:
    """Model A's layer map with ``tokens`` n >= 1, an MLP ``field``, ``beta`` in [0, 1e3] and value sign
    ``v`` in [-1, 1] (V = v I)."""

    tokens: int
    field: MLPField
    beta: float = 1.0
    v: float = 1.0

    def __post_init__(self) -> None:
        check_int("tokens", self.tokens, minimum=1)
        check_real("beta", self.beta, minimum=0.0, maximum=MAX_BETA)
        check_real("v", self.v, minimum=-1.0, maximum=1.0)
        field_tokens = getattr(self.field, "tokens", self.tokens)
        if field_tokens != self.tokens:
            raise ValueError(
                f"tokens must equal the Gaussian field's number of points {field_tokens}, got {self.tokens}"
            )

    @property
    def dim(self) -> int:
        return self.field.dim

    @property
    def noise(self) -> CommonNoise:
        return self.field.noise

    @property
    def claims(self) -> Claims:
        isotropic = getattr(self.field, "isotropic", False)
        return Claims(
            limit="dX_i = P_{X_i} dB(X_i, t) + [v P_{X_i} a_i - ((d-1)/2) k(X_i, X_i) X_i] dt, B the field's "
            "Brownian version (covariance t k(<x, y>) I)",
            noise_law=f"the MLP field's noise ({type(self.field).__name__})",
            strong_order=0.5 if self.noise.brownian else None,
            weak_order=1.0,
            # verify's model A has an isotropic field, k(<x, y>): the Gaussian field's, not frozen features'
            symbolic=SYMBOLIC["agazzi"] if isotropic else None,
            exempt=exemptions(
                pathwise=in_law_only(self.noise),
                symbolic=None if isotropic else "the field's covariance is not k(<x, y>) I, as verify's model A's",
                permutation="the noise is the field's values at the tokens, factored in the token order: a permutation "
                "acts in law"
                if self.noise.shape[:1] == (self.tokens,)
                else None,
                rotation=None
                if hasattr(self.field, "rotate_noise")
                else f"no rotation acts on the noise of a {type(self.field).__name__}",
            ),
        )

    def symbolic_values(self) -> dict[str, float]:
        """The values of verify's model A symbols: d, beta and v (its kernel k is the field's)."""
        return {"d": float(self.dim), "beta": self.beta, "v": self.v}

    def rotate_noise(self, dw: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The field's action of the rotation ``q`` on its noise (``field.rotate_noise``)."""
        return self.field.rotate_noise(dw, q)

    def attention(self, x: np.ndarray) -> np.ndarray:
        return attention_average(x, self.beta)

    def attention_step(self, x: np.ndarray, h: float) -> np.ndarray:
        """The first half-step ``N(X + h v a(X))`` (the identity when v = 0)."""
        return attention_half_step(x, h, self.beta, self.v)

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        y = self.attention_step(x, h)
        return normalise(y + self.field.increment(y, dw, h))

    def limit_sde(self) -> AgazziSDE:
        if not self.noise.brownian:
            raise ValueError(
                "the fresh-feature field is not a Brownian increment; use a frozen-feature or Gaussian field"
            )
        return AgazziSDE(self)


@dataclass(frozen=True, eq=False)
class AgazziSDE(Wrapper):
    """``dX_i = P_{X_i} dB(X_i, t) + [v P_{X_i} a_i - ((d-1)/2) k(X_i, X_i) X_i] dt`` (module docstring)."""

    model: AgazziModel

    @property
    def noise(self) -> CommonNoise:
        return self.model.noise

    def _drift(self, x_hat: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Drift at unit ``x_hat`` given the field's variance k(x, x) per token, shaped (paths, n, 1).

        The one place the drift is formed: ``drift`` and ``drift_and_diffusion`` both call it, so a
        subclass changes the drift here."""
        zero, scalar_zero = np.zeros_like(x_hat), np.zeros_like(k)
        attention = normalised_step_drift(
            x_hat, self.model.v * self.model.attention(x_hat), zero, scalar_zero, scalar_zero
        )
        return attention + normalised_step_drift(x_hat, zero, k * x_hat, k, self.dim * k)

    def drift(self, x: np.ndarray) -> np.ndarray:
        x_hat = normalise(x)
        return self._drift(x_hat, self.model.field.kernel_diagonal(x_hat))

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return tangent_projection(x, self.model.field.increment(normalise(x), dw, 0.0))

    def drift_and_diffusion(self, x: np.ndarray, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both coefficients with one evaluation of the field's features (what an integrator needs per step)."""
        x_hat = normalise(x)
        increment, k = self.model.field.increment_and_diagonal(x_hat, dw)
        return self._drift(x_hat, k), tangent_projection(x, increment)


FEATURE_SEED = 20261201  # the frozen-features example's draw of its features

# the registry's examples of this model (``registry``): name -> a small instance
EXAMPLES = {
    "agazzi gaussian field": lambda: AgazziModel(2, GaussianField(KernelSpec("relu", 4), 2), beta=0.8, v=1.0),
    "agazzi frozen features": lambda: AgazziModel(
        3, FrozenFeatureField.draw(KernelSpec("tanh", 4), 16, random_stream(FEATURE_SEED)), beta=0.8, v=-1.0
    ),
}
