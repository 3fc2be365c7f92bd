"""Every derivation with its checks (``catalogue``: model F's in ``model_f``, model A's in ``model_a``, the latent
diffusion model's in ``stopping``, the covariance limits of the shaped MLP and the ResNet in ``covariance`` and of the
shaped attention and transformer blocks in ``shaped_attention``, each a ``derivation`` record), the Monte Carlo
cross-check of each generator against a discrete layer written here from docs/models.md, with the models every
derivation covers (``crosscheck``) and ``reports/symbolic.{md,json}`` (``symbolic_report``).
"""

from __future__ import annotations

from .catalogue import ALL
from .covariance import (
    K_SE,
    SHAPING,
    kernel_by_conditioning,
    residual_network_covariance,
    shaped_mlp_covariance,
    simulated_one_step,
    simulated_resnet_step,
)
from .crosscheck import CHECKED, checked_system
from .shaped_attention import (
    BLOCK,
    ENTRIES,
    STATE,
    moment_gap,
    shaped_attention_covariance,
    shaped_transformer_covariance,
)
from .stopping import latent_diffusion
from .symbolic_report import write

__all__ = [
    "ALL",
    "BLOCK",
    "ENTRIES",
    "STATE",
    "moment_gap",
    "shaped_attention_covariance",
    "shaped_transformer_covariance",
    "K_SE",
    "SHAPING",
    "kernel_by_conditioning",
    "residual_network_covariance",
    "shaped_mlp_covariance",
    "simulated_one_step",
    "simulated_resnet_step",
    "CHECKED",
    "checked_system",
    "latent_diffusion",
    "write",
]
