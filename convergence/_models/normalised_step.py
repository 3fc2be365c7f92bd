"""The Ito drift of a normalised layer step ``N(x + s xi + s^2 mu)``, evaluated on arrays.

The formula is not written here: ``verify._calculus.expansion.step_drift_coefficients`` derives it with sympy
(drift = c_mu mu + c_Sx S x + c_x x, coefficients in x^T S x, tr S and <x, mu>, with S = E[xi xi^T]),
and this module only compiles it for numpy. Off the sphere the drift is evaluated at x / |x|
(a 0-homogeneous extension), which makes the sphere attracting for an unprojected integrator.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from verify._calculus import TRS, XMU, XSX, step_drift_coefficients

from .._runtime import lambdified
from .attention import normalise, tangent_projection
from .protocols import Wrapper


@cache
def _compiled():
    return {name: lambdified((XSX, TRS, XMU), expr) for name, expr in step_drift_coefficients().items()}


def normalised_step_drift(
    x_hat: np.ndarray, mu: np.ndarray, s_x: np.ndarray, x_s_x: np.ndarray, tr_s: np.ndarray
) -> np.ndarray:
    """Token-wise drift for unit ``x_hat`` given ``mu``, ``S x_hat``, ``x_hat^T S x_hat`` and ``tr S``.

    Arrays are (paths, n, d) for vectors and (paths, n, 1) for scalars.
    """
    c = _compiled()
    x_mu = np.sum(x_hat * mu, axis=-1, keepdims=True)
    return c["mu"](x_s_x, tr_s, x_mu) * mu + c["Sx"](x_s_x, tr_s, x_mu) * s_x + c["x"](x_s_x, tr_s, x_mu) * x_hat


class NormalisedLayerLimit(Wrapper):
    """The Ito limit of a layer made of normalised steps ``N(x + s xi + s^2 mu)``, per token:

        dx = [drift derived in verify._calculus.expansion] dt + P_x (noise term),

    Subclasses hold ``model`` and give the attention vector, the step's moments (mu, S x, x^T S x,
    tr S at a unit x) and the noise term before projection; drift and diffusion follow here.
    """

    def _attention(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _moments(self, x_hat: np.ndarray, att: np.ndarray) -> tuple[np.ndarray, ...]:
        raise NotImplementedError

    def _noise(self, att: np.ndarray, dw: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _drift(self, x: np.ndarray, att: np.ndarray) -> np.ndarray:
        x_hat = normalise(x)
        return normalised_step_drift(x_hat, *self._moments(x_hat, att))

    def drift(self, x: np.ndarray) -> np.ndarray:
        return self._drift(x, self._attention(x))

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return tangent_projection(x, self._noise(self._attention(x), dw))

    def drift_and_diffusion(self, x: np.ndarray, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both coefficients with one attention evaluation (what an integrator needs per step)."""
        att = self._attention(x)
        return self.coefficients_from_action(x, att, self._noise(att, dw))

    def coefficients_from_action(
        self, x: np.ndarray, att: np.ndarray, applied: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(b(x), P_x applied)`` given the attention vector and the noise term before projection."""
        return self._drift(x, att), tangent_projection(x, applied)
