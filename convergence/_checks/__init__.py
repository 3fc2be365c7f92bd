"""The public checks of a user's layer map against a claimed limit: what a user states, a layer map, its noise and the
claimed SDE as numpy callables (``claims``), and what every check refuses before any work (``arguments``); one module
per check kind, local (``local``; a width-indexed block's in ``covariance_local``), strong (``strong``), weak
(``weak``), two maps' laws (``law``), a statistic's law at T along a width or depth ladder
(``law_distance``) and two limits compared coefficient by coefficient (``limits``); the sampling in
stages they share (``staged``) and what they return (``outcome``)."""

from __future__ import annotations

from .._models import joint_noise, matrix_noise, scalar_noise
from .claims import (
    ClaimedSDE,
    UserLayerMap,
    field_noise,
    layer_map,
    limit_sde,
    per_token_noise,
    scaled_diffusion,
    scaled_drift,
)
from .covariance_local import COVARIANCE_STATES, check_covariance_local, named_state
from .law import check_same_weak_limit
from .law_distance import check_law
from .limits import compare_limits, diffusion_matrix
from .local import check_local_consistency, where_it_lives
from .outcome import Outcome
from .strong import check_strong_order
from .weak import check_weak_limit, check_weak_order

__all__ = [
    "COVARIANCE_STATES",
    "check_covariance_local",
    "named_state",
    "ClaimedSDE",
    "Outcome",
    "UserLayerMap",
    "check_local_consistency",
    "compare_limits",
    "diffusion_matrix",
    "check_same_weak_limit",
    "check_law",
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
