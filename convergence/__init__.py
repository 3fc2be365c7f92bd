"""The numerical side: layer maps, limit-SDE integrators, Brownian paths, estimators, studies, reports."""

from .agazzi import AgazziModel, AgazziSDE
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
from .mlp_field import FreshFeatureField, FrozenFeatureField, GaussianField
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
