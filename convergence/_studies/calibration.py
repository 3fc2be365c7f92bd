"""Study ``calibration``: how often the public checks decide, over many seeds, at their defaults.

A verdict is worth what it decides at a user's settings. Each case runs one public check (``convergence._checks``,
sampling in stages until it decides) on a map whose limit is known, at seeds drawn from the study's seed: the true
claim, and near misses of it. Targets: a true claim passes at all but the few seeds a per-run false-failure rate of
1% explains (``over_seeds.rate_check`` with ``per_run_rate``: at most 1 of 10, at most 4 of 100; an undecided seed
counts against it too); every near miss is rejected at >= 90% of its seeds.

Cases.
* Model F (n = 2, d = 4): the local check (near misses: drift x 1.05 and x 1.01, the pooled target); the weak limit
  check (sigma = 1/2, f = <x_0, x_1>^2; drift x 1.05); the strong check (target a 25% drift error; drift x 1.25).
  The full profile adds model F with n = 2, d = 16 at the checks' defaults (local and weak 5%, strong 20% = its
  default target).
* The textbook SDEs with known solutions (``convergence._models.textbook_steps``: linear, cubic, wave, additive,
  nonlinear test, stiff quadratic, Ornstein-Uhlenbeck), each through its exact step and its Euler step: the local
  check against the Ito claim and its Stratonovich form (near misses: drift x 1.05, x 0.95, noise variance x 1.05;
  and rows at 1.0 and 1.2 times the resolution each seed's true-claim run states, on that seed's samples: the
  effect the check promises to reject with probability >= 90%); the strong check against the Ito claim (drift x 1.3,
  beyond its 20% target), leaving out the linear SDE (log-normal errors: undecided at the budget) and the stiff
  quadratic's Euler step (its moments diverge: Hutzenlaub, Jentzen and Kloeden 2011). The full profile runs 100
  seeds per true claim and 20 per near miss; the quick profile 10 and 5, on a subset.
* Width-indexed blocks and laws (``calibration_cases.width_cases``): the ResNet with a ReLU 1/sqrt(depth) branch
  through the local check at h = 1/n at its defaults (near misses: its depth ratio x 1.1 and x 0.9, a linear branch,
  a Wishart diffusion); the linear layer (Wishart at every width) through the local check and ``check_law`` at widths
  4, 8, 16 (Wishart x 1.2; the infinite-width ODE; the law's true claim must never fail, its pass share a finding);
  the textbook linear SDE's exact step through ``check_law`` at its defaults (the Ito drift read as Stratonovich,
  the noise x 1.5).
  The quick profile: the ResNet's local check.
* The Hugging Face layers (``models.hugging_face``: Llama, GPT-2, GPT-NeoX; full profile, where torch and
  transformers are installed): the local check at its defaults against the limit ``derive_limit`` computes, 10 seeds
  for the true claim and for each near miss (drift x 1.05, x 0.95, noise variance x 1.05).
* Every registry model with Brownian noise (``convergence._models.MODELS``; model F with Rademacher entries has no
  Brownian path to share with its claim), its true limit through the strong check and the weak limit check
  (f = <x_0, x_1>^2) at the checks' default depths and at (4, 8, 16), 10 seeds each: ``never_fails_true_claim``
  (an undecided seed is no failure: shallow or pre-asymptotic ladders need not decide, they must not fail); at the
  defaults, ``passes_true_claim`` beside it, a finding against "at least 9 of 10 pass" (a registry model whose
  pre-asymptotic range reaches past the depths a check may deepen to cannot meet it; its rows say which depths
  would decide). The quick profile: one model at (4, 8, 16).

Study checks (one per case and claim): ``decides_true_claim`` (estimate: the share of seeds that pass),
``never_fails_true_claim`` (the share that do not fail) and ``rejects`` (the share of seeds that fail). These are
measurements of the suite's decision rates, each with its chance of missing its target by chance: a true claim row at
most 1% (the binomial tail above); a near miss row P(Binomial(seeds, power) < 90% of seeds) with the per-run power
estimated at the measured effects (``mutants.miss_probability`` of each run's most decisive failing check, measured at
the look that rejected, so optimistic; at exactly 90% power it would be 0.26 at 10 seeds, 0.32 at 20). Each row
states the per-run rate of unwanted verdicts it catches with probability 90%. Intervals: Wilson at 99%.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from .._checks import Outcome
from .._experiments import DriftScaled, miss_probability
from .._output import StudyResult
from .._runtime import STREAM_KEYS
from .._statistics import FAIL, FAMILY_ALPHA, PASS, Check
from .base import ProgressFactory, Study
from .calibration_cases import Case, cases
from .over_seeds import rate_check, rate_plot, study_seeds

NAME = "calibration"
STUDY_KEY = STREAM_KEYS[NAME]
RESOLUTION_MULTIPLES = (1.0, 1.2)


def run_miss_probability(outcome: Outcome) -> float:
    """A run's estimated chance of missing the mutant it rejected, at the measured effect (its most decisive failing
    check, ``mutants.miss_probability``); 1 for a run that did not reject it."""
    failed = [c for c in outcome.checks if c.claim and c.verdict == FAIL]
    return min(miss_probability(c) for c in failed) if failed else 1.0


def stated_drift_resolution(outcome: Outcome) -> float | None:
    """The relative drift error a run states it rejects with probability >= 90%: the local check's pooled
    drift_scale (else its one state's), or the strong check's same_limit as a relative drift error; None when the run
    states none (e.g. it did not pass)."""
    checks = {(c.name, c.config.get("state")): c for c in outcome.checks}
    for key in (("drift_scale", "pooled"), ("same_limit", None)):
        if key in checks:
            check = checks[key]
            return check.relative_resolution if check.name == "same_limit" else check.resolution
    scales = [c for c in outcome.checks if c.name == "drift_scale"]
    return scales[0].resolution if len(scales) == 1 else None


def _row(name: str, outcomes: list[Outcome], wanted: str, config: dict, undecided_allowed: bool = False) -> Check:
    return rate_check(
        name,
        [o.verdict for o in outcomes],
        wanted,
        config,
        [run_miss_probability(o) for o in outcomes],
        [o.sample_size for o in outcomes],
        per_run_rate=FAMILY_ALPHA,
        undecided_allowed=undecided_allowed,
    )


def _true_claim_rows(case: Case, runs: list[Outcome]) -> list[tuple[str, Check]]:
    """The true claim's rows: it passes at all but the seeds its 1% rate explains; or, where it need not decide, it
    never fails, with the share that passes beside it as a finding."""
    config = {"case": case.label}
    if case.must_decide:
        return [(f"{case.label}: true claim", _row("decides_true_claim", runs, PASS, config))]
    rows = [(f"{case.label}: true claim never fails", _row("never_fails_true_claim", runs, PASS, config, True))]
    if case.pass_share:
        share = replace(_row("passes_true_claim", runs, PASS, config), claim=False)
        rows.append((f"{case.label}: true claim passes (finding)", share))
    return rows


def execute(profile: str, seed: int, progress: ProgressFactory) -> StudyResult:
    chosen = cases(profile)
    work = sum(
        c.seeds + c.mutant_seeds * (len(c.mutants) + (len(RESOLUTION_MULTIPLES) if c.resolution_rows else 0))
        for c in chosen
    )
    advance = progress(work, NAME)
    checks, rows = [], []
    for index, case in enumerate(chosen):
        seeds = study_seeds(seed, index, case.seeds, STUDY_KEY)
        true_runs = []
        for check_seed in seeds:
            true_runs.append(case.run(case.layer, case.claim, check_seed, **case.options))
            advance(1)
        rows += _true_claim_rows(case, true_runs)
        claims = [(label, make(case.claim)) for label, make in case.mutants]
        for label, claim in claims:
            outcomes = []
            for check_seed in seeds[: case.mutant_seeds]:
                outcomes.append(case.run(case.layer, claim, check_seed, **case.options))
                advance(1)
            rows.append(
                (f"{case.label}: {label}", _row("rejects", outcomes, FAIL, {"case": case.label, "claim": label}))
            )
        if case.resolution_rows:
            rows += _resolution_rows(case, seeds, true_runs, advance)
    checks = [check for _, check in rows]
    plot = rate_plot("share of seeds decided as wanted (pass for true claims, fail for near misses)", "case", checks)
    return StudyResult(
        study=NAME,
        profile=profile,
        seed=seed,
        params=_params(chosen, rows),
        checks=checks,
        plots={"": [plot]},
        notes=list(NOTES),
    )


def _resolution_rows(
    case: Case, seeds: list[int], true_runs: list[Outcome], advance: Callable[[int], None]
) -> list[tuple[str, Check]]:
    """Rows at multiples of the stated resolution: the claim with its drift x (1 + m R_s) on seed s's own samples,
    R_s the relative drift resolution that seed's true-claim run stated."""
    rows = []
    for multiple in RESOLUTION_MULTIPLES:
        outcomes = []
        for check_seed, true_run in zip(seeds[: case.mutant_seeds], true_runs):
            stated = stated_drift_resolution(true_run)
            effect = multiple * (stated if stated is not None and np.isfinite(stated) else np.nan)
            outcomes.append(
                case.run(case.layer, DriftScaled(case.claim, 1.0 + effect), check_seed, **case.options)
                if np.isfinite(effect)
                else Outcome("no stated resolution", [])
            )
            advance(1)
        label = f"drift error {multiple:g} x the stated resolution"
        config = {"case": case.label, "claim": label}
        rows.append((f"{case.label}: {label}", _row("rejects_at_resolution", outcomes, FAIL, config)))
    return rows


def _params(chosen: list[Case], rows: list[tuple[str, Check]]) -> dict:
    return {
        "seeds": {c.label: [c.seeds, c.mutant_seeds] for c in chosen},
        "cases": {
            c.label: {
                "near misses": [label for label, _ in c.mutants],
                "rows at multiples of the stated resolution": list(RESOLUTION_MULTIPLES) if c.resolution_rows else [],
                "options": c.options,
            }
            for c in chosen
        },
        "rows": [label for label, _ in rows],
    }


NOTES = [
    "Each case runs a public check (convergence._checks) with its staged looks, as a user would, at seeds drawn "
    "from the study's seed; the check's own family-wise false-failure rate is 1% and its chance of passing an "
    "effect of its target at most 10%, whichever look stops.",
    "The study's checks measure decision rates against targets; each states its chance of missing the target "
    "by chance (its false-failure rate), and the study's family-wise rate is their sum.",
    "Rows at a multiple of the stated resolution run the claim with its drift x (1 + m R_s) on seed s's own "
    "samples, R_s the relative drift resolution that seed's true-claim run stated at the look it stopped: the "
    "check promises to reject R_s with probability >= 90% (at that look's power, 1 - 0.1/K).",
    "Not yet here: the Hugging Face blocks' strong and weak checks (about 10 CPU minutes per run at 256 paths, "
    "hours at their default budgets), and the weak check "
    "over the textbook library (its target is in standard deviations of f, which the additive problem's 0.005 "
    "noise makes beyond its Euler bias); the catalogue's other mutants (sigma^2, beta, (d-2)/2, the Stratonovich "
    "drift, a missing projection) over seeds.",
]


STUDY = Study(
    NAME,
    "calibration: the public checks' decision rates over seeds (true claims pass, near misses fail)",
    execute,
    in_report=False,
)
