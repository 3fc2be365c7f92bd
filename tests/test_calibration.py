"""The calibration study (``convergence._studies.calibration``): its rows meet or miss their targets as stated, its
seeds depend on the study's seed alone, and its quick profile passes (slow: 10 seeds of three public checks)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convergence._checks import Outcome
from convergence._output import StudyResult
from convergence._runtime import STREAM_KEYS
from convergence._statistics import FAIL, INCONCLUSIVE, PASS, Check
from convergence._studies import STUDIES
from convergence._studies.calibration import run_miss_probability
from convergence._studies.over_seeds import rate_check, study_seeds


def _rate(name, outcomes, wanted):
    """``rate_check`` over public checks' outcomes, as the study calls it."""
    return rate_check(name, [o.verdict for o in outcomes], wanted, {}, [run_miss_probability(o) for o in outcomes])


def _outcome(verdict: str, effect_in_se: float = 20.0) -> Outcome:
    """A run whose one claim check has ``verdict``; a failing one measured ``effect_in_se`` standard errors out."""
    z = 2.5758293035489004
    check = Check(
        "drift_scale", 0.0, effect_in_se, (effect_in_se - z, effect_in_se + z), verdict, resolution=3.8, target=4.0
    )
    return Outcome("run", [check], params={"samples": 4096})


def test_a_true_claim_row_passes_only_when_every_seed_passes():
    assert _rate("decides_true_claim", [_outcome(PASS)] * 10, PASS).verdict == PASS
    missed = _rate("decides_true_claim", [_outcome(PASS)] * 9 + [_outcome(INCONCLUSIVE)], PASS)
    assert missed.verdict == FAIL and "TARGET MISSED" in missed.note and "1 inconclusive" in missed.note
    assert missed.false_failure_rate == pytest.approx(1 - 0.99**10)


def test_many_seeds_allow_the_false_failures_a_per_run_rate_explains():
    """With ``per_run_rate`` 1%: at most 1 miss of 10 (P(Binomial(10, 0.01) > 1) = 0.0043), at most 4 of 100
    (P(> 4) = 0.0034, while P(> 3) = 0.018 would exceed 1%); an undecided seed counts as a miss."""

    def row(passes, misses, miss=FAIL):
        outcomes = [_outcome(PASS)] * passes + [_outcome(miss)] * misses
        return rate_check("t", [o.verdict for o in outcomes], PASS, {}, per_run_rate=0.01)

    assert row(9, 1).verdict == PASS and row(8, 2).verdict == FAIL and row(9, 1, INCONCLUSIVE).verdict == PASS
    assert row(96, 4).verdict == PASS and row(95, 5).verdict == FAIL
    assert row(96, 4).false_failure_rate == pytest.approx(
        1 - sum(math.comb(100, k) * 0.01**k * 0.99 ** (100 - k) for k in range(5))
    )
    assert "at least 96 of 100 seeds pass" in row(96, 4).note


def test_a_never_fails_row_counts_false_failures_alone():
    """``undecided_allowed``: a shallow ladder's undecided seeds are no failure; 2 fails of 10 miss a 1% per-run rate
    (P(Binomial(10, 0.01) > 1) = 0.0043)."""

    def row(*verdicts):
        return rate_check("never_fails_true_claim", list(verdicts), PASS, {}, per_run_rate=0.01, undecided_allowed=True)

    assert row(*[INCONCLUSIVE] * 9, PASS).verdict == PASS
    assert row(*[INCONCLUSIVE] * 8, FAIL, PASS).verdict == PASS
    failed = row(*[PASS] * 8, FAIL, FAIL)
    assert failed.verdict == FAIL and "at most 1 of 10 seeds fail" in failed.note and "TARGET MISSED" in failed.note


