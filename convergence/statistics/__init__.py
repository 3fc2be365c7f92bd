"""Statistics: strong errors, fitted orders and slopes, bootstrap intervals, resolutions, verdicts (``estimators``),
sampling in stages until a check decides (``sequential``) and the Frechet distance of samples (``frechet``).
"""

from __future__ import annotations

from .estimators import (
    ADVICE_MARGIN,
    CONFIDENCE,
    DETECTION_POWER,
    FAIL,
    FAMILY_ALPHA,
    INCONCLUSIVE,
    PASS,
    Check,
    OrderFit,
    Verdict,
    all_finite,
    asymptotic_start,
    bootstrap_counts,
    bootstrap_interval,
    bootstrap_means,
    bootstrap_medians,
    combine_verdicts,
    confidence_label,
    confidence_z,
    detectable_effect,
    effect_verdict,
    excess_resolution,
    family_confidence,
    first_nonfinite,
    fit_order,
    json_safe,
    least_squares_line,
    least_squares_slope,
    limit_plateau,
    limit_verdict,
    log_log_slope,
    noise_floor_flags,
    order_verdict,
    paths_for_effect,
    paths_to_resolve,
    percentile_interval,
    plateau,
    pre_asymptotic_flags,
    samples_to_decide,
    wilson,
    z_confidence,
    z_value,
)
from .frechet import frechet_estimate, frechet_estimates
from .sequential import Looks, decide_in_stages, stopping_verdict

__all__ = [
    "ADVICE_MARGIN", "CONFIDENCE", "Check", "DETECTION_POWER", "FAIL", "FAMILY_ALPHA", "INCONCLUSIVE", "Looks", "OrderFit", "PASS",
    "Verdict", "all_finite", "asymptotic_start", "bootstrap_counts", "bootstrap_interval", "bootstrap_means",
    "bootstrap_medians", "combine_verdicts", "confidence_label", "confidence_z", "decide_in_stages", "detectable_effect",
    "effect_verdict", "excess_resolution", "family_confidence", "first_nonfinite", "fit_order", "frechet_estimate", "frechet_estimates", "json_safe",
    "least_squares_line", "least_squares_slope", "limit_plateau", "limit_verdict", "log_log_slope",
    "noise_floor_flags", "order_verdict", "paths_for_effect", "paths_to_resolve", "percentile_interval", "plateau",
    "pre_asymptotic_flags", "samples_to_decide", "stopping_verdict", "wilson", "z_confidence", "z_value",
]
