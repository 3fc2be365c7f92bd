"""Numbers asserted as thresholds or signs, certified in ball arithmetic (``balls``): beta_c (``certified``), the
energy's decay rate (``synchronisation``) and the latent diffusion stopping problem (``latent_stopping``).
"""

from __future__ import annotations

from .balls import BALLS
from .certified import certify_critical_beta, critical_beta
from .latent_stopping import (
    FLOATS,
    STARTS,
    DerivativesByDimension,
    LatentSetting,
    certify_sign,
    coordinate_gain,
    distance,
    distance_derivative,
    ldm_distance,
    ldm_switching_times,
    monotone_criterion,
    optimal_dimension,
    optimal_stopping_time,
    plugin_criterion,
)
from .synchronisation import attention_energy_rate, certified_infimum, lambda_bar_prime

__all__ = [
    "BALLS",
    "FLOATS",
    "DerivativesByDimension",
    "LatentSetting",
    "STARTS",
    "attention_energy_rate",
    "certified_infimum",
    "certify_critical_beta",
    "certify_sign",
    "coordinate_gain",
    "critical_beta",
    "distance",
    "distance_derivative",
    "lambda_bar_prime",
    "ldm_distance",
    "ldm_switching_times",
    "monotone_criterion",
    "optimal_dimension",
    "optimal_stopping_time",
    "plugin_criterion",
]
