"""The models of docs/models.md as normalised layer steps and their limit SDEs (``layer_steps``), a user's map expanded
(``user_maps``, by the order-h jets of ``jets``, evaluated in mpmath by ``evaluation``), model A's activations
(``activations``) and the latent diffusion model's variance ODEs and closed forms (``latent_variances``), and the
textbook SDEs with known solutions, each flow proved by Ito's formula (``textbook``); and the numerical pieces of the
width-indexed layers (``width_layers``).
"""

from __future__ import annotations

from .activations import activation
from .layer_steps import (
    MODELS,
    SymbolicModel,
    beta,
    eps,
    fedorov_system,
    hybrid_system,
    m,
    model_system,
    quadratic_form_system,
    v_sign,
)
from .textbook import TextbookSDE, flow_residuals, ornstein_uhlenbeck_moments, stratonovich_drift, textbook_sdes
from .user_maps import LimitComparison, StepLimit, check_limit, one_step_limit
from .width_layers import attention_first_order, frame_states, shaped_attention, shaped_relu

__all__ = [
    "attention_first_order",
    "frame_states",
    "shaped_attention",
    "shaped_relu",
    "LimitComparison",
    "MODELS",
    "StepLimit",
    "SymbolicModel",
    "TextbookSDE",
    "activation",
    "beta",
    "check_limit",
    "eps",
    "fedorov_system",
    "flow_residuals",
    "hybrid_system",
    "m",
    "model_system",
    "one_step_limit",
    "ornstein_uhlenbeck_moments",
    "quadratic_form_system",
    "stratonovich_drift",
    "textbook_sdes",
    "v_sign",
]
