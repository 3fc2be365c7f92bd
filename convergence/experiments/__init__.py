"""Experiments, each for any model that provides what it needs: strong and weak convergence (``strong``,
``strong_low_rank``, ``weak``), local consistency (``local``), where two tokens end (``overlap_ends``), plausible wrong claims (``mutants``), two-point
exponents (``exponents``), the interaction energy (``energy``), propagation of chaos (``chaos``), the SPDE
(``mean_field``), commuting limits (``commute``), width (``width``, ``width_depth``) and the latent diffusion
sampler's nested runs and their checks (``latent_sampling``), and the certified checks of its stopping problem
(``stopping_certificates``).
"""

from __future__ import annotations

from .chaos import (
    CHECKS,
    ChaosData,
    ChaosDesign,
    analyse_chaos,
    baseline_variance,
    coupled_chaos,
    empirical_means,
    sliced_w2_squared,
    w2_squared,
)
from .commute import CommuteDesign, analyse_commute, commute_estimates, coupled_energies
from .energy import (
    ENERGY_TARGET,
    EnergyDesign,
    compare_with_bound,
    energy_bound_check,
    interaction_energy,
    record_energy,
)
from .exponents import (
    ExponentDesign,
    exponent_check,
    mean_square_exponent,
    median_exponent,
    record_log_distances,
)
from .latent_sampling import (
    LIMIT_TARGET,
    LatentDesign,
    backward_samples,
    exact_discrete_convergence,
    sampler_checks,
)
from .local import (
    SAMPLE_BLOCK,
    STATES,
    LocalDesign,
    layer_samples,
    local_checks,
    local_checks_for_claims,
    states_for,
)
from .mean_field import (
    MeanFieldDesign,
    agazzi_mean_field_drift,
    fedorov_mean_field_drift,
    weak_form,
    zonal_limit,
    zonal_rates,
)
from .mutants import DriftScaled, catalogue, miss_probability, pooled_check, rejection_row, true_claim_row
from .overlap_ends import (
    DELTA,
    antipodal_share_check,
    decided_ends,
    expectation_check,
    merge_probability_check,
    probability_check,
)
from .stopping_certificates import (
    capped_growth,
    criterion_search,
    criterion_sign,
    data_rng,
    iff_check,
    low_rank_optimum,
    monotone_checks,
    plugin_stops,
    switching_checks,
)
from .strong import (
    DRIFT_TARGET,
    REFERENCE_LEVELS,
    StrongData,
    StrongDesign,
    analyse_strong,
    bootstrap_generator,
    coupled_strong_errors,
    coupled_strong_errors_for_claims,
    strong_ladder,
)
from .strong_low_rank import (
    FedorovAction,
    FedorovEulerAction,
    coupled_strong_errors_low_rank,
    frame,
    run_low_rank_coupled,
)
from .weak import (
    WeakDesign,
    claim_limit_check,
    coupled_layer_and_claims,
    coupled_observables,
    limit_check,
    order_check,
    weak_order,
)
from .width import KernelMatrixNetwork, WidthDesign, analyse_width, coupled_width_errors
from .width_depth import (
    WidthDepthDesign,
    WidthGroups,
    analyse_width_depth,
    width_depth_energies,
)

__all__ = [
    "DELTA", "antipodal_share_check", "decided_ends", "expectation_check", "merge_probability_check",
    "probability_check",
    "CHECKS", "ChaosData", "ChaosDesign", "CommuteDesign", "DriftScaled", "EnergyDesign", "ExponentDesign",
    "FedorovAction", "FedorovEulerAction", "KernelMatrixNetwork", "LatentDesign", "LocalDesign", "MeanFieldDesign",
    "DRIFT_TARGET", "ENERGY_TARGET", "LIMIT_TARGET", "REFERENCE_LEVELS", "SAMPLE_BLOCK", "STATES", "StrongData", "StrongDesign", "WeakDesign", "WidthDepthDesign", "WidthDesign", "WidthGroups",
    "analyse_chaos", "analyse_commute", "analyse_strong", "analyse_width", "analyse_width_depth",
    "backward_samples", "baseline_variance", "bootstrap_generator", "catalogue", "commute_estimates",
    "compare_with_bound", "coupled_chaos", "coupled_energies", "coupled_observables", "coupled_strong_errors",
    "coupled_strong_errors_for_claims", "coupled_strong_errors_low_rank", "coupled_width_errors",
    "empirical_means", "energy_bound_check", "exponent_check", "frame", "interaction_energy", "limit_check",
    "layer_samples", "local_checks", "local_checks_for_claims", "mean_square_exponent", "median_exponent", "order_check",
    "record_energy", "record_log_distances", "run_low_rank_coupled", "sliced_w2_squared", "states_for",
    "strong_ladder", "w2_squared", "weak_form", "weak_order", "width_depth_energies", "zonal_limit", "zonal_rates",
    "capped_growth", "criterion_search", "criterion_sign", "data_rng", "exact_discrete_convergence", "iff_check",
    "low_rank_optimum", "monotone_checks", "plugin_stops", "sampler_checks", "switching_checks",
    "miss_probability", "pooled_check", "rejection_row", "true_claim_row", "claim_limit_check", "coupled_layer_and_claims", "agazzi_mean_field_drift", "fedorov_mean_field_drift",
]
