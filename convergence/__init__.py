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
from .models.agazzi import AgazziModel, AgazziSDE
from .models.fedorov import FedorovModel, FedorovSDE
from .models.fedorov_reduced import ReducedFedorov, ReducedFedorovSDE
from .models.hybrid import HybridModel, HybridSDE
from .models.mlp_field import FreshFeatureField, FrozenFeatureField, GaussianField
from .models.noise import CommonNoise, matrix_noise, scalar_noise
from .models.protocols import LayerMap, LimitSDE
from .models.quadratic_form import QuadraticFormModel
from .paths.integrators import EulerMaruyama

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
