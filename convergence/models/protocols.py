"""The interface every layer map and every limit SDE implements.

Estimators and studies only use these two protocols, so any layer map (ours or a user's) plugs
into the same machinery. Arrays are float64 shaped (paths, tokens, d); ``dw`` is one layer's noise
increment shaped (paths, *noise.shape), e.g. ``sqrt(h) V_k`` for model F.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from .noise import CommonNoise


@runtime_checkable
class LayerMap(Protocol):
    """A discrete layer: ``x_{k+1} = layer(x_k, dw_k, h)`` with ``dw_k`` drawn from ``noise``."""

    tokens: int
    dim: int

    @property
    def noise(self) -> CommonNoise: ...

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray: ...


@runtime_checkable
class LimitSDE(Protocol):
    """An Ito SDE ``dx = drift(x) dt + diffusion(x, dW)`` driven by the same noise as a layer map.

    ``diffusion(x, dw)`` is the product ``g(x) dW`` (linear in ``dw``).
    """

    tokens: int
    dim: int

    @property
    def noise(self) -> CommonNoise: ...

    def drift(self, x: np.ndarray) -> np.ndarray: ...

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray: ...


class Wrapper:
    """Base of objects built around a model (its limit SDE, another sampler): same tokens and dim."""

    model: LayerMap

    @property
    def tokens(self) -> int:
        return self.model.tokens

    @property
    def dim(self) -> int:
        return self.model.dim
