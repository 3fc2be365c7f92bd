"""The calibration study's cases: each a public check on a layer map with its true claim and near misses (model F's
maps, the textbook library's exact and Euler steps, the registry's models, the Hugging Face blocks), and the seeds
each profile gives them."""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._checks import Outcome, check_law, check_local_consistency, check_strong_order, check_weak_limit, limit_sde
from .._experiments import DiffusionScaled, DriftScaled, width_near_misses
from .._experiments.width_near_misses import wishart
from .._models import (
    MODELS,
    CovarianceSDE,
    FedorovModel,
    ResidualBlock,
    TextbookProblem,
    covariance,
    covariance_limit,
    covariance_sde,
    derive_limit,
    hugging_face_layers,
    textbook_problems,
    width_block,
)
from .._paths import fixed_state

SEEDS = 10


SEEDS_PER_PROFILE = {"quick": (10, 5), "full": (100, 20)}  # textbook cases: seeds per true claim, per near miss


def overlap_squared(x: np.ndarray) -> np.ndarray:
    """f = <x_0, x_1>^2 of the first two tokens, per path."""
    return np.sum(x[:, 0] * x[:, 1], axis=-1) ** 2


Run = Callable[[object, object, int], Outcome]


Mutant = tuple[str, Callable[[object], object]]


def drift_mutant(factor: float) -> Mutant:
    return (f"drift x {factor:g}", lambda claim: DriftScaled(claim, factor))


def variance_mutant(factor: float) -> Mutant:
    return (f"noise variance x {factor:g}", lambda claim: DiffusionScaled(claim, float(np.sqrt(factor))))


@dataclass(frozen=True)
class Case:
    """One public check on one layer map, for the true claim at ``seeds`` seeds and each near miss at ``mutant_seeds``
    (the first of the same seeds); ``resolution_rows``: also the claim with its drift x (1 + m R_s) for each multiple m
    of ``calibration.RESOLUTION_MULTIPLES``, R_s the relative drift resolution the true claim's run states at seed s.
    ``must_decide`` False: the true claim's row counts false failures alone (``never_fails_true_claim``: depths that
    may be too shallow to decide it must still never fail it); ``pass_share``: a finding beside it, the share of
    seeds that pass against "at least 9 of 10"."""

    label: str
    layer: object
    claim: object
    run: Run
    mutants: tuple[Mutant, ...]
    options: dict = field(default_factory=dict)
    seeds: int = SEEDS
    mutant_seeds: int = SEEDS
    resolution_rows: bool = False
    must_decide: bool = True
    pass_share: bool = False


def _local(layer, claim, seed, **options) -> Outcome:
    return check_local_consistency(layer, claim, seed=seed, **options)


def _weak(layer, claim, seed, **options) -> Outcome:
    return check_weak_limit(layer, claim, overlap_squared, seed=seed, near_misses=(), **options)


def _strong(layer, claim, seed, start: np.ndarray | None = None, **options) -> Outcome:
    """The strong check; ``start``: a fixed initial state (tokens, d), kept as an array so the report can state it."""
    if start is not None:
        options["initial"] = fixed_state(start, unit=False)
    return check_strong_order(layer, claim, seed=seed, **options)


def _law(system, claim, seed, start: np.ndarray | None = None, **options) -> Outcome:
    """The law check; for a layer map from the fixed ``start`` (tokens, d), of the first token's x_0."""
    if start is not None:
        options |= {"initial": fixed_state(start, unit=False), "statistic": first_coordinate}
    return check_law(system, claim, seed=seed, **options)


def first_coordinate(x: np.ndarray) -> np.ndarray:
    """x_0 of the first token, per path."""
    return x[:, 0, 0]


def linear_step(z: np.ndarray, weights: dict) -> np.ndarray:
    """Z' = Z W / sqrt(n): given Z, V' is Wishart, E V' = V and n Cov(V') = V_ac V_bd + V_ad V_bc at every width."""
    return z @ weights["W"] / np.sqrt(z.shape[-1])


def linear_mean(z: np.ndarray, weights: dict) -> np.ndarray:
    """E_W[V' | Z] = V: the linear layer's exact conditional mean."""
    return covariance(z)


def wishart_sde(factor: float = 1.0) -> CovarianceSDE:
    """dV = 0 dt + Wishart noise, Cov(dV_ab, dV_cd) = factor (V_ac V_bd + V_ad V_bc) dt, for two inputs."""
    names = {0.0: "infinite-width ODE", 1.0: "Wishart"}
    return covariance_sde(
        np.zeros_like, lambda v: wishart(v, factor), 2, name=names.get(factor, f"Wishart x {factor:g}")
    )


