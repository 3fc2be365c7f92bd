"""Study ``sync-agazzi``: synchronisation by noise in model A, a calibration model, and the paper's figure.

1. Two-point exponents (pure noise, infinite-width Gaussian field sampled at the two tokens): the
   slope of the median of log|X - Y| against lambda_1 and the slope of log E|X - Y|^2 against
   lambda_bar, both from ``verify.activation_constants`` (quadrature of k(1), k'(1) and the derived
   two-point SDE), for ReLU and sigmoid, d in {5, 16}, sigma_U = sigma_W in {0, 0.1}
   (``convergence._experiments.exponents``).
2. Energy bound (n tokens, attention attractive or repulsive): E[E_beta(mu_t)] against
   e^{(eps + lambda_bar') t} E[E_beta(mu_0)] with lambda_bar' certified (``verify._rigorous.synchronisation``)
   and eps = 0 (attractive) or 4 (repulsive, derived there); the report states whether the theorem's
   hypotheses (lambda_bar < 0, field not a.s. odd) hold (``convergence._experiments.energy``).
3. Random quadratic form (calibration, d = 3): exponents of 1 - rho and 1 + rho, the martingale
   invariant and the merge probability, all derived in ``verify._analysis.quadratic_form_overlap``.
4. The paper's figure: d = 4, n = 64, no attention, no biases, paper's block (fresh features, width m),
   ReLU against tanh: histograms of the final pairwise cosines (tanh: antipodal pair; ReLU: one cluster).
"""

from __future__ import annotations

from .._experiments import (
    ENERGY_CONFIGS,
    FIGURE_DIM,
    FIGURE_HORIZON,
    FIGURE_TOKENS,
    QF_DIM,
    SYNC_BETA,
    SYNC_CHECKS,
    EnergyDesign,
    ExponentDesign,
    SyncDesign,
    synchronisation_by_noise,
)
from .._output import StudyResult, headline
from .._runtime import STREAM_KEYS
from .base import ProgressFactory, Study

NAME = "sync-agazzi"
STUDY_KEY = STREAM_KEYS[NAME]


def _repulsive(paths: int) -> tuple[tuple[str, str, int], ...]:
    """``energy_paths`` entries of the repulsive flows, whose bound is loose by construction (eps = 4)."""
    return tuple((act, "repulsive", paths) for act, _, _, attention in ENERGY_CONFIGS if attention == "repulsive")


DESIGNS = {
    "quick": SyncDesign(
        # T = 2, not 4: log r_T^2 has variance about 4 sigma^2 T, and at T = 4 one path of 12288 held 17% of
        # E r^2 (ReLU, d = 5, seed 2498256564: resolution 3.2 x the target); at T = 2 twice the paths cost the same
        exponents=ExponentDesign(horizon=2.0, steps=80, records=20, paths=24576, target=0.5),
        # sized to their targets over 3-4 seeds (resolution / target): sigmoid's exponents at 24576 paths sat at
        # 0.05-0.23, at these 0.08-0.40; the energy bounds at 512 paths: attractive sigmoid 0.73-0.79 (kept), ReLU
        # 0.38, tanh 0.23 and both repulsive 0.07-0.10; at these ReLU about 0.55, tanh 0.42-0.45, repulsive 0.17-0.28
        exponent_paths=(("sigmoid", 5, 8192), ("sigmoid", 16, 2048)),
        energy=EnergyDesign(horizon=4.0, steps=200, records=20, paths=512),
        energy_paths=(("relu", "attractive", 256), ("tanh", "attractive", 128), *_repulsive(128)),
        energy_tokens=16,
        qf_exponents=ExponentDesign(horizon=1.0, steps=200, records=20, paths=8192, target=0.5),
        qf_paths=20000,
        qf_depths=(100, 200),
        qf_merge_horizon=4.0,
        qf_merge_depth=400,
        figure_width=256,
        figure_depth=500,
        figure_paths=32,
        invariant_target=0.2,
        energy_target=0.1,
        merge_target=0.075,
    ),
    # full: fewer paths where a section was over-resolved (at 0516c94 sigmoid's exponents sat at 0.07-0.53 of their
    # target on 32768 paths, the quadratic form's at 0.11 on 65536 and 0.56 on 200000; measured at 5a7d649: sigmoid
    # 0.08-0.61, quadratic form 0.26-0.29 and 0.60-0.70, the largest in the study still ReLU's 0.78)
    "full": SyncDesign(
        exponents=ExponentDesign(horizon=4.0, steps=400, records=20, paths=32768),
        exponent_paths=(("sigmoid", 5, 24576), ("sigmoid", 16, 4096)),
        energy=EnergyDesign(horizon=4.0, steps=400, records=20, paths=2048),
        # the energy bounds sit at the quick profile's share of their (half as wide) target at four times its paths
        # (at 2048 paths: attractive sigmoid 0.76, ReLU 0.39, tanh 0.23, repulsive 0.07-0.10): the same sizing
        energy_paths=(("relu", "attractive", 1024), ("tanh", "attractive", 512), *_repulsive(512)),
        energy_tokens=16,
        qf_exponents=ExponentDesign(horizon=1.0, steps=400, records=20, paths=8192),
        qf_paths=120000,
        qf_depths=(200, 400),
        qf_merge_horizon=4.0,
        qf_merge_depth=800,
        figure_width=2048,
        figure_depth=2000,
        figure_paths=8,
    ),
}


