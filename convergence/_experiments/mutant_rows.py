"""The power study's rows beyond the local and strong ones: the mean-field, weak, phase and latent checks run on the
true claim and on its plausible wrong versions (a coefficient a few percent off, (d-2)/(d-1) for a ratio, a wrong
Ito factor, beta or the diffusion scaled), each judged on the same simulated paths; a row passes when the true claim
passes (``true_claim_row``) or the wrong one fails (``rejection_row``)."""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

import verify
from verify._analysis import p_antipodal_double
from verify._calculus import d as d_symbol
from verify._calculus import sigma as sigma_symbol
from verify._common import holding_precision
from verify._models import beta as beta_symbol
from verify._rigorous import LatentSetting, distance

from .._models import FedorovModel, LatentSampler, TwoTokenOverlapChain
from .._paths import fixed_overlap
from .._references import lambdify_overlap
from .._statistics import Check, z_value
from .latent_runs import PAPER_HORIZON, PAPER_SPECTRA
from .latent_sampling import exact_discrete_convergence
from .mean_field import MeanFieldSection, mean_field_section
from .mutants import rejection_row, true_claim_row
from .overlap_ends import decided_ends, probability_check, run_until_decided
from .phase_design import PhaseDesign, phase_horizon
from .strong import bootstrap_generator
from .weak import (
    OVERLAP_OBSERVABLES,
    WeakDesign,
    betas_across_critical,
    coupled_observables,
    limit_check,
    token_observables,
)
from .weak_order_fit import weak_order
from .weak_overlap import limit_moments, overlap_control

MEAN_FIELD_EFFECTS = {
    "k(1) x 1.05": 0.05,
    "(d-2)/(d-1) in lambda": None,
    "attention v x 0.95": -0.05,
    "attention v x 0.8": -0.2,
    "beta x 1.2": 0.2,
    "Ito factor (d-2)/2": None,
}


def mean_field_rows(
    section: MeanFieldSection, seed: int, study_key: int, target: float, family_alpha: float
) -> list[Check]:
    """The chaos study's mean-field checks (zonal limit, weak form of the SPDE) on wrong mean-field drifts and
    rates, judged on the same recorded data as the true claim (``experiments.mean_field_section`` on the streams of
    ``study_key``: the chaos study's, so that one run records them once).

    A mutant's effect on such a check is the difference of its statistic and the true claim's on the same paths
    (a drift term or a decay computed from the same recording). When that effect is below the check's resolution
    (the effect it rejects with probability ``DETECTION_POWER``) the profile cannot see the mutant, whatever its
    eps: the row is a finding that says so (a beta 20% off moves the weak form by only ~6% of its drift term)."""
    rows, truth = [], {}
    for check in mean_field_section(section, seed, study_key, family_alpha, near_misses=True):
        label = check.config.get("claim", check.config.get("drift", "true"))
        model = f"{check.config['model']} ({check.name})"
        if label == "true" and check.claim:
            truth[model] = check
            rows.append(true_claim_row("mean-field", model, [check]))
        elif label in MEAN_FIELD_EFFECTS:
            effect = MEAN_FIELD_EFFECTS[label]
            seen = abs(check.estimate - truth[model].estimate)
            unresolved = (
                ""
                if seen >= check.resolution
                else (
                    f"; its effect on this check, {seen:.3g} on the same paths, is below the check's resolution "
                    f"{check.resolution:.3g}: a finding at this profile"
                )
            )
            rows.append(
                rejection_row(
                    "mean-field",
                    model,
                    label if effect is None else f"{label}, eps = {effect:+g}",
                    effect,
                    [replace(check, claim=True)],
                    target,
                    unresolved,
                )
            )
    return rows


def overlap_claims(eps: float) -> dict[str, tuple[float | None, sp.Expr, sp.Expr]]:
    """The derived overlap SDE of model F (two tokens) and its near misses: diffusion coefficient x (1 +- eps) and
    d - 1 for d - 2 in the drift (name -> (effect, drift, diffusion squared))."""
    drift, diffusion = verify.overlap_sde("fedorov", 2)
    d = d_symbol
    # drift = sigma^2 (1 - rho^2) (d - 2 - rho cosh(beta (rho - 1))) / (cosh(...) + 1): d - 2 -> d - 1 adds
    extra = sp.cancel(drift.subs(d, d + 1) - drift)
    return {
        "true": (0.0, drift, diffusion),
        "overlap diffusion x (1 + eps)": (eps, drift, (1 + eps) * diffusion),
        "overlap diffusion x (1 - eps)": (-eps, drift, (1 - eps) * diffusion),
        "d - 1 for d - 2 in the overlap drift": (None, drift + extra, diffusion),
    }


WEAK_DIM, WEAK_RHO0 = 4, -0.5


