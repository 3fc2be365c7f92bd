"""The random quadratic form (Engel-Shalova, docs/models.md section 3): a calibration model with exact answers.

    dX = -P_X o dQ X on S^{d-1},   Q = (B + B^T) / sqrt(2),  B a d x d matrix of standard Brownian motions.

Layer map: the normalised Euler step x' = N(x - dQ x) with dQ = (dB + dB^T) / sqrt(2) over the step
(``verify._models.layer_steps.quadratic_form_layer``; ``verify`` shows its Ito drift on the sphere equals that of the
Stratonovich SDE). Tokens are rows, so dQ x_i is the row x_i dQ (dQ is symmetric).

Limit SDE (Ito): the normalised step's drift (``normalised_step``) with mu = 0 and S = E[(dQ x)(dQ x)^T] / h
= |x|^2 I + x x^T (E[Q_ij Q_kl] = delta_ik delta_jl + delta_il delta_jk per unit time), so at a unit x: S x = 2 x,
x^T S x = 2, tr S = d + 1; noise term -P_x dQ x.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verify._common import check_int
from verify._models import MODELS as SYMBOLIC

from .attention import normalise
from .noise import CommonNoise, matrix_noise
from .normalised_step import NormalisedLayerLimit
from .protocols import Claims


@dataclass(frozen=True)
class QuadraticFormModel:
    """n tokens driven by one symmetric matrix noise; the noise array is dB (d x d, N(0, h) entries)."""

    tokens: int
    dim: int

    def __post_init__(self) -> None:
        check_int("tokens", self.tokens, minimum=1)
        check_int("dim", self.dim, minimum=2)

    @property
    def noise(self) -> CommonNoise:
        return matrix_noise(self.dim, 1.0)

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        dq = (dw + np.swapaxes(dw, -1, -2)) / np.sqrt(2.0)
        return normalise(x - x @ dq)

    @property
    def claims(self) -> Claims:
        return Claims(
            limit="dX = -P_X o dQ X (Stratonovich), Q = (B + B^T)/sqrt(2); Ito drift of the normalised Euler step",
            noise_law="a d x d matrix dB of independent N(0, h) entries, dQ = (dB + dB^T)/sqrt(2)",
            strong_order=0.5,
            weak_order=1.0,
            symbolic=SYMBOLIC["quadratic_form"],
        )

    def symbolic_values(self) -> dict[str, float]:
        """The value of verify's random quadratic form symbol: d."""
        return {"d": float(self.dim)}

    def rotate_noise(self, dw: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The noise that makes the layer equivariant under the rotation ``q`` (tokens x -> x q^T): q dB q^T."""
        return q @ dw @ np.swapaxes(q, -1, -2)

    def limit_sde(self) -> QuadraticFormSDE:
        return QuadraticFormSDE(self)


@dataclass(frozen=True)
class QuadraticFormSDE(NormalisedLayerLimit):
    """``dX = -P_X dQ X + b(X) dt`` with b the normalised step's Ito drift (module docstring)."""

    model: QuadraticFormModel

    @property
    def noise(self) -> CommonNoise:
        return self.model.noise

    def _attention(self, x: np.ndarray) -> np.ndarray:
        return x  # the noise acts on the token itself

    def _moments(self, x_hat: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, ...]:
        one = np.ones(x_hat.shape[:-1] + (1,))
        return np.zeros_like(x_hat), 2.0 * x_hat, 2.0 * one, (self.dim + 1.0) * one

    def _noise(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return -(x @ ((dw + np.swapaxes(dw, -1, -2)) / np.sqrt(2.0)))


# the registry's examples of this model (``registry``): name -> a small instance
EXAMPLES = {"quadratic_form": lambda: QuadraticFormModel(2, 4)}
