"""Study ``calibration``: how often the public checks decide, over many seeds, at their defaults.

A verdict is worth what it decides at a user's settings. Each case runs one public check (``convergence.checks``,
sampling in stages until it decides) on a model whose limit is known, for ``SEEDS`` seeds: the true claim, and the
claim with its drift x (1 + eps) for the case's mutants: 5% drift errors, and each check's target where it is a
drift error (the local check's pooled 1%, the strong check's 25% / 20%; the weak check's target is in standard
deviations of f, so its mutant is the 5% drift error only). Targets: no true claim fails and every true claim
passes at every seed; every mutant is rejected at >= 90% of the seeds.

Cases: the local check on model F (n = 2, d = 4; mutants 5% and 1%, the pooled target); the weak limit check on
model F (n = 2, d = 4, sigma = 1/2, f = <x_0, x_1>^2; mutant 5%); the strong check on model F (n = 2, d = 4, target
a 25% drift error; mutant 25%). The full profile adds model F with n = 2, d = 16 at the checks' defaults (local and
weak 5%, strong 20% = its default target).

Study checks (one per case and claim): ``decides_true_claim`` (estimate: the share of seeds that pass; a fail at
any seed, or any seed not decided, misses the target) and ``rejects`` (the share of seeds that fail; at least 9 of
10). These are measurements of the suite's decision rates, each with its chance of missing its target by chance:
a true claim fails at one of 10 seeds with probability at most 1 - 0.99^10 = 0.096 (each run's family-wise rate is
1%; a seed left undecided at the budget also misses the target, and that chance is not bounded); a mutant row's chance
is P(Binomial(10, power) < 9) with the per-run power estimated at the measured effects
(``mutants.miss_probability`` of each run's most decisive failing check, measured at the look that rejected, so
optimistic; at exactly 90% power it would be 0.26).
Intervals: Wilson at 99%.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..checks import (
    Outcome,
    check_local_consistency,
    check_strong_order,
    check_weak_limit,
)
from ..experiments import DriftScaled, miss_probability
from ..models import FedorovModel
from ..output import StudyResult
from ..runtime import STREAM_KEYS
from ..statistics import (
    FAIL,
    PASS,
)
from .base import ProgressFactory, Study
from .over_seeds import rate_check, rate_plot, study_seeds

NAME = "calibration"
STUDY_KEY = STREAM_KEYS[NAME]
SEEDS = 10


def overlap_squared(x: np.ndarray) -> np.ndarray:
    """f = <x_0, x_1>^2 of the first two tokens, per path."""
    return np.sum(x[:, 0] * x[:, 1], axis=-1) ** 2


Run = Callable[[FedorovModel, object, int], Outcome]


@dataclass(frozen=True)
class Case:
    """One public check on one model, for the true claim and its drift mutants x (1 + eps)."""

    label: str
    model: FedorovModel
    run: Run
    mutants: tuple[float, ...]
    options: dict = field(default_factory=dict)


def _local(model, claim, seed, **options) -> Outcome:
    return check_local_consistency(model, claim, seed=seed, **options)


def _weak(model, claim, seed, **options) -> Outcome:
    return check_weak_limit(model, claim, overlap_squared, seed=seed, near_misses=(), **options)


def _strong(model, claim, seed, **options) -> Outcome:
    return check_strong_order(model, claim, seed=seed, **options)


def cases(profile: str) -> list[Case]:
    small, wide = FedorovModel(2, 4), FedorovModel(2, 4, sigma=0.5)
    quick = [
        Case("local, model F n=2 d=4", small, _local, (0.05, 0.01)),
        Case("weak limit, model F n=2 d=4 sigma=1/2", wide, _weak, (0.05,)),
        Case(
            "strong, model F n=2 d=4, target 25%",
            small,
            _strong,
            (0.25,),
            {"depths": (8, 16, 32, 64), "first": 256, "budget": 2048, "target": 0.25},
        ),
    ]
    if profile == "quick":
        return quick
    default = FedorovModel(2, 16)
    return quick + [
        Case("local, model F n=2 d=16 (defaults)", default, _local, (0.05,)),
        Case("weak limit, model F n=2 d=16 (defaults)", default, _weak, (0.05,)),
        Case("strong, model F n=2 d=16 (defaults, target 20%)", default, _strong, (0.2,)),
    ]


def run_miss_probability(outcome: Outcome) -> float:
    """A run's estimated chance of missing the mutant it rejected, at the measured effect (its most decisive failing
    check, ``mutants.miss_probability``); 1 for a run that did not reject it."""
    failed = [c for c in outcome.checks if c.claim and c.verdict == FAIL]
    return min(miss_probability(c) for c in failed) if failed else 1.0


def execute(profile: str, seed: int, progress: ProgressFactory) -> StudyResult:
    chosen = cases(profile)
    advance = progress(sum(SEEDS * (1 + len(c.mutants)) for c in chosen), NAME)
    checks, rows = [], []
    for index, case in enumerate(chosen):
        seeds = study_seeds(seed, index, SEEDS, STUDY_KEY)
        true_claim = case.model.limit_sde()
        claims = [("true claim", true_claim, PASS)]
        claims += [(f"drift x (1 + {eps:g})", DriftScaled(true_claim, 1.0 + eps), FAIL) for eps in case.mutants]
        for label, claim, wanted in claims:
            outcomes = []
            for check_seed in seeds:
                outcomes.append(case.run(case.model, claim, check_seed, **case.options))
                advance(1)
            name = "decides_true_claim" if wanted == PASS else "rejects"
            checks.append(
                rate_check(
                    name,
                    [o.verdict for o in outcomes],
                    wanted,
                    {"case": case.label, "claim": label},
                    [run_miss_probability(o) for o in outcomes],
                    [o.sample_size for o in outcomes],
                )
            )
            rows.append((f"{case.label}: {label}", checks[-1]))
    plot = rate_plot(
        "share of seeds decided as wanted (pass for true claims, fail for mutants)", "case", [c for _, c in rows]
    )
    params = {
        "seeds_per_case": SEEDS,
        "cases": {
            c.label: {
                "mutants (drift x (1 + eps))": list(c.mutants),
                "options": {k: list(v) if isinstance(v, tuple) else v for k, v in c.options.items()},
            }
            for c in chosen
        },
        "rows": [label for label, _ in rows],
    }
    notes = [
        "Each case runs a public check (convergence.checks) with its staged looks, as a user would, at seeds drawn "
        "from the study's seed; the check's own family-wise false-failure rate is 1% and its chance of passing an "
        "effect of its target at most 10%, whichever look stops.",
        "The study's checks measure decision rates against targets; each states its chance of missing the target "
        "by chance (its false-failure rate), and the study's family-wise rate is their sum.",
        "Every study's quick profile over seeds is the study quick-profiles. The catalogue's other mutants "
        "(sigma^2, beta, (d-2)/2, the Stratonovich drift, a missing projection) over seeds are not yet in this "
        "study.",
    ]
    return StudyResult(
        study=NAME, profile=profile, seed=seed, params=params, checks=checks, plots={"": [plot]}, notes=notes
    )


STUDY = Study(
    NAME,
    "calibration: the public checks' decision rates over seeds (true claims pass, mutants fail)",
    execute,
    in_report=False,
)