def width_cases(profile: str) -> list[Case]:
    """The covariance checks on width-indexed blocks (h = 1/n): the ResNet with a ReLU 1/sqrt(depth) branch through
    the local check at its defaults (its near misses in ``width_near_misses``: depth ratio T x 1.1 and x 0.9, a linear
    branch, a Wishart diffusion); the linear layer (exact: Wishart at every width) through the local check at widths
    4, 8, 16 (Wishart x 1.2: at x 1.1, the check's 10% target, its power per run was 0.83) and the law check at widths
    4, 8, 16 (the infinite-width ODE; its true claim need not decide at 16,384 samples, it must never fail); the
    textbook linear SDE's exact step through the law check at its defaults (the Ito drift read as Stratonovich, the
    noise x 1.5; at 32,768 samples its true claim was undecided at 2 of 10 seeds). The quick profile: the ResNet's
    local check (10 seeds per near miss: 5 could not catch a 35% rate of misses)."""
    resnet = ResidualBlock(2, "relu")
    linear = width_block(
        linear_step, 2, lambda n: {"W": (n, n)}, rate=1.0, name="linear layer", mean_estimate=linear_mean
    )
    gbm = textbook_problems()["linear"]
    stratonovich = limit_sde(
        gbm.drift, gbm.diffusion, 1, 1, gbm.noise, name="Ito drift as Stratonovich", form="stratonovich"
    )
    structural = {name: (lambda _, wrong=wrong: wrong) for name, wrong in width_near_misses()["ResNet"].items()}
    gbm_law = Case(
        "law, linear exact step (depths 8, 16, 32)",
        gbm.exact_step(),
        textbook_claim(gbm, "ito"),
        _law,
        (("Ito drift as Stratonovich", lambda _: stratonovich), variance_mutant(2.25)),
        {"start": gbm.start},
    )
    resnet_case = Case(
        "local, width ResNet relu (defaults)",
        resnet,
        covariance_limit(resnet),
        _local,
        tuple(structural.items()),
    )
    if profile == "quick":
        return [resnet_case]
    return [
        resnet_case,
        gbm_law,
        Case(
            "local, width linear layer (4, 8, 16)",
            linear,
            wishart_sde(),
            _local,
            (("Wishart x 1.2", lambda _: wishart_sde(1.2)),),
            {"widths": (4, 8, 16), "budget": 262_144},
        ),
        Case(
            "law, width linear layer (4, 8, 16)",
            linear,
            wishart_sde(),
            _law,
            (("infinite-width ODE", lambda _: wishart_sde(0.0)),),
            {"levels": (4, 8, 16), "samples": 16_384, "reference_samples": 32_768, "target": 0.25},
            must_decide=False,
            pass_share=True,
        ),
    ]


def model_f_cases(profile: str) -> list[Case]:
    small, wide = FedorovModel(2, 4), FedorovModel(2, 4, sigma=0.5)
    quick = [
        Case("local, model F n=2 d=4", small, small.limit_sde(), _local, (drift_mutant(1.05), drift_mutant(1.01))),
        Case("weak limit, model F n=2 d=4 sigma=1/2", wide, wide.limit_sde(), _weak, (drift_mutant(1.05),)),
        Case(
            "strong, model F n=2 d=4, target 25%",
            small,
            small.limit_sde(),
            _strong,
            (drift_mutant(1.25),),
            {"depths": (8, 16, 32, 64), "first": 256, "budget": 2048, "target": 0.25},
        ),
    ]
    if profile == "quick":
        return quick
    default = FedorovModel(2, 16)
    return quick + [
        Case("local, model F n=2 d=16 (defaults)", default, default.limit_sde(), _local, (drift_mutant(1.05),)),
        Case("weak limit, model F n=2 d=16 (defaults)", default, default.limit_sde(), _weak, (drift_mutant(1.05),)),
        Case(
            "strong, model F n=2 d=16 (defaults, target 20%)",
            default,
            default.limit_sde(),
            _strong,
            (drift_mutant(1.2),),
        ),
    ]


def textbook_claim(problem: TextbookProblem, form: str):
    """The problem's Ito claim, or the same SDE in Stratonovich form (the checks then test its Ito form)."""
    drift = problem.drift if form == "ito" else problem.stratonovich_drift
    return limit_sde(drift, problem.diffusion, 1, problem.dim, problem.noise, name=problem.name, form=form)


