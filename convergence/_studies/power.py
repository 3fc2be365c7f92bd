"""Study ``power``: the suite's checks against a catalogue of plausible wrong claims
(``convergence._experiments.mutants``; the rows beyond the local and strong ones in
``convergence._experiments.mutant_rows``).

A pass is worth the power to tell a right claim from a nearly right one. For each model the true claim and its
mutants (drift x (1 +- eps), sigma^2 x (1 + eps), beta x (1 + eps), the Ito factor (d-2)/2, the Stratonovich
drift, no tangent projection; model A: its Ito term's kernel constant k(1) x (1 + eps)) go through the *same*
checks that judge the true claims:

  local    ``convergence._experiments.local`` at the uniform, merged, antipodal and near-merged states (every mutant,
           every eps of the profile), as the public check runs it: the layer's own control variates and the
           allowances that bound rounding and the Richardson remainder (``LOCAL``); model F (n = 2 and 8, d = 16)
           and model A (frozen tanh features, repulsive attention, d = 8; infinite-width ReLU field, attractive,
           d = 5).
  strong   ``convergence._experiments.strong`` (layer map against an Euler-Maruyama run of the claim on one Brownian
           path, plateau at the claimed rate) for model F, n = 2, d = 16, the issue's near miss (d-2)/2 included.
  mean-field  the chaos study's SPDE checks (``convergence._experiments.mean_field``): zonal limit with a wrong rate
           (k(1) 5% off, (d-2) for (d-1)), weak form with a wrong mean-field drift (attention 5% and 20% off,
           beta 20% off, the Ito factor (d-2)/2), judged on the same recorded data as the true claim.
  weak     weak-fedorov's weak_limit (the discrete overlap of model F, d = 4, against the backward Kolmogorov
           equation) for the overlap SDE with its diffusion coefficient x (1 +- eps) and d - 1 for d - 2 in its drift.
  phase    phase-transition's p_antipodal (two tokens, d = 4, beta = 1.25 beta_c) against the scale function of the
           overlap diffusion with its coefficient x (1 +- eps), beta x (1 +- eps), or d - 1 for d.
  latent   ldm-stopping's exact_discrete_convergence for the closed form with e^{-t} off by eps (exact algebra).
  width    the proportional limit's covariance SDEs (``convergence._experiments.width_near_misses``: joint-limits'
           shaped MLP, ResNet and shaped attention) through the local check at h = 1/n, widths 32, 64, 128, on one
           set of samples per model (196,608 a width at the full profile: at 131,072 the shaped MLP's true claim
           stated a resolution 1.02 times its target at this study's family level): each true claim, and its near
           misses (a shaping, depth ratio, temperature or gain 10% off, the diffusion scaled or without the skip's
           cross term, a linear branch, a Wishart diffusion,
           the infinite-width ODE). The width check's own target (10% full, 20% quick) is its effect size: a near
           miss is a claim when it moves one of its checks by at least 1.25 times that check's resolution (both in
           the near miss's own units, ``check_effects``), else a finding that says so.

Study checks: ``true_claim`` (the true claim passes) and ``rejects`` (the mutant fails) for every mutant with
eps >= the profile's target effect (5% full, 7.5% quick) or structural; smaller effects are findings (reported,
outside the verdict). A ``true_claim`` check fails falsely when its inner checks do: they share 1% (Bonferroni). A
``rejects`` check fails by chance when the check misses a mutant it could see: each row with a pooled drift check
states that chance, estimated at the measured effect (``mutants.miss_probability``: about 10% at the resolution,
negligible well beyond it), and it is added to the study's family-wise rate. Each row also states the check's
resolution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from verify._analysis import KernelSpec

from .._experiments import (
    DRIFT_TARGET,
    MEAN_FIELD_SECTIONS,
    PHASE_DESIGNS,
    WIDTH_MODELS,
    LocalDesign,
    MeanFieldSection,
    PhaseDesign,
    StrongDesign,
    WeakDesign,
    analyse_strong,
    bootstrap_generator,
    catalogue,
    check_effects,
    coupled_strong_errors_for_claims,
    latent_rows,
    local_checks_for_claims,
    mean_field_rows,
    phase_rows,
    pooled_check,
    rejection_row,
    states_for,
    true_claim_row,
    weak_rows,
    width_judgements,
    width_near_misses,
)
from .._models import AgazziModel, FedorovModel, FrozenFeatureField, GaussianField, covariance_limit
from .._output import Curve, Plot, StudyResult
from .._runtime import STREAM_KEYS, random_stream
from .._statistics import FAMILY_ALPHA, Check
from .base import ProgressFactory, Study

NAME = "power"
STUDY_KEY = STREAM_KEYS[NAME]
STATES = ("uniform", "merged", "antipodal", "near merged")
WIDTH_MARGIN = 1.25  # a width near miss is a claim when it moves one of the checks by this many of its resolutions


@dataclass(frozen=True)
class PowerProfile:
    local_eps: tuple[float, ...]
    strong_eps: tuple[float, ...]
    target: float
    local: LocalDesign
    strong: StrongDesign
    tokens_f: tuple[int, ...]
    # the shared designs whose checks judge near misses: the chaos study's mean-field section (and its recorded
    # data), the weak limit of model F's overlap, and the phase experiment's steps and horizon
    mean_field: MeanFieldSection
    weak: WeakDesign
    phase: PhaseDesign
    phase_paths: int
    width: tuple[int, float]  # the width rows' samples a width and target (joint-limits' local checks)


# The local rows: the layer's own control variates (its antithetic steps and its first- and second-order noise response,
# ``local_draws``) and the public check's allowances (``LocalDesign.for_users``). At 4096 samples every true claim's
# largest resolution / target is at most 0.03 (seeds 0 and 1; 0.55-0.91 with the claim's control at 65536), and the
# pooled drift resolution about 1e-4 rejects every 1% mutant.
LOCAL = LocalDesign(samples=4096, control="layer", for_users=True)

# Paths a block of the strong rows: their Euler-Maruyama references take 16 small steps per layer of the deepest map
# (2048 quick, 4096 full), call-bound at 128 paths (quick profile: 88 -> 80 CPU s at 512, same numbers; 1024: no gain)
STRONG_BLOCK = 512

PROFILES = {
    "quick": PowerProfile(
        local_eps=(0.01, 0.075, 0.2),
        strong_eps=(0.2,),
        target=0.075,  # 1.5 times the full profile's
        local=replace(LOCAL, samples=2048),
        # 512 paths: same_limit sees a drift error of about 8.5% (seeds 0 and 1), the 20% mutants' chance of a miss
        # below 1e-38; the true claim's largest resolution / target 0.6 (0.54 at 1024)
        strong=StrongDesign(depths=(8, 16, 32, 64, 128), paths=512, block_paths=STRONG_BLOCK, target=DRIFT_TARGET),
        tokens_f=(2,),
        mean_field=MEAN_FIELD_SECTIONS["quick"],
        # with weak-fedorov's control variate 5000 paths: the true claim's largest resolution / target 0.24
        weak=WeakDesign(depths=(8, 16, 32, 64), horizon=2.0, paths=5000, block_paths=5000),
        phase=PHASE_DESIGNS["quick"],
        phase_paths=2000,
        width=(32_768, 0.2),
    ),
    "full": PowerProfile(
        local_eps=(0.01, 0.05, 0.2),
        strong_eps=(0.05,),
        target=0.05,
        local=LOCAL,
        strong=StrongDesign(
            depths=(8, 16, 32, 64, 128, 256), paths=2048, block_paths=STRONG_BLOCK, target=DRIFT_TARGET
        ),
        tokens_f=(2, 8),
        mean_field=MEAN_FIELD_SECTIONS["full"],
        # with weak-fedorov's control variate 12k paths: the true claim's largest resolution / target 0.18, as
        # 200k paths without it (0.095 with it)
        weak=WeakDesign(depths=(8, 16, 32, 64), horizon=2.0, paths=12_000, block_paths=6000),
        phase=PHASE_DESIGNS["full"],
        phase_paths=8000,
        width=(196_608, 0.1),
    ),
}


def local_models(seed: int, tokens_f: tuple[int, ...]) -> dict[str, object]:
    """The layer maps whose claims the local check is tried on."""
    models: dict[str, object] = {f"F n={n} d=16": FedorovModel(n, 16) for n in tokens_f}
    rng = random_stream(seed, (STUDY_KEY, 99, 0))
    models["A tanh frozen m=32 d=8 repulsive"] = AgazziModel(
        4, FrozenFeatureField.draw(KernelSpec("tanh", 8, 0.0, 0.0), 32, rng), 1.0, -1.0
    )
    models["A relu Gaussian field d=5 attractive"] = AgazziModel(
        4, GaussianField(KernelSpec("relu", 5, 0.0, 0.0), 4), 1.0, 1.0
    )
    return models


def execute(profile: str, seed: int, progress: ProgressFactory) -> StudyResult:
    settings = PROFILES[profile]
    models = local_models(seed, settings.tokens_f)
    # the true-claim checks share the study's 1% (each inner check family gets 1% / count); rejects rows add their
    # estimated chances of a miss
    # local models; strong, mean-field, weak, phase, the width blocks (latent: exact)
    true_alpha = FAMILY_ALPHA / (len(models) + 5)
    advance = progress(len(models) + 1, NAME)
    checks, calibration = local_rows(models, settings, seed, true_alpha, advance)
    checks += strong_rows(settings, seed, 1 - true_alpha / 4)
    # the chaos study's recordings: in one run beside it they are recorded once
    checks += mean_field_rows(settings.mean_field, seed, STREAM_KEYS["chaos"], settings.target, true_alpha)
    checks += weak_rows(settings.weak, seed, (STUDY_KEY, 60), settings.target, true_alpha, settings.strong_eps)
    checks += phase_rows(settings.phase, settings.phase_paths, seed, (STUDY_KEY, 70), settings.target, true_alpha)
    checks += latent_rows(settings.target)
    checks += width_rows(settings.width, seed, true_alpha / len(WIDTH_MODELS))
    advance(1)
    params = {
        "local_eps": list(settings.local_eps),
        "strong_eps": list(settings.strong_eps),
        "target_effect": settings.target,
        "models": list(models),
        "strong_model": "F n=2 d=16",
        "states": list(STATES),
        "samples": settings.local.samples,
        "paths": settings.strong.paths,
    }
    return StudyResult(
        study=NAME,
        profile=profile,
        seed=seed,
        params=params,
        checks=checks,
        plots={"": [_calibration_plot(calibration)]},
        notes=_notes(settings),
    )


def local_rows(
    models: dict, settings: PowerProfile, seed: int, true_alpha: float, advance: Callable[[int], None]
) -> tuple[list[Check], list[tuple[float, Check]]]:
    """The local check of every model against its true claim and the catalogue's mutants (one draw of the layer's
    samples per state for all of them); also model F's pooled drift_scale against each injected drift error."""
    checks: list[Check] = []
    calibration: list[tuple[float, Check]] = []
    for index, (label, model) in enumerate(models.items()):
        states = states_for(model.tokens, model.dim, STATES, seed, (STUDY_KEY, index))
        true = model.limit_sde()
        mutants, seen = [], set()
        for eps in settings.local_eps:
            for mutant in catalogue(true, eps):
                if mutant.effect is None and mutant.name in seen:
                    continue  # structural mutants do not depend on eps
                seen.add(mutant.name)
                mutants.append(mutant)
        true_checks, *mutant_checks = local_checks_for_claims(
            model,
            [true, *(m.sde for m in mutants)],
            states,
            settings.local,
            seed,
            (STUDY_KEY, index, 0),
            family_alpha=true_alpha,
        )
        checks.append(true_claim_row("local", label, true_checks))
        for mutant, inner in zip(mutants, mutant_checks):
            checks.append(rejection_row("local", label, mutant.label, mutant.effect, inner, settings.target))
            if index == 0 and mutant.name == "drift x (1 + eps)":
                calibration.append((mutant.effect, pooled_check(inner, "drift_scale")))
        advance(1)
    return checks, calibration


