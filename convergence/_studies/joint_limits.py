"""Study ``joint-limits``: in the proportional limit (depth T n, width n), the covariance V = Z Z^T / n of two inputs
follows the derived covariance SDE (docs/models.md, section 4b) for the shaped ReLU MLP, the ResNet with a
1/sqrt(depth) ReLU branch and the shaped attention block.

Each model's derived SDE (``covariance_limit``, compiled from ``verify``'s derivation) is decided

  locally  at h = 1/n along the widths 32, 64, 128 (``convergence._experiments.covariance_local``), at uncorrelated
           unit inputs for the shaped MLP and at correlation 0.5 for the others, the same samples judging the true
           claim and its near misses (``convergence._experiments.width_near_misses``: four or five a model, none a
           symmetry of the network's law: a shaping, temperature, branch weight or depth ratio 10% off, the
           diffusion scaled or without the skip's cross term, the infinite-width ODE);
  in law   the correlation rho_T at t = T after T n layers at widths 8, 16, 32 against the SDE's own Euler scheme, in
           Kolmogorov and Wasserstein-1 distance (``convergence._experiments.law_distance``), drawn as the papers draw
           it (histograms of rho_T at each width against the SDE's), for the shaped MLP and the shaped attention. The
           ResNet's limit is an ODE: its law at T is an atom, which the Kolmogorov distance cannot judge and which
           the network approaches in Wasserstein-1 at rate n^-1/2 only (its O(n^-1/2) spread), so its local check
           decides it;

and two of the papers' qualitative statements that follow from the SDE are checked as claims: the shaped MLP's norm
neither explodes nor vanishes in mean (the diagonal of the SDE is dV_aa = sqrt(2) V_aa dB, exactly: a martingale whose
logarithm drifts at -1 per unit t; ``norm_martingale`` in exact algebra on the derived SDE, and the network's
log V_00 at T in law), and the shaped attention's covariance stays non-degenerate at finite T (``no_rank_collapse``:
the fraction of networks whose V_T has smallest eigenvalue below 1e-6 of its trace is not above 1%).

The shaped MLP runs at c_+ = -c_- = 1.5: with symmetric shaping its one-step moments are functions of
(s_+ - s_-)^2 and s_+ + s_- = 2 (the law of Z is invariant under Z -> -Z, which swaps s_+ and s_-), so they expand in
1/n and the rate is 1 (an asymmetric shaping puts an n^-3/2 term in the mean: rate 1/2, far costlier to decide); at
rho = 0 its drift, (c_+ - c_-)^2 / (2 pi) = 1.43, is larger than its noise's unit, so a shaping 10% off moves it by
about 21%.

Near misses are findings here (``rejects``: pass when the check fails the wrong claim), outside the verdict (the power
study decides them); the study's
claims share a family-wise false-failure rate of 1% (Bonferroni over its check families).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import sympy as sp

from verify._analysis import ShapedMLP

from .._checks import check_law
from .._experiments.width_near_misses import (
    ATTENTION,
    CORRELATED,
    MLP,
    MODELS,
    RESNET,
    WIDTHS,
    near_misses,
    width_judgements,
)
from .._models import (
    covariance_limit,
)
from .._output import StudyResult, headline
from .._paths import width_run
from .._runtime import STREAM_KEYS
from .._statistics import (
    FAIL,
    FAMILY_ALPHA,
    INCONCLUSIVE,
    PASS,
    Check,
    combine_verdicts,
    excess_resolution,
    wilson,
    z_confidence,
    z_value,
)
from .base import ProgressFactory, Study

NAME = "joint-limits"
STUDY_KEY = STREAM_KEYS[NAME]
COLLAPSE_RATIO, COLLAPSE_BOUND, COLLAPSE_TARGET = 1e-6, 0.01, 0.02


@dataclass(frozen=True)
class Profile:
    local_samples: int  # at each width, for every claim of a model
    law_samples: int  # at each level of the law checks
    law_levels: tuple[int, int, int]
    law_target: float  # Kolmogorov distance
    local_target: float


PROFILES = {
    "quick": Profile(32_768, 32_768, (8, 16, 32), 0.2, 0.2),
    "full": Profile(131_072, 196_608, (8, 16, 32), 0.1, 0.1),
}
LAW_HORIZON = 0.5  # the shaped attention's SDE has coefficients of superlinear growth: a short horizon keeps its tails


def local_rows(profile: Profile, seed: int, alpha: float) -> tuple[list[Check], list[Check]]:
    """Every model's local checks of its true claim (claims) and one ``rejects`` row per near miss (findings)."""
    judged = width_judgements(profile.local_samples, profile.local_target, seed, alpha, (STUDY_KEY, 1))
    claims = [c for true, _ in judged.values() for c in true]
    rows = [rejection_row(model, name, inner) for model, (_, wrong) in judged.items() for name, inner in wrong.items()]
    return claims, rows