def test_the_full_calibration_runs_every_brownian_registry_model_at_both_ladders():
    from convergence._models import MODELS
    from convergence._studies.calibration_cases import registry_cases

    chosen = registry_cases("full")
    brownian = [name for name, make in MODELS.items() if make().noise.brownian]
    assert len(brownian) >= 6 and len(chosen) == 4 * len(brownian)
    for name in brownian:
        labels = [c.label for c in chosen if f"registry {name} (" in c.label]
        assert len(labels) == 4 and {"strong" in label for label in labels} == {True, False}, labels
    assert all(not c.must_decide and c.seeds == 10 for c in chosen)
    assert {c.pass_share for c in chosen if "defaults" in c.label} == {True}
    assert {c.pass_share for c in chosen if "(4, 8, 16)" in c.label} == {False}


def test_a_mutant_row_needs_nine_rejections_in_ten_and_states_its_chance_of_missing():
    nine = _rate("rejects", [_outcome(FAIL)] * 9 + [_outcome(PASS)], FAIL)
    assert nine.verdict == PASS and nine.estimate == 0.9
    eight = _rate("rejects", [_outcome(FAIL)] * 8 + [_outcome(PASS)] * 2, FAIL)
    assert eight.verdict == FAIL
    # rejections far beyond the resolution: almost no chance of missing the target; near it, a real one
    assert _rate("rejects", [_outcome(FAIL)] * 10, FAIL).false_failure_rate < 1e-6
    assert _rate("rejects", [_outcome(FAIL, 3.8)] * 10, FAIL).false_failure_rate > 0.1


def test_case_seeds_depend_on_the_study_seed_alone():
    key = STREAM_KEYS["calibration"]
    expected = np.random.SeedSequence(0, spawn_key=(14, 1)).generate_state(10, dtype=np.uint32)
    assert key == 14 and study_seeds(0, 1, 10, key) == [int(v) for v in expected]
    seeds = set(study_seeds(0, 1, 10, key)) | set(study_seeds(0, 2, 10, key)) | set(study_seeds(1, 1, 10, key))
    assert len(seeds) == 30
    assert not STUDIES["calibration"].in_report  # run by name only: `report` runs the theorems' studies


@pytest.mark.slow
def test_the_quick_calibration_meets_its_targets():
    result = STUDIES["calibration"].run("quick", 0)
    assert result.verdict == PASS, [c.note for c in result.checks if c.verdict != PASS]
    assert np.all([c.estimate >= c.expected for c in result.checks])


def test_every_studys_quick_profile_runs_at_ten_seeds_and_must_pass_at_each():
    """``quick-profiles``: a study's quick profile must pass at every one of its seeds, which depend on this study's
    seed alone (and differ from study to study); its full profile takes 10 seeds, its quick one 3."""
    from convergence._studies import Study
    from convergence._studies.quick_profiles import SEEDS, STUDY_KEY, quick_profile_rows

    seen = []
    closest_seed = study_seeds(7, 0, 10, STUDY_KEY)[5]

    def study(name: str, failing_seed: int | None) -> Study:
        def execute(profile, seed, progress):
            seen.append((name, profile, seed))
            verdict = INCONCLUSIVE if seed == failing_seed else PASS
            resolution = 0.8 if seed == closest_seed else 0.5
            return StudyResult(
                study=name,
                profile=profile,
                seed=seed,
                params={},
                checks=[Check("x", 0.0, 0.0, (-1.0, 1.0), verdict, resolution=resolution, target=1.0)],
            )

        return Study(name, "stub", execute)

    assert SEEDS == {"quick": 6, "full": 10}
    one_undecided = study_seeds(7, 1, 10, STUDY_KEY)[3]
    rows, costs = quick_profile_rows(
        [study("a", None), study("b", one_undecided)], 7, 10, lambda total, name: lambda n: None
    )
    assert [(r.config["study"], r.verdict) for r in rows] == [("a", PASS), ("b", FAIL)]
    assert [len(costs[name]) for name in ("a", "b")] == [10, 10]
    assert "CPU per seed, ref units: " in rows[0].note
    assert "1 inconclusive" in rows[1].note and "TARGET MISSED" in rows[1].note
    assert f"not passed: seed {one_undecided}: x {{}} inconclusive" in rows[1].note  # which seed, which check
    # how close each profile came to undecided, for sizing it: the largest resolution / target over the seeds
    assert f"largest resolution / target over seeds 0.80 (x {{}} at seed {closest_seed})" in rows[0].note
    assert "largest resolution / target over seeds 0.50" in rows[1].note
    seeds = {index: study_seeds(7, index, 10, STUDY_KEY) for index in (0, 1)}
    assert [s for name, profile, s in seen if name == "a"] == seeds[0] and {p for _, p, _ in seen} == {"quick"}
    assert len(set(seeds[0]) | set(seeds[1]) | set(study_seeds(8, 0, 10, STUDY_KEY))) == 30
    assert study_seeds(7, 0, 3, STUDY_KEY) == seeds[0][:3]
    assert not STUDIES["quick-profiles"].in_report


