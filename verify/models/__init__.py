"""The models of docs/models.md as normalised layer steps and their limit SDEs (``layer_steps``), a user's map expanded
(``user_maps``), model A's activations (``activations``) and the latent diffusion model's variance ODEs and
closed forms (``latent_variances``).
"""

from __future__ import annotations

from .activations import activation
from .layer_steps import (
    MODELS,
    beta,
    eps,
    fedorov_system,
    hybrid_system,
    m,
    model_system,
    quadratic_form_system,
    v_sign,
)
from .user_maps import LimitComparison, StepLimit, check_limit, one_step_limit

__all__ = [
    "LimitComparison",
    "MODELS",
    "StepLimit",
    "activation",
    "beta",
    "check_limit",
    "eps",
    "fedorov_system",
    "hybrid_system",
    "m",
    "model_system",
    "one_step_limit",
    "quadratic_form_system",
    "v_sign",
]