def rejection_row(model: str, name: str, checks: list[Check]) -> Check:
    """``rejects`` (a finding): pass when the near miss fails, fail when it passes, else inconclusive."""
    inner = {PASS: FAIL, FAIL: PASS}.get(combine_verdicts([c.verdict for c in checks if c.claim]), INCONCLUSIVE)
    failed = ", ".join(c.name for c in checks if c.verdict == FAIL) or "none"
    resolution = min((c.relative_resolution or c.resolution or math.inf) for c in checks)
    note = f"the near miss '{name}' judged by the local check: failing checks {failed}"
    rejected = float(inner == PASS)
    config = {"model": model, "claim": name}
    return Check(
        "rejects", 1.0, rejected, (rejected, rejected), inner, config, note=note, claim=False, resolution=resolution
    )


def log_norm(v: np.ndarray) -> np.ndarray:
    """log V_00 per sample."""
    return np.log(v[:, 0, 0])


def law_outcomes(profile: Profile, seed: int, alpha: float) -> list:
    """The law checks: rho_T for the shaped MLP and the shaped attention, and log V_00 for the shaped MLP (the
    ResNet's law at T is an atom, module docstring: its local check decides it)."""
    options = {
        "levels": profile.law_levels,
        "samples": profile.law_samples,
        "target": profile.law_target,
        "seed": seed,
        "family_alpha": alpha,
        "horizon": LAW_HORIZON,
    }
    mlp_state, attention_state = MODELS["shaped MLP"][1], MODELS["shaped attention"][1]
    return [
        check_law(MLP, covariance_limit(MLP), initial=mlp_state, title="shaped MLP: rho_T", **options),
        check_law(MLP, covariance_limit(MLP), log_norm, initial=mlp_state, title="shaped MLP: log V_00", **options),
        check_law(
            ATTENTION, covariance_limit(ATTENTION), initial=attention_state, title="shaped attention: rho_T", **options
        ),
    ]


def norm_martingale() -> Check:
    """Exact algebra on the derived SDE of the shaped MLP: b_aa = 0 and Sigma_aa,aa = 2 V_aa^2 (module docstring). It
    checks the derivation (any c_+- gives it: the normalisation c keeps E V'_aa = V_aa, and the Wishart part is
    Gaussian); the network's log V_00 is checked against it in law."""
    model = ShapedMLP(2)
    v = model.state
    residues = [sp.simplify(model.drift()[a, a]) for a in range(2)]
    residues += [sp.simplify(model.diffusion(a, a, a, a) - 2 * v[a, a] ** 2) for a in range(2)]
    verdict = PASS if all(r == 0 for r in residues) else FAIL
    note = "b_aa = 0 and Sigma_aa,aa = 2 V_aa^2 (sympy, exact): dV_aa = sqrt(2) V_aa dB, so E V_aa(t) = V_aa(0)"
    return Check(
        "norm_martingale",
        0.0,
        float(sum(r != 0 for r in residues)),
        (0.0, 0.0),
        verdict,
        {"model": "shaped MLP"},
        note=note,
        false_failure_rate=0.0,
    )


