"""What the studies over seeds (``calibration``, ``quick_profiles``, ``mutant_seeds``) share: the seeds of their
runs, drawn from the study's own seed and stream key, and ``rate_check``, the share of seeds at which a run decided
as wanted against its target, with its figure ``rate_plot``.

A true claim must pass at every seed (a false failure at one of ``runs`` seeds has probability at most
1 - (1 - FAMILY_ALPHA)^runs); a mutant must be rejected at ``REJECT_SHARE`` of them, with the chance of fewer,
P(Binomial(runs, power) < k), at the runs' estimated power. Intervals are Wilson intervals at ``CONFIDENCE``; the
resolution is the per-run rate of unwanted verdicts caught with probability 90%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .._output import Curve, Plot
from .._runtime import seed_words
from .._statistics import FAIL, FAMILY_ALPHA, INCONCLUSIVE, PASS, Check, confidence_z, detection_rate, wilson

REJECT_SHARE = 0.9  # a mutant at or beyond the target is rejected at this share of seeds
CONFIDENCE = 0.99
# A rate row may miss a per-run rate of unwanted verdicts (false failures or undecided runs of a true claim, misses
# of a mutant) up to this: a few seeds cannot certify a 1% rate, only catch a check that errs this often
RATE_TARGET = 0.35


def study_seeds(seed: int, index: int, count: int, key: int) -> list[int]:
    """The ``count`` seeds of the ``index``-th run (a case, a study) of a study over seeds: a function of that study's
    ``seed`` and stream ``key`` alone; the first k of them do not depend on ``count``."""
    state = seed_words(seed, (key, index), count)
    return [int(s) for s in state]


def rate_plot(title: str, xlabel: str, checks: Sequence[Check], target: bool = True) -> Plot:
    """The rate rows of ``rate_check`` as a figure: each row's share of seeds with its Wilson interval, and its target
    share when ``target``."""
    x = list(range(len(checks)))
    measured = Curve(
        "measured (Wilson 99%)",
        x,
        [c.estimate for c in checks],
        [c.ci[0] for c in checks],
        [c.ci[1] for c in checks],
        style="points",
    )
    wanted = [Curve("target", x, [c.expected for c in checks], style="points")] if target else []
    return Plot(title, xlabel, "share", [measured, *wanted])


def rate_check(
    name: str,
    verdicts: Sequence[str],
    wanted: str,
    config: dict,
    misses: Sequence[float] = (),
    sizes: Sequence[int] = (),
    per_run_rate: float | None = None,
    undecided_allowed: bool = False,
) -> Check:
    """The share of seeds with the ``wanted`` verdict, against its target. ``verdicts``: one per seed (a public
    check's outcome, a study's result, or the inner verdict a mutant met); for ``wanted`` = fail, ``misses`` are the
    runs' estimated chances of missing the mutant (1 for a run that did not reject it, ``run_miss_probability``);
    ``sizes`` the samples or paths at which each run decided, when it sampled in stages.

    For ``wanted`` = pass: every seed must pass; or, with ``per_run_rate`` (the false-failure rate each run promises,
    e.g. a public check's 1%), at most k seeds may miss, k the fewest with P(Binomial(runs, per_run_rate) > k) <=
    per_run_rate, so that many seeds (100) do not turn a 1% rate per run into a row that misses by chance.
    ``undecided_allowed`` (with ``wanted`` = pass): an inconclusive seed counts as wanted, the row counting false
    failures alone (a true claim at depths too shallow to decide it must still never fail)."""
    runs = len(verdicts)
    counts = {v.value: list(verdicts).count(v) for v in (PASS, FAIL, INCONCLUSIVE)}
    hits = list(verdicts).count(wanted) + (counts[INCONCLUSIVE.value] if undecided_allowed else 0)
    lo, hi = wilson(hits, runs, confidence_z(CONFIDENCE))
    if wanted == PASS:
        expected = 1.0
        allowed, chance, target = _pass_target(runs, per_run_rate, undecided_allowed)
        verdict = PASS if runs - hits <= allowed else FAIL
    else:
        if len(misses) != runs:
            raise ValueError(f"misses must hold one chance per verdict ({runs}), got {len(misses)}")
        verdict = PASS if hits >= REJECT_SHARE * runs else FAIL
        expected = REJECT_SHARE
        k = int(np.ceil(REJECT_SHARE * runs))
        power = 1.0 - float(np.mean(misses))  # estimated at the measured effects
        chance = _below(runs, k, power)
        target = (
            f"rejected at >= {k} of {runs} seeds (estimated power per run {power:.3g}: fewer with probability "
            f"{chance:.2g}; at exactly 90% power it would be {_below(runs, k, REJECT_SHARE):.2f})"
        )
    # fails at `allowed` + 1 unwanted verdicts: the per-run rate of them caught with probability 90%
    if wanted != PASS:
        allowed = runs - int(np.ceil(REJECT_SHARE * runs))
    resolution = detection_rate(runs, allowed + 1)
    decided = f"decided at {min(sizes)}..{max(sizes)} samples or paths per run; " if sizes else ""
    note = (
        f"{counts['pass']} pass, {counts['fail']} fail, {counts['inconclusive']} inconclusive of {runs} seeds; "
        f"target: {target}; {decided}resolution: a per-run rate {resolution:.2f} of unwanted verdicts is caught "
        "with probability 90%" + ("" if verdict == PASS else "; TARGET MISSED")
    )
    return Check(
        name,
        expected,
        hits / runs,
        (lo, hi),
        verdict,
        config,
        0.0,
        CONFIDENCE,
        chance,
        note=note,
        resolution=resolution,
        target=RATE_TARGET,
    )


def _pass_target(runs: int, per_run_rate: float | None, undecided_allowed: bool) -> tuple[int, float, str]:
    """A true claim's row: the seeds that may fail, the chance of more failing falsely, and the target's text."""
    if per_run_rate is None:
        chance = 1.0 - (1.0 - FAMILY_ALPHA) ** runs
        target = (
            f"no seed fails, undecided ones allowed (a false failure at one of {runs} seeds: at most {chance:.3f})"
            if undecided_allowed
            else f"every seed passes (a false failure at one of {runs} seeds: at most {chance:.3f}; an undecided "
            "seed at the budget has no such bound, and also misses the target)"
        )
        return 0, chance, target
    allowed = next(k for k in range(runs + 1) if 1.0 - _below(runs, k + 1, per_run_rate) <= per_run_rate)
    chance = 1.0 - _below(runs, allowed + 1, per_run_rate)
    target = (
        f"at most {allowed} of {runs} seeds fail, undecided ones allowed (more than {allowed} false failures "
        f"at a per-run rate {per_run_rate:g}: probability {chance:.2g})"
        if undecided_allowed
        else f"at least {runs - allowed} of {runs} seeds pass (more than {allowed} false failures at a per-run "
        f"rate {per_run_rate:g}: probability {chance:.2g}; an undecided seed has no such bound, and counts "
        "against the target too)"
    )
    return allowed, chance, target


def _below(runs: int, k: int, p: float) -> float:
    """P(Binomial(runs, p) < k)."""
    return float(sum(math.comb(runs, j) * p**j * (1 - p) ** (runs - j) for j in range(k)))