def test_a_study_that_raises_at_a_seed_fails_its_row_and_the_sweep_goes_on():
    """A quick profile that raises at one seed (as ldm-stopping's once did, inside mpmath) is that seed's failure,
    named with its error; the other seeds and studies still run."""
    from convergence._studies import Study
    from convergence._studies.quick_profiles import STUDY_KEY, quick_profile_rows

    crashing_seed = study_seeds(3, 0, 10, STUDY_KEY)[1]

    def execute(profile, seed, progress):
        if seed == crashing_seed:
            raise ValueError("Could not find root within given tolerance")
        check = Check("x", 0.0, 0.0, (-1.0, 1.0), PASS, resolution=0.5, target=1.0)
        return StudyResult(study="a", profile=profile, seed=seed, params={}, checks=[check])

    crashing, fine = Study("a", "stub", execute), Study("b", "stub", execute)
    rows, costs = quick_profile_rows([crashing, fine], 3, 10, lambda total, name: lambda n: None)
    assert [r.verdict for r in rows] == [FAIL, PASS]
    assert [len(costs["a"]), len(costs["b"])] == [9, 10]  # a seed that raised has no cost
    assert "9 pass, 1 fail" in rows[0].note
    assert f"seed {crashing_seed}: raised ValueError: Could not find root" in rows[0].note


def test_the_power_studys_rows_over_seeds_need_every_seed_to_reject_and_to_pass():
    """``mutant-seeds``: a mutant row passes when its mutant is rejected at >= 90% of 6 seeds (every one), a true
    claim row when the claim passes at every seed; a row that is a finding at some seed is left out, by name."""
    from convergence._studies.mutant_seeds import SEEDS, seed_rows

    def power(seed: int, missed: bool, finding: bool) -> StudyResult:
        rejects = Check(
            "rejects",
            1.0,
            0.0 if missed else 1.0,
            (0.0, 1.0),
            FAIL if missed else PASS,
            {"mutant": "drift x 1.05"},
            false_failure_rate=0.01,
            target=float("inf"),
        )
        weak = Check(
            "rejects",
            1.0,
            1.0,
            (0.0, 1.0),
            PASS,
            {"mutant": "beta x 1.01"},
            claim=not finding,
            false_failure_rate=0.2,
            target=float("inf"),
        )
        true = Check("true_claim", 1.0, 1.0, (0.0, 1.0), PASS, {"check": "local"}, resolution=0.5, target=1.0)
        return StudyResult(study="power", profile="full", seed=seed, params={}, checks=[rejects, weak, true])

    assert SEEDS == 6
    rows, left_out = seed_rows([power(s, False, s == 3) for s in range(6)])
    assert [(r.name, r.verdict) for r in rows] == [("mutant_rejected", PASS), ("true_claim_passes", PASS)]
    assert left_out == ["rejects {'mutant': 'beta x 1.01'}"]
    assert rows[0].false_failure_rate == pytest.approx(1 - 0.99**6)  # P(Binomial(6, 0.99) < 6)
    missed, _ = seed_rows([power(s, s == 5, False) for s in range(6)])
    assert (
        missed[0].verdict == FAIL and missed[0].note.startswith("1 pass, 5 fail") and "TARGET MISSED" in missed[0].note
    )
    assert STUDIES["mutant-seeds"].in_report is False
