"""Integrators of a limit SDE, used as references computed another way than the layer map.

The reference is the Ito Euler-Maruyama scheme in the ambient space R^d, without projection:

    x_{k+1} = x_k + b(x_k) h + g(x_k) dW_k.

It uses the derived drift explicitly. Unlike a normalised step (whose normalisation already
creates the radial Ito term, docs/models.md section 6), it stays on the sphere only in the limit h -> 0,
and only if the radial drift is right: a wrong drift makes it converge to another process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._models import LimitSDE


def drift_and_diffusion(sde: LimitSDE, x: np.ndarray, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(b(x), g(x) dW)``, with one coefficient evaluation when the SDE offers it."""
    both = getattr(sde, "drift_and_diffusion", None)
    if both is not None:
        return both(x, dw)
    return sde.drift(x), sde.diffusion(x, dw)


@dataclass(frozen=True)
class EulerMaruyama:
    """Ito Euler-Maruyama step in R^d: strong order 1/2 (RMS) for multiplicative noise."""

    sde: LimitSDE

    @property
    def tokens(self) -> int:
        return self.sde.tokens

    @property
    def dim(self) -> int:
        return self.sde.dim

    @property
    def noise(self):
        """The noise law of the SDE's driving increments (what ``layer``'s ``dw`` is drawn from)."""
        return self.sde.noise

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        drift, noise = drift_and_diffusion(self.sde, x, dw)
        return x + h * drift + noise
