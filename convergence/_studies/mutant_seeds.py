"""Study ``mutant-seeds``: the power study's near misses over seeds.

One rejection shows that a check can see a wrong claim; "it rejects a 5% error" is a claim about a rate. The power
study (``convergence._studies.power``) runs at ``SEEDS`` seeds drawn from this study's seed, at the same profile (its
full profile at this study's full one: every mutant a 5% coefficient error or structural), and for each of its rows
that is a claim at every seed:

  ``mutant_rejected``  the mutant's check fails (the row ``rejects`` passes) at >= 90% of the seeds: at 6 seeds,
                       at every one (``over_seeds.rate_check``; its chance of missing the target is
                       P(Binomial(6, power) < 6), the per-run power 1 - the rows' stated chance of a miss at the
                       measured effect);
  ``true_claim_passes``  the true claim passes every inner check at every seed (at most 1 - 0.99^6 = 0.059 by
                       chance per row when the claims hold).

Resolution: a per-seed rate of unwanted verdicts of 0.32 is caught with probability 90% at 6 seeds (the rows'
target ``over_seeds.RATE_TARGET``, 0.35). Intervals: Wilson at 99%.
"""

from __future__ import annotations

import json
from functools import partial

from .._output import StudyResult
from .._runtime import STREAM_KEYS
from .._statistics import FAIL, INCONCLUSIVE, PASS, Check
from .base import ProgressFactory, Study
from .over_seeds import rate_check, rate_plot, study_seeds

NAME = "mutant-seeds"
STUDY_KEY = STREAM_KEYS[NAME]
SEEDS = 6
# A rejects row's verdict, as the verdict its mutant met in the inner check
_INNER = {PASS: FAIL, FAIL: PASS, INCONCLUSIVE: INCONCLUSIVE}


def _key(check: Check) -> str:
    return json.dumps([check.name, check.config], sort_keys=True, default=str)


def seed_rows(results: list[StudyResult]) -> tuple[list[Check], list[str]]:
    """One rate row per power row that is a claim at every seed (``results``: the power study at each seed), and the
    labels of the rows left out (a finding at some seed: its effect below the target, or unresolved)."""
    rows_by_key: dict[str, list[Check]] = {}
    for result in results:
        for check in result.checks:
            rows_by_key.setdefault(_key(check), []).append(check)
    checks, left_out = [], []
    for rows in rows_by_key.values():
        first = rows[0]
        if len(rows) != len(results) or not all(row.claim for row in rows):
            left_out.append(f"{first.name} {first.config}")
        elif first.name == "rejects":
            checks.append(
                rate_check(
                    "mutant_rejected",
                    [_INNER[row.verdict] for row in rows],
                    FAIL,
                    first.config,
                    [row.false_failure_rate if row.verdict == PASS else 1.0 for row in rows],
                )
            )
        else:
            checks.append(rate_check(f"{first.name}_passes", [row.verdict for row in rows], PASS, first.config))
    return checks, left_out


def execute(profile: str, seed: int, progress: ProgressFactory, power: Study) -> StudyResult:
    results = [power.execute(profile, power_seed, progress) for power_seed in study_seeds(seed, 0, SEEDS, STUDY_KEY)]
    checks, left_out = seed_rows(results)
    plot = rate_plot("share of seeds decided as wanted (mutants rejected, true claims passed)", "row", checks)
    params = {
        "seeds": SEEDS,
        "power_seeds": [r.seed for r in results],
        "power_profile": profile,
        "power_verdicts": [str(r.verdict) for r in results],
        "left_out": left_out,
    }
    notes = [
        f"The power study ran at {SEEDS} seeds drawn from this study's seed, at the {profile} profile; each row "
        "gathers one of its claim rows over the seeds (rows that are findings at some seed are listed in "
        "params.left_out)."
    ]
    return StudyResult(
        study=NAME, profile=profile, seed=seed, params=params, checks=checks, plots={"": [plot]}, notes=notes
    )


def mutant_seeds_study(power: Study) -> Study:
    """The study over the seeds of ``power``."""
    return Study(
        NAME,
        "the catalogue's near misses over seeds: each mutant rejected at >= 90% of seeds",
        partial(execute, power=power),
        in_report=False,
    )
