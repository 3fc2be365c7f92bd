"""Study ``phase-transition``: where two tokens of the discrete model F end, against the scale function.

For each (d, beta, rho_0) the fraction of discrete runs (two tokens, Gaussian values, the layer map kept in the
tokens' plane by ``convergence._models.fedorov_overlap_chain`` (exact in law), sigma = 1, step h) that end antipodal
is compared with P(antipodal) from the derived overlap diffusion's scale function (``verify._analysis.hitting``). The
horizon comes from the boundary exponents: T = C / min(|lambda_+|, |lambda_-|) (capped), so that undecided runs stay
rare; a run is decided when rho is within ``DELTA`` of an end (``experiments.overlap_ends``); runs stop once decided
and unlikely to switch ends, and runs undecided or likely to switch at T are followed further
(``run_until_decided``). Allowance: the undecided fraction plus, for each decided run, the probability that it would
still switch ends, bounded from the scale function at the next tabulated distance at least as large as the run's own
distance to its end (P(antipodal | rho) is monotone). A cell runs as many paths as its check needs at the
predicted probability (``planned_paths``: fewer near 0 and 1). Intervals are Wilson intervals; every statistical
check of the study (grid, many tokens, hybrid) is one Bonferroni family at 1% (``family_size``). A check's
resolution is the smallest departure of the probability it rejects with 90% power (``detectable_effect``)."""

from __future__ import annotations

from .._experiments import (
    CHUNKS,
    DELTA,
    FOLLOW_ALLOWANCE,
    FOLLOW_CHUNKS,
    HORIZON_FACTOR,
    PHASE_DESIGNS,
    PLAN_DIVISORS,
    SWITCH_THRESHOLD,
    phase_transition,
)
from .._output import StudyResult, headline
from .._runtime import STREAM_KEYS
from .base import ProgressFactory, Study

NAME = "phase-transition"
STUDY_KEY = STREAM_KEYS[NAME]


def execute(profile: str, seed: int, progress: ProgressFactory) -> StudyResult:
    design = PHASE_DESIGNS[profile]
    outcome = phase_transition(design, seed, STUDY_KEY, lambda total: progress(total, NAME))
    checks, plots, z, n_checks = outcome.checks, outcome.plots, outcome.z, outcome.n_checks
    rows, many_rows, hybrid_rows = outcome.rows, outcome.many_rows, outcome.hybrid_rows
    ladder = ", ".join(str(design.paths // k) for k in PLAN_DIVISORS)  # the runs a grid cell may take
    params = {
        "dims": list(design.dims),
        "beta_factors_of_beta_c": list(design.beta_factors),
        "betas_d3": list(design.betas_d3),
        "rho0s": list(design.rho0s),
        "paths": design.paths,
        "paths_plan": f"per cell the fewest of {ladder} runs at "
        f"which the probability check resolves {design.plan_margin:g} x its target at the predicted probability and "
        "the undecided check its target (each grid row's 'paths')",
        "sigma": 1.0,
        "sigma2_h": design.step,
        "many_tokens_sigma2_h": design.many_tokens_step,
        "delta": DELTA,
        "horizon": f"min({design.max_horizon}, {HORIZON_FACTOR} / min(|lambda_+|, |lambda_-|))",
        "sampler": "two tokens: the layer map kept in the tokens' plane (exact in law, 7 numbers per layer); "
        "n tokens: the layer map itself (full value matrices)",
        "z": z,
        "grid": rows,
        "many_tokens": many_rows,
        "hybrid": hybrid_rows,
    }
    notes = [
        f"One Bonferroni family over all {n_checks} statistical checks (grid, many tokens, hybrid; z = {z:.3f}): "
        "family-wise false-failure rate at most 1%.",
        "P(antipodal) does not depend on sigma (time change), so sigma = 1 with sigma^2 h fixed.",
        f"The n-token runs take sigma^2 h = {design.many_tokens_step:g} (the two-token grid: "
        f"{design.step:g}): their checks classify end configurations and claim no rate.",
        "For d = 3, beta_c = 0: every beta > 0 lies above it, so that row has no beta below the threshold.",
        f"Runs per cell: the fewest of {ladder} at which the "
        f"probability check, at the scale function's P(antipodal), resolves {design.plan_margin:g} x its target "
        "(the rest is left to the allowance and to the fraction's scatter) and the undecided check resolves its "
        "target: cells predicted near 0 or 1 (binomial variance p (1 - p)) take fewer runs. The plan is a function "
        "of the prediction under test, not of the runs, so the intervals keep their level.",
        f"Each horizon is run in {CHUNKS} parts; after each, the runs decided at an end with a probability of at "
        f"most {SWITCH_THRESHOLD:g} of still switching ends (scale function) stop, and that probability goes into the "
        "allowance. Runs undecided or likely to switch at T are followed (the same chain from their states, fresh "
        f"noise) for up to {FOLLOW_CHUNKS} more horizons while the allowance exceeds {FOLLOW_ALLOWANCE:g}; what stays "
        "so is in the allowance. Below beta_c every run near -1 (its end repels) is followed until it collapses; "
        "each p_antipodal note says how many layers a run took on average, how many runs were pending at T, how "
        "close to -1 they came, and how many remain. The two-token chain carries "
        "1 + rho to full relative precision through the tokens' sum, so a run at 1 + rho ~ 1e-16 still leaves -1 "
        "(exact antipodality would be kept by the map: x_2 = -x_1 gives a_2 = -a_1).",
        "The phase map (phase-diagram figure): per rho0, the simulated fraction, the scale function's "
        "P(antipodal) and their difference in binomial standard errors (at q = (k + 1/2) / (n + 1)) over "
        "(d, beta), with the certified beta_c(d).",
    ]
    return StudyResult(study=NAME, profile=profile, seed=seed, params=params, checks=checks, plots=plots, notes=notes)


STUDY = Study(
    NAME,
    "fraction of discrete runs ending antipodal vs the scale function, across beta_c(d)",
    execute,
    headlines=(
        headline("p_antipodal", summary=True),
        headline("hybrid_dichotomy", summary=True),
    ),
)