def weak_rows(
    design: WeakDesign,
    seed: int,
    key: tuple[int, ...],
    target: float,
    family_alpha: float,
    eps_values: tuple[float, ...],
) -> list[Check]:
    """weak-fedorov's weak_limit check (finest depth against the backward Kolmogorov equation) for the true overlap
    SDE and its near misses, judged on the same simulated overlaps of model F (d = 4, beta above beta_c)."""
    beta = betas_across_critical(WEAK_DIM)[1]
    model = FedorovModel(tokens=2, dim=WEAK_DIM, beta=beta)
    observables = token_observables()
    control = overlap_control(model, OVERLAP_OBSERVABLES, design.horizon, design.depths[-1])
    values = coupled_observables(model, design, observables, seed, key, fixed_overlap(WEAK_RHO0), control=control)
    fits = weak_order(
        values,
        design.steps(),
        bootstrap_generator(seed, key),
        design.replicates,
        z_value(len(OVERLAP_OBSERVABLES), family_alpha),
    )
    z = z_value(len(OVERLAP_OBSERVABLES), family_alpha)
    claims = {}
    for eps in eps_values:
        claims |= {
            name if effect in (0.0, None) else f"{name}, eps = {effect:+g}": (effect, b, a)
            for name, (effect, b, a) in overlap_claims(eps).items()
        }
    rows = []
    with holding_precision():  # nsimplify sets mpmath's precision
        substitutions = {d_symbol: WEAK_DIM, beta_symbol: sp.nsimplify(beta), sigma_symbol: model.sigma}
    for label, (effect, drift, diffusion) in claims.items():
        b, a = lambdify_overlap(drift, diffusion, substitutions)
        inner = []
        for name, f in OVERLAP_OBSERVABLES.items():
            fit = fits[name]
            inner.append(
                limit_check(
                    values[name],
                    fit.differences[-1],
                    fit.standard_errors[-1],
                    *limit_moments(b, a, f, design.horizon, WEAK_RHO0),
                    design,
                    z,
                    {"observable": name},
                )
            )
        model_label = f"F overlap d={WEAK_DIM} beta={beta:g}"
        if label == "true":
            rows.append(true_claim_row("weak", model_label, inner))
        else:
            rows.append(rejection_row("weak", model_label, label, effect, inner, target))
    return rows


PHASE_DIM, PHASE_BETA_FACTOR, PHASE_RHO0 = 4, 1.25, -0.9


def phase_rows(
    design: PhaseDesign, paths: int, seed: int, key: tuple[int, ...], target: float, family_alpha: float
) -> list[Check]:
    """phase-transition's p_antipodal check (two tokens of model F in the plane of the pair, d = 4, beta = 1.25
    beta_c, rho0 = -0.9) against the scale function of the true overlap diffusion and of its near misses: the
    diffusion coefficient x (1 +- eps), beta x (1 +- eps), d - 1 for d; all judged on the same runs."""
    beta = PHASE_BETA_FACTOR * float(verify.critical_beta(PHASE_DIM)[1])
    T = phase_horizon(PHASE_DIM, beta, design)
    layer = TwoTokenOverlapChain(FedorovModel(2, PHASE_DIM, beta, sigma=1.0))
    # as in phase-transition: runs stop once decided, the undecided are followed past T
    rho, _, _ = run_until_decided(layer, PHASE_RHO0, T, design.step, paths, seed, key, design.block_paths)
    antipodal, _, allowance = decided_ends(rho, PHASE_DIM, beta)
    claims = {"true": (None, PHASE_DIM, beta, 1.0), "d - 1 for d": (None, PHASE_DIM - 1, beta, 1.0)}
    for eps in (0.05, 0.2):
        claims |= {
            f"diffusion x (1 + {eps:g})": (eps, PHASE_DIM, beta, 1 + eps),
            f"diffusion x (1 - {eps:g})": (-eps, PHASE_DIM, beta, 1 - eps),
            f"beta x (1 + {eps:g})": (eps, PHASE_DIM, beta * (1 + eps), 1.0),
            f"beta x (1 - {eps:g})": (-eps, PHASE_DIM, beta * (1 - eps), 1.0),
        }
    confidence = 1 - family_alpha  # the true claim's check (rejects rows carry their chance of a miss)
    model_label = f"F two tokens d={PHASE_DIM} beta={beta:.4g} rho0={PHASE_RHO0:g}, {paths} runs"
    rows = []
    for label, (effect, dim, b, factor) in claims.items():
        predicted = float(p_antipodal_double(dim, b, [PHASE_RHO0], diffusion_factor=factor)[0])
        inner = [probability_check(antipodal, paths, predicted, allowance, confidence, {"claim": label})]
        rows.append(
            true_claim_row("phase", model_label, inner)
            if label == "true"
            else rejection_row("phase", model_label, label, effect, inner, target)
        )
    return rows


def latent_rows(target: float) -> list[Check]:
    """ldm-stopping's exact_discrete_convergence (the discrete sampler's law against the closed form at t = T/4,
    T/2, 3T/4, T; exact algebra) for the closed form with e^{-t} off by eps (t -> (1 + eps) t before T)."""
    variances = PAPER_SPECTRA["geometric"]
    horizon = PAPER_HORIZON
    sampler, setting = LatentSampler(variances, horizon, method="sde"), LatentSetting(variances, horizon)
    rows = [
        true_claim_row(
            "latent",
            "geometric spectrum, exact score, Euler SDE",
            [exact_discrete_convergence(sampler, variances, setting, {})],
        )
    ]
    for eps in (0.01, 0.02, 0.05):

        def warped(ctx, claim, t, d, eps=eps):
            return distance(ctx, claim, t * (1 + eps) if t < horizon else t, d)

        inner = [exact_discrete_convergence(sampler, variances, setting, {}, closed_form=warped)]
        rows.append(
            rejection_row(
                "latent",
                "geometric spectrum, exact score, Euler SDE",
                f"exponent e^-t x (1 + {eps:g})",
                eps,
                inner,
                target,
            )
        )
    return rows
