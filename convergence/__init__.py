"""The numerical side: layer maps, limit-SDE integrators, Brownian paths, estimators, studies, reports."""

from .api import (
    ClaimedSDE,
    Outcome,
    UserLayerMap,
    check_local_consistency,
    check_same_weak_limit,
    check_strong_order,
    check_weak_order,
    field_noise,
    layer_map,
    limit_sde,
    per_token_noise,
)
from .fedorov import FedorovModel, FedorovSDE
from .hybrid import HybridModel, HybridSDE
from .integrators import EulerMaruyama
from .model import LayerMap, LimitSDE
from .noise import CommonNoise, matrix_noise, scalar_noise
from .quadratic_form import QuadraticFormModel
from .reduced import ReducedFedorov, ReducedFedorovSDE

__all__ = [
    "AgazziModel",
    "AgazziSDE",
    "ClaimedSDE",
    "CommonNoise",
    "EulerMaruyama",
    "FedorovModel",
    "FedorovSDE",
    "FreshFeatureField",
    "FrozenFeatureField",
    "GaussianField",
    "HybridModel",
    "HybridSDE",
    "LayerMap",
    "LimitSDE",
    "Outcome",
    "QuadraticFormModel",
    "ReducedFedorov",
    "ReducedFedorovSDE",
    "UserLayerMap",
    "check_same_weak_limit",
    "check_local_consistency",
    "check_strong_order",
    "check_weak_order",
    "field_noise",
    "layer_map",
    "limit_sde",
    "matrix_noise",
    "per_token_noise",
    "scalar_noise",
]

# Model A's modules import verify.kernels, which imports convergence.validation: load them on first use so
# that ``import verify`` and ``import convergence`` work in either order.
_LAZY = {"AgazziModel": "agazzi", "AgazziSDE": "agazzi", "FreshFeatureField": "mlp_field",
         "FrozenFeatureField": "mlp_field", "GaussianField": "mlp_field"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
