"""The registry of models: every layer map the suite ships that declares its claims, as a small example instance.

The conformance tests run over this registry (``tests/test_conformance.py``): protocol, noise and output shapes,
sphere invariance, permutation equivariance, the limit's drift against the one ``verify`` derives (through
``symbolic_values``) and local consistency. A new model is checked by adding it here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from verify.analysis import KernelSpec

from .agazzi import AgazziModel
from .fedorov import FedorovModel
from .hybrid import HybridModel
from .mlp_field import FrozenFeatureField, GaussianField
from .protocols import ClaimingModel
from .quadratic_form import QuadraticFormModel

FEATURE_SEED = 20261201

MODELS: dict[str, Callable[[], ClaimingModel]] = {
    "fedorov": lambda: FedorovModel(2, 4, beta=0.8, sigma=0.9, mean_value=0.4 * np.eye(4)),
    "fedorov rademacher": lambda: FedorovModel(3, 5, beta=1.2, law="rademacher"),
    "hybrid": lambda: HybridModel(4, beta=0.8, eps=1.3, law="gaussian"),
    "agazzi gaussian field": lambda: AgazziModel(2, GaussianField(KernelSpec("relu", 4), 2), beta=0.8, v=1.0),
    "agazzi frozen features": lambda: AgazziModel(
        3, FrozenFeatureField.draw(KernelSpec("tanh", 4), 16, np.random.default_rng(FEATURE_SEED)), beta=0.8, v=-1.0
    ),
    "quadratic_form": lambda: QuadraticFormModel(2, 4),
}


def _conjugate(dw: np.ndarray, q: np.ndarray) -> np.ndarray:
    return q @ dw @ q.T


# How a rotation Q of the tokens (x -> x Q^T, tokens as rows) acts on each model's noise so that the layer is
# equivariant: layer(x Q^T, R(dw, Q), h) = layer(x, dw, h) Q^T. Frozen features (one fixed U) have no such action.
ROTATE_NOISE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "fedorov": _conjugate,  # M = m I commutes with Q
    "fedorov rademacher": _conjugate,
    "hybrid": lambda dw, q: dw,  # one scalar per layer
    "agazzi gaussian field": lambda dw, q: dw @ q.T,  # the field's increments are rows in R^d, covariance k(<x, y>) I
    "quadratic_form": _conjugate,
}


def symbolic_values(model: ClaimingModel) -> dict[str, float]:
    """The values of ``verify``'s symbols (by name) for ``model``: d and the model's own parameters."""
    values = {"d": float(model.dim)}
    if isinstance(model, FedorovModel):
        mean = 0.0 if model.mean_value is None else float(model.mean_value[0, 0])
        if model.mean_value is not None and not np.array_equal(model.mean_value, mean * np.eye(model.dim)):
            raise ValueError("verify's model F has M = m I: the mean value must be a multiple of the identity")
        values |= {"beta": model.beta, "sigma": float(model.sigma), "m": mean}
    elif isinstance(model, HybridModel):
        values |= {"beta": model.beta, "epsilon": model.eps}
    elif isinstance(model, AgazziModel):
        values |= {"beta": model.beta, "v": model.v}
    return values
