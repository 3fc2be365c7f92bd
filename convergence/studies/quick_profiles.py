"""Study ``quick-profiles``: every other study's quick profile over many seeds.

The README's first command runs the quick profiles; its verdict must not depend on the seed. For each study, its
quick profile runs at ``SEEDS`` seeds (10 at this study's full profile; 6 at its quick one, the fewest whose row can
decide at calibration's rate target), drawn from this study's seed alone, and ``quick_profile_passes`` asks that it
passes at every one (``over_seeds.rate_check``: a false failure at one of 10 seeds has probability at most
1 - 0.99^10 = 0.096 when every claim holds, each study's family-wise rate being 1%; an undecided seed misses the
target too, and that chance is not bounded; resolution: a per-seed rate of unwanted verdicts of 0.21 is caught with
probability 90% at 10 seeds, 0.32 at 6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from ..output import StudyResult
from ..runtime import STREAM_KEYS
from ..statistics import PASS, Check
from .base import ProgressFactory, Study
from .over_seeds import rate_check, rate_plot, study_seeds

NAME = "quick-profiles"
STUDY_KEY = STREAM_KEYS[NAME]
SEEDS = {"quick": 6, "full": 10}


def quick_profile_rows(studies: Sequence[Study], seed: int, count: int, progress: ProgressFactory) -> list[Check]:
    """``quick_profile_passes`` per study: its quick profile at ``count`` seeds must pass at every one."""
    rows = []
    for index, study in enumerate(studies):
        results = [
            study.execute("quick", study_seed, progress) for study_seed in study_seeds(seed, index, count, STUDY_KEY)
        ]
        row = rate_check("quick_profile_passes", [r.verdict for r in results], PASS, {"study": study.name})
        missed = "; ".join(
            f"seed {r.seed}: "
            + ", ".join(f"{c.name} {c.config} {c.verdict}" for c in r.checks if c.claim and c.verdict != PASS)
            for r in results
            if r.verdict != PASS
        )
        rows.append(replace(row, note=f"{row.note}; not passed: {missed}") if missed else row)
    return rows


def execute(profile: str, seed: int, progress: ProgressFactory, studies: Sequence[Study] = ()) -> StudyResult:
    checks = quick_profile_rows(studies, seed, SEEDS[profile], progress)
    plot = rate_plot("share of seeds at which the study's quick profile passes", "study", checks, target=False)
    params = {"seeds_per_study": SEEDS[profile], "studies": [study.name for study in studies]}
    notes = [
        "Each study runs its quick profile exactly as `python -m convergence run NAME --seed S` would, at seeds "
        "drawn from this study's seed; a row fails when any seed fails or is inconclusive."
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