def execute(profile: str, seed: int, progress: ProgressFactory) -> StudyResult:
    design = DESIGNS[profile]
    outcome = synchronisation_by_noise(design, seed, STUDY_KEY, lambda total: progress(total, NAME))
    params = {
        "beta": SYNC_BETA,
        "exponents": {
            "configs": outcome.exponent_rows,
            "field": "infinite-width Gaussian field at the two tokens",
            "horizon": design.exponents.horizon,
            "steps": design.exponents.steps,
            "paths": "per configuration (its row)",
            "delta0": design.exponents.delta0,
        },
        "energy": {
            "configs": outcome.energy_rows,
            "tokens": design.energy_tokens,
            "horizon": design.energy.horizon,
            "steps": design.energy.steps,
            "paths": "per configuration (its row)",
        },
        "quadratic_form": {"d": QF_DIM, "rows": outcome.qf_rows, "paths": design.qf_paths},
        "figure": {
            "d": FIGURE_DIM,
            "tokens": FIGURE_TOKENS,
            "width": design.figure_width,
            "depth": design.figure_depth,
            "horizon": FIGURE_HORIZON,
            "paths": design.figure_paths,
            "block": "fresh features at every layer (the paper's)",
            "summary": outcome.figure_summary,
        },
    }
    notes = [
        "Exponents: lambda_1 is an almost-sure rate (median of log-distances), lambda_bar a mean-square rate; "
        "for ReLU (lambda_1 < 0 < lambda_bar) they have opposite signs: typical pairs merge while E|X-Y|^2 grows.",
        "Energy bound: the theorem assumes lambda_bar < 0 and a field that is not a.s. odd; where that fails the "
        "Gronwall inequality E[E] <= e^{(eps + lambda_bar') t} E[E_0] is still checked (it needs only F bounded "
        "below), and the row says which hypothesis fails. eps = 4 for the repulsive flow is a derived upper bound, "
        "so that bound is loose by construction.",
        f"Family-wise: each of the study's {SYNC_CHECKS} checks runs at level 1% / {SYNC_CHECKS} (bootstrap-normal, "
        "Bonferroni-normal, Wilson or Student t intervals), so the study fails with probability at most 1% when every "
        "claim holds.",
    ]
    return StudyResult(
        study=NAME,
        profile=profile,
        seed=seed,
        params=params,
        checks=outcome.checks,
        plots=outcome.plots,
        notes=notes,
    )


STUDY = Study(
    NAME,
    "model A synchronisation by noise: two-point exponents, energy bound, quadratic form, paper figure",
    execute,
    headlines=(
        headline("median_exponent", bias=0.0),
        headline("mean_square_exponent", bias=0.0),
        headline("qf_exponent_diagonal"),
        headline("qf_merge_probability"),
    ),
)
