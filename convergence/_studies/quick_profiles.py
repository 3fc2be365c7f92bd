"""Study ``quick-profiles``: every other study's quick profile over many seeds.

The README's first command runs the quick profiles; its verdict must not depend on the seed. For each study, its
quick profile runs at ``SEEDS`` seeds (10 at this study's full profile; 6 at its quick one, the fewest whose row can
decide at calibration's rate target), drawn from this study's seed alone, and ``quick_profile_passes`` asks that it
passes at every one (``over_seeds.rate_check``: a false failure at one of 10 seeds has probability at most
1 - 0.99^10 = 0.096 when every claim holds, each study's family-wise rate being 1%; an undecided seed misses the
target too, and that chance is not bounded; resolution: a per-seed rate of unwanted verdicts of 0.21 is caught with
probability 90% at 10 seeds, 0.32 at 6). Each row's note also gives the largest resolution / target of the study's
claim checks over the seeds, and per seed: how far each quick profile sits from undecided, the measure its sizing
needs; and the CPU each seed's run took (``cpu_meter``: this thread and the workers' blocks), in units of the
reference kernel. The quick report's cost is the sum over studies of each one's median seed (``params``): an upper
bound, since here every study computes what a report run shares between two (power's mean-field rows record the chaos
study's data, once in a report run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import numpy as np

from .._output import StudyResult
from .._runtime import STREAM_KEYS, cpu_meter, reference_seconds
from .._statistics import FAIL, PASS, Check
from .base import ProgressFactory, Study
from .over_seeds import rate_check, rate_plot, study_seeds

NAME = "quick-profiles"
STUDY_KEY = STREAM_KEYS[NAME]
SEEDS = {"quick": 6, "full": 10}


def quick_profile_rows(
    studies: Sequence[Study], seed: int, count: int, progress: ProgressFactory
) -> tuple[list[Check], dict[str, list[float]]]:
    """``quick_profile_passes`` per study: its quick profile at ``count`` seeds must pass at every one. A seed at
    which the study raises counts as a failure, named with its error in the row's note (the sweep goes on). Also
    each study's CPU per seed that ran to its end, in ref units."""
    rows, costs = [], {}
    ref = reference_seconds()
    for index, study in enumerate(studies):
        verdicts, missed, closest = [], [], []
        costs[study.name] = []
        for study_seed in study_seeds(seed, index, count, STUDY_KEY):
            try:
                with cpu_meter() as cpu:
                    result = study.execute("quick", study_seed, progress)
                    costs[study.name].append(cpu.total() / ref)
            except Exception as error:  # a crash is this seed's failure, not the sweep's end
                verdicts.append(FAIL)
                missed.append(f"seed {study_seed}: raised {type(error).__name__}: {error}")
                continue
            verdicts.append(result.verdict)
            ratio, check = largest_resolution_ratio(result.checks)
            if check is not None:
                closest.append((ratio, study_seed, check))
            if result.verdict != PASS:
                unwanted = (c for c in result.checks if c.claim and c.verdict != PASS)
                missed.append(f"seed {study_seed}: " + ", ".join(f"{c.name} {c.config} {c.verdict}" for c in unwanted))
        row = rate_check("quick_profile_passes", verdicts, PASS, {"study": study.name})
        notes = [row.note]
        if closest:  # how near the profile is to undecided: what sizing it needs, or could give up
            ratio, at_seed, check = max(closest, key=lambda item: item[0])
            notes.append(
                f"largest resolution / target over seeds {ratio:.2f} ({check.name} {check.config} at seed {at_seed}), "
                f"per seed {', '.join(f'{r:.2f}' for r, _, _ in closest)}"
            )
        if costs[study.name]:
            notes.append(f"CPU per seed, ref units: {', '.join(f'{c:.2f}' for c in costs[study.name])}")
        if missed:
            notes.append(f"not passed: {'; '.join(missed)}")
        rows.append(replace(row, note="; ".join(notes)))
    return rows, costs


def largest_resolution_ratio(checks: Sequence[Check]) -> tuple[float, Check | None]:
    """The largest resolution / target of a run's claim checks that state both (a finite target), with its check;
    ``(0, None)`` when none does."""
    ratios = [(c.resolution_ratio, c) for c in checks if c.claim and c.resolution_ratio is not None]
    return max(ratios, key=lambda item: item[0], default=(0.0, None))


def execute(profile: str, seed: int, progress: ProgressFactory, studies: Sequence[Study] = ()) -> StudyResult:
    checks, costs = quick_profile_rows(studies, seed, SEEDS[profile], progress)
    plot = rate_plot("share of seeds at which the study's quick profile passes", "study", checks, target=False)
    medians = {name: round(float(np.median(per_seed)), 3) for name, per_seed in costs.items() if per_seed}
    params = {
        "seeds_per_study": SEEDS[profile],
        "studies": [study.name for study in studies],
        "median_cpu_ref": medians,
        "quick_report_cpu_ref": round(sum(medians.values()), 2),
    }
    notes = [
        "Each study runs its quick profile exactly as `python -m convergence run NAME --seed S` would, at seeds "
        "drawn from this study's seed; a row fails when any seed fails or is inconclusive.",
        "The quick report's CPU, the sum over studies of each one's median seed: "
        f"{params['quick_report_cpu_ref']:.1f} ref "
        "units (each study's median in params.median_cpu_ref; a seed's CPU is its own thread's and its blocks' on the "
        "workers, so it does not depend on the studies run beside it, up to the machine's shared caches).",
    ]
    return StudyResult(
        study=NAME, profile=profile, seed=seed, params=params, checks=checks, plots={"": [plot]}, notes=notes
    )


def quick_profiles_study(studies: Sequence[Study]) -> Study:
    """The study over the quick profiles of ``studies``."""
    return Study(
        NAME,
        "quick profiles over seeds: every study's quick profile passes at every seed",
        partial(execute, studies=tuple(studies)),
        in_report=False,
    )
