"""Study ``chaos``: conditional propagation of chaos for many tokens, models A and F.

For each model, systems of N tokens (a ladder of N) driven by the same common noise (model F: the value
matrices; model A: the paper's MLP block with fresh features, width m) with independent i.i.d.
uniform initial tokens (``convergence.experiments.chaos``). Checks per model: ``chaos_rate`` for three smooth test
functions (mean-square order 1 in 1/N), ``chaos_limit`` (the difference vanishes), ``chaos_baseline``
(time 0: exact variances of the uniform law), ``w2_rate`` (W_2^2 between the two empirical measures
decays at least as fast as the theorem's bound r_d(N); the time-0 sampling rate is reported beside
it) and ``sznitman_rate`` (each token against its copy in a system of M tokens, order 1 in 1/N - 1/M).
Model A is what the theorem covers; for model F the paper claims nothing as N grows and the study
reports what it finds.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from verify.analysis import KernelSpec

from ..experiments import (
    CHECKS,
    ChaosDesign,
    MeanFieldDesign,
    agazzi_mean_field_drift,
    analyse_chaos,
    bootstrap_generator,
    coupled_chaos,
    fedorov_mean_field_drift,
    weak_form,
    zonal_limit,
)
from ..models import (
    AgazziModel,
    FedorovModel,
    FreshFeatureField,
    GaussianField,
)
from ..output import StudyResult, headline
from ..paths import RecordGrid
from ..runtime import STREAM_KEYS, block_count
from ..statistics import FAMILY_ALPHA, family_confidence
from .base import ProgressFactory, Study

NAME = "chaos"
STUDY_KEY = STREAM_KEYS[NAME]
DIM, BETA, WIDTH, ACTIVATION = 5, 1.0, 64, "relu"

DESIGNS = {
    "quick": ChaosDesign(
        tokens=(16, 32, 64, 128, 256), large=1024, depth=16, horizon=1.0, paths=192, sampler_target=0.5
    ),
    "full": ChaosDesign(
        tokens=(16, 32, 64, 128, 256, 512, 1024), large=2048, depth=16, horizon=1.0, paths=256, order_target=0.45
    ),
}

MEAN_FIELD_TOKENS = 16
MEAN_FIELD = {  # (zonal: no attention, T = 4; weak form: with attention, T = 1)
    "quick": (
        MeanFieldDesign(RecordGrid(horizon=4.0, steps=32, records=16, paths=8192), target=0.2),
        MeanFieldDesign(RecordGrid(horizon=1.0, steps=32, records=16, paths=4096), target=0.2),
    ),
    "full": (
        MeanFieldDesign(RecordGrid(horizon=4.0, steps=32, records=16, paths=32768), target=0.05),
        MeanFieldDesign(RecordGrid(horizon=1.0, steps=32, records=16, paths=49152), target=0.05),
    ),
}
MEAN_FIELD_CHECKS = 4  # zonal phi_1 (phi_2 is a finding), weak form of A and of F, and phi_2


def model_a_field(tokens: int) -> GaussianField:
    """The infinite-width field of model A's mean-field checks (the SPDE's noise)."""
    return GaussianField(KernelSpec(ACTIVATION, DIM), tokens)


def mean_field_section(profile: str, seed: int, near_misses: bool = False, family_alpha: float | None = None) -> list:
    """The empirical measure against the SPDE (``convergence.experiments.mean_field``): zonal limit without attention
    (model A), weak form with attention (models A and F). ``near_misses`` adds wrong mean-field drifts and rates judged
    on the same data (for the power study); their checks are findings."""
    zonal_design, weak_design = MEAN_FIELD[profile]
    family = MEAN_FIELD_CHECKS + (7 if near_misses else 0)  # the near misses: 2 zonal, 4 + 1 weak form
    # in the chaos study these checks take their share of the study's 1% (see execute)
    alpha = {
        "family_alpha": FAMILY_ALPHA * MEAN_FIELD_CHECKS / (CHECKS * len(MODELS) + MEAN_FIELD_CHECKS)
        if family_alpha is None
        else family_alpha
    }
    field = model_a_field(MEAN_FIELD_TOKENS)
    k1 = field.kernel.k1
    silent = AgazziModel(MEAN_FIELD_TOKENS, field, BETA, 0.0)
    wrong = {}
    if near_misses:
        for label, factor in (("k(1) x 1.05", 1.05), ("(d-2)/(d-1) in lambda", (DIM - 2) / (DIM - 1))):
            wrong[label] = np.array([factor * r for r in (k1 * (DIM - 1) / 2, k1 * 2 * DIM / 2)])
    zonal = zonal_limit(
        silent, k1, zonal_design, seed, (STUDY_KEY, 10), {"model": "A", "attention": "none"}, family, wrong, **alpha
    )
    checks = zonal[:2]
    checks[1] = replace(
        checks[1], claim=False, note=checks[1].note + " (a finding: phi_2 resolves the rate less sharply than phi_1)"
    )
    checks += [replace(c, claim=False) for c in zonal[2::2]]  # each near miss's phi_1 check
    model_a = AgazziModel(MEAN_FIELD_TOKENS, field, BETA, 1.0)
    drifts = {"true": agazzi_mean_field_drift(model_a, k1)}
    if near_misses:
        drifts |= {
            "attention v x 0.95": agazzi_mean_field_drift(model_a, k1, v_factor=0.95),
            "attention v x 0.8": agazzi_mean_field_drift(model_a, k1, v_factor=0.8),
            "beta x 1.2": agazzi_mean_field_drift(model_a, k1, beta_factor=1.2),
            "Ito factor (d-2)/2": agazzi_mean_field_drift(model_a, k1, ito=(DIM - 2) / 2),
        }
    found = weak_form(model_a, drifts, weak_design, seed, (STUDY_KEY, 11), {"model": "A"}, family, **alpha)
    checks += [found[0]] + [replace(c, claim=False) for c in found[1:]]
    model_f = FedorovModel(MEAN_FIELD_TOKENS, DIM, BETA)
    drifts = {"true": fedorov_mean_field_drift(model_f)}
    if near_misses:
        drifts["Ito factor (d-2)/2"] = fedorov_mean_field_drift(model_f, ito=(DIM - 2) / 2)
    found = weak_form(model_f, drifts, weak_design, seed, (STUDY_KEY, 12), {"model": "F"}, family, **alpha)
    return checks + [found[0]] + [replace(c, claim=False) for c in found[1:]]


MODELS = {
    "A": lambda n: AgazziModel(n, FreshFeatureField(KernelSpec(ACTIVATION, DIM), WIDTH), BETA, 1.0),
    "F": lambda n: FedorovModel(n, DIM, BETA),
}


def execute(profile: str, seed: int, progress: ProgressFactory) -> StudyResult:
    design = DESIGNS[profile]
    blocks = block_count(design.paths, design.block_paths)
    advance = progress(len(MODELS) * blocks * design.depth, NAME)
    checks, panels = [], []
    # one family: the chaos checks of both models and the mean-field checks share the study's 1%
    confidence = family_confidence(CHECKS * len(MODELS) + MEAN_FIELD_CHECKS)
    for index, (name, model_for) in enumerate(MODELS.items()):
        key = (STUDY_KEY, index)
        data = coupled_chaos(model_for, design, seed, key, progress=advance)
        config_checks, config_panels = analyse_chaos(
            data, design, DIM, {"model": name, "d": DIM}, bootstrap_generator(seed, key), confidence
        )
        checks += config_checks
        panels += config_panels
    checks += mean_field_section(profile, seed)
    params = {
        "models": {
            "A": f"attention (Q^T K = beta I, V = I) + {ACTIVATION} MLP block of width {WIDTH}, fresh "
            "features every layer, no biases",
            "F": "softmax attention (Q^T K = I) with Gaussian value matrices, sigma^2 = 1/d",
        },
        "d": DIM,
        "beta": BETA,
        "tokens": list(design.tokens),
        "large_system": design.large,
        "depth": design.depth,
        "horizon": design.horizon,
        "paths": design.paths,
        "exact_assignment_up_to": design.assignment_max,
        "sliced_directions": design.slices,
        "test_functions": ["x_0", "x_0 x_1", "x_0^2"],
    }
    zonal_design, weak_design = MEAN_FIELD[profile]
    params["mean_field"] = {
        "tokens": MEAN_FIELD_TOKENS,
        "field": f"infinite-width Gaussian field ({ACTIVATION})",
        "initial": "i.i.d. on a cap around e (normalise(e + 0.7 z))",
        "zonal": {
            "horizon": zonal_design.grid.horizon,
            "steps": zonal_design.grid.steps,
            "paths": zonal_design.grid.paths,
        },
        "weak_form": {
            "horizon": weak_design.grid.horizon,
            "steps": weak_design.grid.steps,
            "paths": weak_design.grid.paths,
        },
        "target": zonal_design.target,
    }
    notes = [
        "Family-wise: every interval is at the Bonferroni level of the study's "
        f"{CHECKS * len(MODELS) + MEAN_FIELD_CHECKS} checks (false-failure rate {FAMILY_ALPHA:g} in all).",
        "chaos_rate, chaos_limit, w2_rate and sznitman_rate compare systems built by the same code on the same noise: "
        "they test the rate. The limit is tested against the SPDE itself: zonal_limit (no attention: the one-particle "
        "law is a spherical Brownian motion at rate k(1), exact zonal targets) and weak_form (with attention: "
        "E<mu_T, f> - <mu_0, f> = int E<mu_t, <e, b>> dt for the claimed mean-field drift b), both Richardson over "
        "h and 2h (convergence/mean_field.py). A wrong mean-field drift fails them (study power).",
        "sampler_baseline checks the initial sampler at time 0 (exact variances of the uniform law): a calibration.",
        "Orders are mean-square orders in 1/N (2 x the fitted RMS order), with bootstrap intervals over paths.",
        "The theorem's W_2 bound r_d(N) is an upper bound; the true sampling rate on the sphere can be faster, so "
        "w2_rate only fails when W_2^2 decays more slowly than r_d(N).",
        "W_2 between an empirical measure and its law decays at the sampling rate, not the chaos rate: the chaos "
        "rate is read from smooth test functions and from the Sznitman coupling, where both systems share the noise.",
    ]
    return StudyResult(study=NAME, profile=profile, seed=seed, params=params, checks=checks, panels=panels, notes=notes)


STUDY = Study(
    NAME,
    "many tokens: conditional propagation of chaos (test functions, W2, Sznitman) for models A and F",
    execute,
    headlines=(
        headline("chaos_rate", phi="x_0"),
        headline("sznitman_rate"),
        headline("zonal_limit_phi1"),
        headline("weak_form"),
    ),
)
