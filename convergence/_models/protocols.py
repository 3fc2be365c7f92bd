"""The interface every layer map and every limit SDE implements.

Estimators and studies only use these two protocols, so any layer map (ours or a user's) plugs
into the same machinery. Arrays are float64 shaped (paths, tokens, d); ``dw`` is one layer's noise
increment shaped (paths, *noise.shape), e.g. ``sqrt(h) V_k`` for model F.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from verify._models import SymbolicModel

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


# The conformance properties a registered model may be exempt from (``tests/test_conformance.py``), each with
# what it asks of the model: "pathwise", a limit SDE driven by the layer's own (Brownian) increments;
# "symbolic", ``claims.symbolic`` and ``symbolic_values()``: the layer written symbolically and its parameters;
# "permutation", a noise shared by the tokens (not one value per token), so that permuting the tokens permutes the
# layer; "rotation", ``rotate_noise(dw, q)``, the action of a rotation on the noise that makes the layer equivariant.
CONFORMANCE = ("pathwise", "symbolic", "permutation", "rotation")


def exemptions(**reasons: str | None) -> dict[str, str]:
    """The exemptions (property of ``CONFORMANCE`` -> reason) whose reason is not None."""
    unknown = set(reasons) - set(CONFORMANCE)
    if unknown:
        raise ValueError(f"exemptions must be among {CONFORMANCE}, got {sorted(unknown)}")
    return {name: reason for name, reason in reasons.items() if reason is not None}


def in_law_only(noise: CommonNoise) -> str | None:
    """The "pathwise" exemption's reason for a noise that is not Brownian (None when it is)."""
    return None if noise.brownian else f"{noise.law} entries: no Brownian coupling, the claims are in law only"


@dataclass(frozen=True)
class Claims:
    """What a model's source claims about it, which the suite checks (each model's docstring states the mathematics).

    ``limit``: the limit SDE in words (the model's ``limit_sde()`` builds it); ``noise_law``: the common noise of one
    layer; ``strong_order``: the RMS pathwise order in h of the layer map against its limit on one Brownian path
    (None: the claim is in law only); ``weak_order``: the order in h of smooth statistics; ``symbolic``: the layer
    written symbolically (a ``verify`` ``SymbolicModel``: the layer as normalised steps in the tokens' span and its
    noise, one of verify's own ``MODELS`` or the model module's) whose derived drift the limit's drift equals (None:
    no symbolic counterpart), at the values of verify's symbols that the model's ``symbolic_values()`` gives;
    ``exempt``: the conformance properties (``CONFORMANCE``) that do not apply to the model, each with its reason
    (``exemptions``).
    """

    limit: str
    noise_law: str
    strong_order: float | None
    weak_order: float | None
    symbolic: SymbolicModel | None
    exempt: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class ClaimingModel(LayerMap, Protocol):
    """A layer map that declares its claims and builds its limit SDE."""

    @property
    def claims(self) -> Claims: ...

    def limit_sde(self) -> LimitSDE: ...


class Wrapper:
    """Base of objects built around a model (its limit SDE, another sampler): same tokens and dim."""

    model: LayerMap

    @property
    def tokens(self) -> int:
        return self.model.tokens

    @property
    def dim(self) -> int:
        return self.model.dim