def width_rows(design: tuple[int, float], seed: int, alpha: float) -> list[Check]:
    """joint-limits' width blocks through the local check at h = 1/n (``width_near_misses.width_judgements``:
    widths 32, 64, 128, one set of samples per model): each true claim, and each near miss as a claim when it moves
    one of its checks by at least ``WIDTH_MARGIN`` times that check's resolution (``check_effects``, in the near
    miss's own units: a scale error relative to its own coefficient), else a finding that says so."""
    samples, target = design
    wrong_claims, rows = width_near_misses(), []
    for model, (true, judged) in width_judgements(samples, target, seed, alpha, (STUDY_KEY, 80)).items():
        rows.append(true_claim_row("width local", model, true))
        block, state = WIDTH_MODELS[model]
        limit = covariance_limit(block)
        for name, inner in judged.items():
            unresolved = unseen(check_effects(limit, wrong_claims[model][name], state), inner)
            rows.append(rejection_row("width local", model, name, None, inner, target, unresolved))
    return rows


def unseen(effects: dict[str, float], inner: list[Check]) -> str:
    """Why a near miss is a finding ("" if it is a claim): it moves none of its ``inner`` checks by ``WIDTH_MARGIN``
    times that check's resolution (``effects``: ``check_effects``, in the same units as the checks)."""
    resolutions = {c.name: c.resolution for c in inner if c.resolution}
    seen = {check: abs(e) / resolutions[check] for check, e in effects.items() if check in resolutions}
    if max(seen.values(), default=0.0) >= WIDTH_MARGIN:
        return ""
    moves = ", ".join(f"{check} by {effects[check]:.3g} ({ratio:.2g} x)" for check, ratio in seen.items())
    return f"; it moves each check less than {WIDTH_MARGIN:g} x its resolution ({moves}): a finding"


