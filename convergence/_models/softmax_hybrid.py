"""The hybrid model with model F's softmax attention: one scalar common noise per layer (docs/models.md section 1).

Layer map, step ``h``, one scalar common noise ``xi_k`` (mean 0, variance 1) per layer, ``dB_k = sqrt(h) xi_k``:

    a_i  = sum_j softmax_j(beta <x_i, x_j>) x_j                (Q^T K = I, as in model F)
    y_i  = x_i + (h + eps dB_k) a_i,    x_i' <- y_i / |y_i|

It is the hybrid model (``hybrid``) with the attention normalised: the noise is one scalar, not model F's value
matrix, so every token is pushed along its own attention average by the same amount. Limit SDE (Ito), from the
second-order expansion of N(x + delta) with ``delta = (h + eps dB) a`` and E dB^2 = h, as for the hybrid model:

    dx_i = eps P_{x_i} a_i dB + [P_{x_i} a_i + eps^2 (-<x_i,a_i> a_i - |a_i|^2 x_i / 2
                                 + (3/2) <x_i,a_i>^2 x_i)] dt,

B a scalar Brownian motion (time in units of the depth, t_k = k h).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verify._models import MODELS as SYMBOLIC

from .attention import attention_average, normalise
from .hybrid import HybridModel, HybridSDE
from .protocols import Claims, exemptions, in_law_only


@dataclass(frozen=True)
class SoftmaxHybridModel(HybridModel):
    """The softmax hybrid model's layer map (``dim`` d >= 2, ``beta``, ``eps`` >= 0, ``tokens`` n >= 1, ``law`` of
    xi_k); parameters are checked as the hybrid model's."""

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        """One layer ``N(x_i + (h + eps dB) a_i)``; ``dw`` = dB_k shaped (paths,)."""
        gain = (h + self.eps * np.asarray(dw, dtype=np.float64))[:, None, None]
        return normalise(x + gain * attention_average(x, self.beta))

    @property
    def claims(self) -> Claims:
        return Claims(
            limit="dx_i = eps P_{x_i} a_i dB + [P_{x_i} a_i + eps^2 (-<x_i,a_i> a_i - |a_i|^2 x_i / 2 "
            "+ (3/2) <x_i,a_i>^2 x_i)] dt, a_i the softmax average, B a scalar Brownian motion",
            noise_law=f"one {self.law} scalar xi_k of variance 1 per layer (dB = sqrt(h) xi_k)",
            strong_order=0.5 if self.law == "gaussian" else None,
            weak_order=1.0,
            symbolic=SYMBOLIC["softmax_hybrid"],
            exempt=exemptions(pathwise=in_law_only(self.noise)),
        )

    def limit_sde(self) -> SoftmaxHybridSDE:
        return SoftmaxHybridSDE(self)


@dataclass(frozen=True)
class SoftmaxHybridSDE(HybridSDE):
    """The Ito limit of the softmax hybrid model (module docstring): the hybrid model's, with a_i for u_i."""

    model: SoftmaxHybridModel

    def _attention(self, x: np.ndarray) -> np.ndarray:
        return attention_average(x, self.model.beta)


# the registry's examples of this model (``registry``): name -> a small instance
EXAMPLES = {"softmax hybrid": lambda: SoftmaxHybridModel(3, beta=1.5, eps=0.9, tokens=3, law="gaussian")}
