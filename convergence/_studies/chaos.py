"""Study ``chaos``: conditional propagation of chaos for many tokens, models A and F.

For each model, systems of N tokens (a ladder of N) driven by the same common noise (model F: the value
matrices; model A: the paper's MLP block with fresh features, width m) with independent i.i.d.
uniform initial tokens (``convergence._experiments.chaos``). Checks per model: ``chaos_rate`` for three smooth test
functions (mean-square order 1 in 1/N), ``chaos_limit`` (the difference vanishes), ``chaos_baseline``
(time 0: exact variances of the uniform law), ``w2_rate`` (W_2^2 between the two empirical measures
decays at least as fast as the theorem's bound r_d(N); the time-0 sampling rate is reported beside
it) and ``sznitman_rate`` (each token against its copy in a system of M tokens, order 1 in 1/N - 1/M).
Model A is what the theorem covers; for model F the paper claims nothing as N grows and the study
reports what it finds.
"""

from __future__ import annotations

from verify._analysis import KernelSpec

from .._experiments import (
    CHECKS,
    MEAN_FIELD_CHECKS,
    MEAN_FIELD_SECTIONS,
    ChaosDesign,
    MeanFieldSection,
    analyse_chaos,
    bootstrap_generator,
    coupled_chaos,
    mean_field_section,
)
from .._models import AgazziModel, FedorovModel, FreshFeatureField
from .._output import StudyResult, headline
from .._runtime import STREAM_KEYS, block_count
from .._statistics import FAMILY_ALPHA, family_confidence
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
    family = CHECKS * len(MODELS) + MEAN_FIELD_CHECKS
    confidence = family_confidence(family)
    for index, (name, model_for) in enumerate(MODELS.items()):
        key = (STUDY_KEY, index)
        data = coupled_chaos(model_for, design, seed, key, progress=advance)
        config_checks, config_panels = analyse_chaos(
            data, design, DIM, {"model": name, "d": DIM}, bootstrap_generator(seed, key), confidence
        )
        checks += config_checks
        panels += config_panels
    # the mean-field checks take their share of the study's 1%
    section = MEAN_FIELD_SECTIONS[profile]
    checks += mean_field_section(section, seed, STUDY_KEY, FAMILY_ALPHA * MEAN_FIELD_CHECKS / family)
    return StudyResult(
        study=NAME,
        profile=profile,
        seed=seed,
        params=_params(design, section),
        checks=checks,
        panels=panels,
        notes=_notes(family),
    )


def _params(design: ChaosDesign, section: MeanFieldSection) -> dict:
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
    zonal_design, weak_design = section.zonal, section.weak
    params["mean_field"] = {
        "tokens": section.tokens,
        "field": f"infinite-width Gaussian field ({section.activation})",
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
    return params


def _notes(family: int) -> list[str]:
    return [
        "Family-wise: every interval is at the Bonferroni level of the study's "
        f"{family} checks (false-failure rate {FAMILY_ALPHA:g} in all).",
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