def _calibration_plot(calibration: list[tuple[float, Check]]) -> Plot:
    return Plot(
        "local check calibration (model F, n = 2, d = 16)",
        "injected drift error eps",
        "measured pooled relative drift error",
        [
            Curve(
                "measured (interval at the family level)",
                [e for e, _ in calibration],
                [c.estimate for _, c in calibration],
                [c.ci[0] for _, c in calibration],
                [c.ci[1] for _, c in calibration],
                style="points",
            ),
            Curve("expected: eps", sorted(e for e, _ in calibration), sorted(e for e, _ in calibration)),
        ],
    )


def _notes(settings: PowerProfile) -> list[str]:
    return [
        f"Target: every structural mutant and every mutant with |eps| >= {settings.target:g} fails the check that "
        "should catch it, and every true claim passes. Rows with smaller eps are findings (the smallest errors "
        "the checks can see), outside the verdict.",
        "Resolution column: for true_claim rows, the largest resolution / target of their inner claim checks "
        "(target 1: each sees what it may not miss); for local rejects rows, the pooled drift_scale check's "
        "resolution (the smallest relative drift-coefficient error it rejects with probability 90%); for strong "
        "rejects rows, same_limit's in mean-square units (its relative-drift equivalent is in the note of the 5% "
        "drift row); other rejects rows, the sharpest inner resolution / target. A rejects row needs no target: the "
        "rejection is decided by its interval.",
        f"Local design: steps h = {settings.local.step:g}, h/2, h/4 (Richardson), {settings.local.samples} samples "
        f"per state, states {', '.join(STATES)}. Strong design: depths {list(settings.strong.depths)}, "
        f"{settings.strong.paths} paths, Euler-Maruyama reference at x{settings.strong.reference_factor}. The local "
        "check runs as the public one does: the drift from the even part of the layer's step at dW and -dW less its "
        "second-order noise response, the covariance against its linear response, allowances that bound rounding and "
        "the Richardson remainder.",
        "The Stratonovich mutant is local only: its drift costs 2 x d^2 diffusion evaluations per step.",
        "The mean-field rows judge the chaos study's recordings (its streams, with the near-miss drifts it records "
        "too): in one run beside the chaos study they are recorded once, and their CPU is charged to the study that "
        "records them first.",
    ]


