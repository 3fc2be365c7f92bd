"""The public checks of a user's layer map against a claimed limit (``public``): layer maps and claims given as numpy
callables, the local, strong and weak checks sampled in stages until they decide, and their ``Outcome``; and two
limits compared coefficient by coefficient (``limits``)."""

from __future__ import annotations

from .limits import compare_limits, diffusion_matrix
from .public import (
    ClaimedSDE,
    Outcome,
    UserLayerMap,
    check_local_consistency,
    check_same_weak_limit,
    check_strong_order,
    check_weak_limit,
    check_weak_order,
    field_noise,
    joint_noise,
    layer_map,
    limit_sde,
    matrix_noise,
    per_token_noise,
    scalar_noise,
    scaled_diffusion,
    scaled_drift,
    where_it_lives,
)

__all__ = [
    "ClaimedSDE",
    "Outcome",
    "UserLayerMap",
    "check_local_consistency",
    "compare_limits",
    "diffusion_matrix",
    "check_same_weak_limit",
    "check_strong_order",
    "check_weak_limit",
    "check_weak_order",
    "field_noise",
    "joint_noise",
    "layer_map",
    "limit_sde",
    "matrix_noise",
    "per_token_noise",
    "scalar_noise",
    "scaled_diffusion",
    "scaled_drift",
    "where_it_lives",
]
