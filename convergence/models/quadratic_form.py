"""The random quadratic form (Engel-Shalova, MATH.md section 3): a calibration model with exact answers.

    dX = -P_X o dQ X on S^{d-1},   Q = (B + B^T) / sqrt(2),  B a d x d matrix of standard Brownian motions.

Layer map: the normalised Euler step x' = N(x - dQ x) with dQ = (dB + dB^T) / sqrt(2) over the step
(``verify.models.layer_steps.quadratic_form_layer``; ``verify`` shows its Ito drift on the sphere equals that of the
Stratonovich SDE). Tokens are rows, so dQ x_i is the row x_i dQ (dQ is symmetric).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verify.common.validation import check_int

from .attention import normalise
from .noise import CommonNoise, matrix_noise


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