def strong_rows(settings: PowerProfile, seed: int, confidence: float) -> list[Check]:
    """The strong check on model F (n = 2, d = 16): true claim, the eps mutants of the profile, structural ones."""
    model = FedorovModel(2, 16)
    design = settings.strong
    true = model.limit_sde()
    key = (STUDY_KEY, 50)

    seen, mutants = set(), []
    for eps in settings.strong_eps:
        for mutant in catalogue(true, eps, stratonovich=False):
            if (mutant.effect is None and mutant.name in seen) or mutant.effect == -eps:
                continue
            seen.add(mutant.name)
            mutants.append((eps, mutant))
    # one coupled run for every claim: the Brownian paths and the layer map's ladder are shared
    claims = {"true": true} | {f"{index}: {mutant.label}": mutant.sde for index, (_, mutant) in enumerate(mutants)}
    data = coupled_strong_errors_for_claims(model, claims, design, seed, key)

    def analyse(name: str) -> list[Check]:
        return analyse_strong(data[name], design, {"n": 2, "d": 16}, bootstrap_generator(seed, key), confidence)[0]

    true_checks = analyse("true")
    rows = [true_claim_row("strong", "F n=2 d=16", true_checks)]
    same_limit_resolution = next(c.resolution for c in true_checks if c.name == "same_limit")
    for name, (eps, mutant) in zip(list(claims)[1:], mutants):
        inner = analyse(name)
        # (d-2)/2 for (d-1)/2 scales the radial drift by (d-2)/(d-1): a drift error of 1/(d-1), 6.7% at d = 16,
        # which the strong check claims to see only where the profile's target effect is that small (full: 5%)
        radial = 1.0 / (model.dim - 1)
        unresolved = (
            f"; (d-2)/2 is a radial drift error of 1/(d-1) = {radial:.3g}, below this profile's target "
            f"effect {settings.target:g}: a finding here (the full profile claims it)"
            if mutant.name == "Ito factor (d-2)/2" and radial < settings.target
            else ""
        )
        row = rejection_row("strong", "F n=2 d=16", mutant.label, mutant.effect, inner, settings.target, unresolved)
        plateau = next(c for c in inner if c.name == "same_limit")
        note = row.note + f"; plateau B = {plateau.estimate:.3g} [{plateau.ci[0]:.3g}, {plateau.ci[1]:.3g}]"
        relative = None
        if mutant.name == "drift x (1 + eps)" and plateau.estimate > 0:
            # B grows like eps^2: the smallest detectable drift error is eps sqrt(resolution / B)
            relative = float(abs(eps) * np.sqrt(same_limit_resolution / plateau.estimate))
            note += f"; same_limit sees a drift coefficient error of about {100 * relative:.2g}%"
        rows.append(replace(row, note=note, resolution=same_limit_resolution, relative_resolution=relative))
    return rows


STUDY = Study(
    NAME,
    "power: plausible wrong claims (near misses) are rejected by the checks that judge the true ones",
    execute,
)
