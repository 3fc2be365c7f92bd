"""The hybrid two-token model of Fedorov et al. (docs/models.md section 1): unnormalised attention, scalar noise.

Layer map, step ``h``, one scalar common noise ``xi_k`` (mean 0, variance 1) per layer:

    u_i  = (1/n) sum_j exp(beta <x_i, x_j>) x_j
    y_i  = x_i + h u_i + eps sqrt(h) xi_k u_i = x_i + (h + eps dB_k) u_i,    x_i' <- y_i / |y_i|

with ``dB_k = sqrt(h) xi_k``. Since only the direction of ``y_i`` is kept, the layer works with
``u_i exp(-m_i)`` (``m_i`` the largest score) and ``x_i exp(-m_i)``: every number stays finite at beta = 1e3.

Limit SDE (Ito), from the same second-order expansion of N(x + delta) as model F with
``delta = (h + eps dB) u`` and E dB^2 = h:

    dx_i = eps P_{x_i} u_i dB + [P_{x_i} u_i + eps^2 (-<x_i,u_i> u_i - |u_i|^2 x_i / 2
                                 + (3/2) <x_i,u_i>^2 x_i)] dt.

Its radial part is ``-(eps^2/2) |P_x u|^2 x``, which balances the Ito term of ``|eps P_x u dB|^2``
(sphere invariant); its tangent part ``P_x u - eps^2 <x,u> P_x u`` is what makes the dichotomy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verify._common import check_choice, check_int, check_real
from verify._models import MODELS as SYMBOLIC

from .attention import normalise, scaled_unnormalised_attention
from .fedorov import MAX_BETA
from .noise import ENTRY_LAWS, CommonNoise, scalar_noise
from .normalised_step import NormalisedLayerLimit
from .protocols import Claims, exemptions, in_law_only

# exp(beta) must stay finite in the limit SDE, whose coefficients are not scale-free.
MAX_SDE_BETA = 700.0


@dataclass(frozen=True)
class HybridModel:
    """The hybrid model's layer map (``tokens`` n >= 1, default 2; ``eps`` >= 0; ``law`` of xi_k)."""

    dim: int
    beta: float = 1.0
    eps: float = 1.0
    tokens: int = 2
    law: str = "rademacher"

    def __post_init__(self) -> None:
        check_int("dim", self.dim, minimum=2)
        check_int("tokens", self.tokens, minimum=1)
        check_real("beta", self.beta, minimum=-MAX_BETA, maximum=MAX_BETA)
        check_real("eps", self.eps, minimum=0.0)
        check_choice("law", self.law, ENTRY_LAWS)

    @property
    def noise(self) -> CommonNoise:
        return scalar_noise(1.0, self.law)

    @property
    def claims(self) -> Claims:
        return Claims(
            limit="dx_i = eps P_{x_i} u_i dB + [P_{x_i} u_i + eps^2 (-<x_i,u_i> u_i - |u_i|^2 x_i / 2 "
            "+ (3/2) <x_i,u_i>^2 x_i)] dt, B a scalar Brownian motion",
            noise_law=f"one {self.law} scalar xi_k of variance 1 per layer (dB = sqrt(h) xi_k)",
            strong_order=0.5 if self.law == "gaussian" else None,
            weak_order=1.0,
            symbolic=SYMBOLIC["hybrid"],
            exempt=exemptions(pathwise=in_law_only(self.noise)),
        )

    def symbolic_values(self) -> dict[str, float]:
        """The values of verify's hybrid model symbols: d, beta and epsilon."""
        return {"d": float(self.dim), "beta": self.beta, "epsilon": self.eps}

    def rotate_noise(self, dw: np.ndarray, q: np.ndarray) -> np.ndarray:
        """One scalar per layer: a rotation of the tokens leaves it as it is."""
        return dw

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        """One layer ``N(x_i + (h + eps dB) u_i)``; ``dw`` = dB_k shaped (paths,)."""
        scaled_u, top = scaled_unnormalised_attention(x, self.beta)
        gain = (h + self.eps * np.asarray(dw, dtype=np.float64))[:, None, None]
        return normalise(np.exp(-top) * x + gain * scaled_u)

    def limit_sde(self) -> HybridSDE:
        if abs(self.beta) > MAX_SDE_BETA:
            raise ValueError(
                f"beta must be in [-{MAX_SDE_BETA:g}, {MAX_SDE_BETA:g}] for the limit SDE, got {self.beta:g}"
            )
        return HybridSDE(self)


@dataclass(frozen=True)
class HybridSDE(NormalisedLayerLimit):
    """The Ito limit of the hybrid model (module docstring), driven by a scalar Brownian motion:
    drift from ``verify`` with S = eps^2 u u^T and mu = u."""

    model: HybridModel

    @property
    def noise(self) -> CommonNoise:
        return scalar_noise(1.0, "gaussian")

    def _attention(self, x: np.ndarray) -> np.ndarray:
        scaled_u, top = scaled_unnormalised_attention(x, self.model.beta)
        return scaled_u * np.exp(top)

    def _moments(self, x_hat: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, ...]:
        eps2 = self.model.eps**2
        xu = np.sum(x_hat * u, axis=-1, keepdims=True)
        return u, eps2 * xu * u, eps2 * xu**2, eps2 * np.sum(u * u, axis=-1, keepdims=True)

    def _noise(self, u: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return self.model.eps * np.asarray(dw)[:, None, None] * u


# the registry's examples of this model (``registry``): name -> a small instance
EXAMPLES = {"hybrid": lambda: HybridModel(4, beta=0.8, eps=1.3, law="gaussian")}