def rank_collapse(profile: Profile, seed: int, z: float) -> Check:
    """``no_rank_collapse``: the fraction of shaped-attention networks at the widest law level whose V_T has smallest
    eigenvalue below ``COLLAPSE_RATIO`` of its trace, at most ``COLLAPSE_TARGET`` (Wilson interval at ``z``)."""
    width = profile.law_levels[-1]
    ratio = lambda v: np.linalg.eigvalsh(v)[:, 0] / np.trace(v, axis1=-2, axis2=-1)  # noqa: E731
    layers = round(LAW_HORIZON * width)
    values, _ = width_run(ATTENTION, CORRELATED, width, layers, profile.law_samples, ratio, seed, (STUDY_KEY, 2))
    count, runs = int(np.sum(values < COLLAPSE_RATIO)), values.shape[0]
    lo, hi = wilson(count, runs, z)
    verdict = FAIL if lo > COLLAPSE_BOUND else PASS if hi <= COLLAPSE_BOUND else INCONCLUSIVE
    note = (
        f"width {width}, depth {layers}: {count} of {runs} networks with lambda_min(V_T) < {COLLAPSE_RATIO:g} "
        f"tr V_T (smallest ratio {values.min():.3g}); fails when significantly above {COLLAPSE_BOUND:.0%}"
    )
    return Check(
        "no_rank_collapse",
        0.0,
        count / runs,
        (lo, hi),
        verdict,
        {"model": "shaped attention"},
        COLLAPSE_BOUND,
        z_confidence(z),
        resolution=excess_resolution(runs, COLLAPSE_BOUND, z),
        target=COLLAPSE_TARGET,
        note=note,
    )


FAMILIES = 3 + 3 + 1  # the local checks of three models, three law checks, the rank collapse (norm_martingale: exact)


def execute(profile: str, seed: int, progress: ProgressFactory) -> StudyResult:
    settings = PROFILES[profile]
    alpha = FAMILY_ALPHA / FAMILIES
    advance = progress(3, NAME)
    local, rejects = local_rows(settings, seed, alpha)
    advance(1)
    outcomes = law_outcomes(settings, seed, alpha)
    advance(1)
    law = [replace(c, config={"law": o.title}) for o in outcomes for c in o.checks]
    collapse = rank_collapse(settings, seed, z_value(1, alpha))
    advance(1)
    checks = [*local, *law, norm_martingale(), collapse, *rejects]
    plots = {
        "": [p for o in outcomes for p in o.plots if p.ylabel == "density"],
        "cdf": [p for o in outcomes for p in o.plots if p.ylabel == "CDF"],
        "decay": [p for o in outcomes for p in o.plots if p.ylabel == "distance"],
    }
    params = {
        "models": {"shaped MLP": repr(MLP), "ResNet": repr(RESNET), "shaped attention": repr(ATTENTION)},
        "states": {model: state.tolist() for model, (_, state) in MODELS.items()},
        "local_widths": list(WIDTHS),
        "local_samples": settings.local_samples,
        "local_target": settings.local_target,
        "law_levels": list(settings.law_levels),
        "law_samples": settings.law_samples,
        "law_target": settings.law_target,
        "law_horizon": LAW_HORIZON,
        "near_misses": {model: list(claims) for model, claims in near_misses().items()},
    }
    return StudyResult(NAME, profile, seed, params, checks, plots=plots, notes=notes(settings))


def notes(settings: Profile) -> list[str]:
    return [
        f"Bonferroni: {FAMILIES} families (three models' local checks, three law checks, the rank collapse) at "
        f"{FAMILY_ALPHA / FAMILIES:.4g} each: family-wise false-failure rate at most 1% (norm_martingale is exact).",
        "Local checks: n (E[V' | Z] - V) and n Cov(V') at widths 32, 64, 128 (Haar frames with Z Z^T / n = V), "
        f"{settings.local_samples} samples a width, extrapolated at the claimed rate 1; target "
        f"{settings.local_target:g} (scale checks).",
        f"Law checks: levels {settings.law_levels} at t = {LAW_HORIZON:g}, {settings.law_samples} samples a level; "
        f"Kolmogorov target {settings.law_target:g}. The histograms are the papers' figures: rho_T at each width "
        "against the SDE's (increment-tamed Euler, 8 times the finest level's steps).",
        "rejects rows are findings: each near miss judged on the true claim's samples; pass = the check fails it.",
    ]


STUDY = Study(
    NAME,
    "depth x width: covariance SDEs (shaped MLP, ResNet, shaped attention)",
    execute,
    headlines=(headline("drift_scale", model="shaped attention"), headline("law_ks", summary=True)),
)