# strong cases left out of the textbook library, with the reason (the study's docstring)
NO_STRONG_CASE = {("linear", "Euler"), ("linear", "exact"), ("stiff quadratic", "Euler")}


def textbook_cases(profile: str) -> list[Case]:
    seeds, mutant_seeds = SEEDS_PER_PROFILE[profile]
    problems = textbook_problems()
    names = list(problems) if profile == "full" else ["cubic", "additive", "Ornstein-Uhlenbeck"]
    forms = ("ito", "stratonovich") if profile == "full" else ("ito",)
    local_mutants = (drift_mutant(1.05), drift_mutant(0.95), variance_mutant(1.05))
    cases = []
    for name in names:
        problem = problems[name]
        for step in (problem.exact_step(), problem.euler_step()):
            for form in forms:
                cases.append(
                    Case(
                        f"local, {step.name}, {form}",
                        step,
                        textbook_claim(problem, form),
                        _local,
                        local_mutants,
                        {"states": {"start": problem.start}},
                        seeds,
                        mutant_seeds,
                        resolution_rows=True,
                    )
                )
    for name in names:
        problem = problems[name]
        for step in (problem.exact_step(), problem.euler_step()):
            if (name, step.kind) in NO_STRONG_CASE:
                continue
            cases.append(
                Case(
                    f"strong, {step.name}, ito",
                    step,
                    textbook_claim(problem, "ito"),
                    _strong,
                    (drift_mutant(1.3),),
                    {"start": problem.start},
                    seeds,
                    mutant_seeds,
                )
            )
    return cases


# the two ladders every registry model is judged at: the checks' defaults, and a short one they start from (and deepen,
# with the default max_depth, up to 64, as a user's call would)
REGISTRY_LADDERS = {"defaults": {}, "depths (4, 8, 16)": {"depths": (4, 8, 16)}}


def registry_cases(profile: str) -> list[Case]:
    """Every registry model with Brownian noise (the strong and weak limit checks drive the claim with the layer's own
    increments), its true limit through the strong and the weak limit check at each of ``REGISTRY_LADDERS``: never a
    fail; at the defaults, the share that passes beside it. The quick profile: one model at the short ladder."""
    seeds = SEEDS  # fewer could not catch a 35% rate of false failures
    chosen = MODELS if profile == "full" else {"agazzi gaussian field": MODELS["agazzi gaussian field"]}
    ladders = REGISTRY_LADDERS if profile == "full" else {"depths (4, 8, 16)": REGISTRY_LADDERS["depths (4, 8, 16)"]}
    result = []
    for name, make in chosen.items():
        model = make()
        if not model.noise.brownian:
            continue
        for ladder, options in ladders.items():
            for kind, run in (("strong", _strong), ("weak limit", _weak)):
                result.append(
                    Case(
                        f"{kind}, registry {name} ({ladder})",
                        model,
                        model.limit_sde(),
                        run,
                        (),
                        options,
                        seeds,
                        0,
                        must_decide=False,
                        pass_share=ladder == "defaults",
                    )
                )
    return result


def hugging_face_cases(profile: str) -> list[Case]:
    """The local check at its defaults on the three Hugging Face layers (``models.hugging_face``: Llama, GPT-2,
    GPT-NeoX) against the limit ``derive_limit`` computes by automatic differentiation: 10 seeds for the true claim
    and 10 for each near miss (drift x 1.05, x 0.95, noise variance x 1.05). Full profile only, and only where torch
    and transformers are installed (the hf extra; the report's params say which ran)."""
    if profile != "full" or not _hugging_face_available():
        return []
    mutants = (drift_mutant(1.05), drift_mutant(0.95), variance_mutant(1.05))
    with warnings.catch_warnings():  # Llama's and NeoX's float32 internals: stated in models.hugging_face
        warnings.simplefilter("ignore", UserWarning)
        layers = hugging_face_layers()
    return [
        Case(f"local, Hugging Face {layer.name} (defaults)", layer, derive_limit(layer), _local, mutants)
        for layer in layers.values()
    ]


def _hugging_face_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))


def cases(profile: str) -> list[Case]:
    return (
        model_f_cases(profile)
        + textbook_cases(profile)
        + registry_cases(profile)
        + width_cases(profile)
        + hugging_face_cases(profile)
    )
