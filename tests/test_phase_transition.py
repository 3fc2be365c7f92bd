"""Model F's phase transition below beta_c: runs lingering near -1 at the horizon are followed until they collapse,
the two-token chain lets a pair at 1 + rho = 1e-20 leave -1 (exact antipodality would be kept), and the phase map's
difference in standard errors, and the runs each cell is planned to take."""

import math
import re

import numpy as np
import pytest

import verify
from convergence import _experiments as pt
from convergence._experiments import (
    DELTA,
    MAX_UNDECIDED,
    PHASE_DESIGNS,
    pending_runs,
    planned_paths,
    probability_check,
    run_until_decided,
)
from convergence._models import FedorovModel, TwoTokenOverlapChain
from convergence._paths import fixed_overlap, fixed_state, overlap, path_states, simulate
from convergence._statistics import confidence_z, excess_resolution, family_confidence, z_confidence

CHAIN = TwoTokenOverlapChain(FedorovModel(tokens=2, dim=4, beta=0.5268, sigma=1.0))  # 0.8 beta_c(4)


def test_the_full_phase_map_covers_four_dimensions_and_eight_betas_around_beta_c():
    design = PHASE_DESIGNS["full"]
    assert len(design.dims) >= 4
    for dim in design.dims[1:]:
        betas = pt.beta_grid(dim, design)
        beta_c = float(verify.critical_beta(dim)[1])
        assert len(betas) >= 8 and min(betas) < beta_c < max(betas)


def test_path_states_continue_each_path_from_its_own_state_whatever_the_block_size():
    x0 = simulate(CHAIN, 10, 0.1, 9, 0, (7,), fixed_overlap(-0.3), block_paths=4)
    runs = [simulate(CHAIN, 20, 0.2, 9, 0, (8,), path_states(x0), block_paths=b) for b in (2, 9)]
    np.testing.assert_array_equal(runs[0], runs[1])
    same_start = simulate(CHAIN, 20, 0.2, 9, 0, (8,), path_states(np.repeat(x0[:1], 9, axis=0)), block_paths=4)
    np.testing.assert_array_equal(same_start, simulate(CHAIN, 20, 0.2, 9, 0, (8,), fixed_state(x0[0]), block_paths=4))
    with pytest.raises(ValueError, match="states hold 9 paths"):
        simulate(CHAIN, 2, 0.1, 12, 0, (8,), path_states(x0), block_paths=12)


def test_below_beta_c_runs_lingering_near_minus_one_are_followed_until_they_collapse():
    """d = 4, beta = 0.8 beta_c, rho_0 = -0.9, T = 40: some runs are still near -1 at T (the antipodal end repels at
    rate lambda_- > 0, slowly near beta_c); followed, every one of them collapses. Runs stop once decided, so a run
    takes fewer layers than the horizon's on average; no number depends on the block size."""
    runs = [run_until_decided(CHAIN, -0.9, 40.0, 0.01, 200, 3, (1,), block) for block in (200, 64)]
    (rho, depth, note), (other, _, _) = runs
    np.testing.assert_array_equal(rho, other)
    assert int(re.search(r"(\d+) pending at T", note).group(1)) > 0  # the finite-horizon bias the following removes
    assert np.all(rho > 1 - DELTA) and ": 0 still pending" in note, note
    assert depth == 4000 and float(re.search(r"on average (\d+) layers per run \(T is 4000\)", note).group(1)) < 4000


def test_a_run_at_an_attracting_end_closer_than_the_switching_table_is_not_followed():
    """Above beta_c both ends attract: a run within 1e-16 of -1 (or +1) moves closer when followed, and its switching
    bound, taken at the table's smallest distance, cannot improve; below beta_c the antipodal end repels, so a run
    there is followed until it leaves."""
    rho = np.array([-1.0, 1.0, -1 + 1e-3])
    above = 1.25 * float(verify.critical_beta(4)[1])
    bound_above = pending_runs(rho, 4, above, 0.0)  # threshold 0: every run with a positive bound counts
    assert not bound_above[0] and not bound_above[1] and bound_above[2]
    below = 0.8 * float(verify.critical_beta(4)[0])
    assert pending_runs(rho, 4, below, 1e-3)[0]


def test_a_pair_at_one_plus_rho_1e_minus_20_still_leaves_minus_one_below_beta_c():
    """The chain carries x_1 + x_2 to full relative precision (1 + rho computed as 1 + c would read 0 here), so the
    repelling antipodal end is not made absorbing by rounding; an exactly antipodal pair does stay (the map keeps
    x_2 = -x_1): that is the artefact, and the reason the chain must not round a near-antipodal pair onto it."""
    s = math.sqrt(2e-20)
    near = np.array([[1.0, 0.0], [-math.sqrt(1 - s * s), s]])
    x = simulate(CHAIN, 20000, 400.0, 16, 0, (2,), fixed_state(near), block_paths=16)
    assert np.all(overlap(x) > -1 + DELTA)
    exact = simulate(CHAIN, 200, 2.0, 4, 0, (2,), fixed_state(np.array([[1.0, 0.0], [-1.0, 0.0]])), block_paths=4)
    np.testing.assert_array_equal(overlap(exact), -1.0)


def test_the_phase_map_measures_differences_in_binomial_standard_errors():
    assert pt.standard_error_units(0.0, 0.0, 2000) == 0.0
    q = (100 + 0.5) / 2001
    assert pt.standard_error_units(0.05, 0.04, 2000) == pytest.approx(0.01 / math.sqrt(q * (1 - q) / 2000), rel=1e-12)
    assert pt.standard_error_units(0.01, 0.0, 2000) > 3  # 20 of 2000 where none can end antipodal: far off


def _family_z(profile: str) -> float:
    design = PHASE_DESIGNS[profile]
    grid_points = sum(len(pt.beta_grid(dim, design)) for dim in design.dims)
    return confidence_z(family_confidence(pt.family_size(design, grid_points)))


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_a_cell_predicted_near_one_half_takes_every_run_and_one_near_an_end_a_quarter(profile):
    design, z = PHASE_DESIGNS[profile], _family_z(profile)
    assert planned_paths(design, 0.5, z) == design.paths
    assert planned_paths(design, 0.0, z) == planned_paths(design, 1.0, z) == design.paths // 4
    sizes = [planned_paths(design, p, z) for p in np.linspace(0.0, 0.5, 26)]
    assert sizes == sorted(sizes)  # more runs as the binomial variance grows


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_planned_cells_resolve_their_targets_when_the_prediction_holds(profile):
    """Wherever the plan cuts the runs, binomial counts at the planned number give a probability check whose
    resolution, with the largest allowance the undecided check lets through (2%), meets the target in at least 99%
    of draws, and an undecided check whose resolution meets its own target (cells at the budget run as before)."""
    design, z = PHASE_DESIGNS[profile], _family_z(profile)
    rng = np.random.default_rng(3)
    planned = [(p, planned_paths(design, p, z)) for p in np.linspace(0.0, 1.0, 81)]
    cut = [(p, n) for p, n in planned if n < design.paths]
    assert len(cut) >= 8
    for p, n in cut:
        counts = rng.binomial(n, p, size=400)
        resolutions = [
            probability_check(k, n, p, MAX_UNDECIDED, z_confidence(z), {}, target=design.probability_target).resolution
            for k in counts
        ]
        assert np.mean(np.array(resolutions) <= design.probability_target) >= 0.99, (p, n)
        assert excess_resolution(n, MAX_UNDECIDED, z) <= design.fraction_target


def test_a_wrong_prediction_near_zero_is_not_passed_at_its_planned_runs():
    """The plan follows the prediction, not the runs: a cell predicted at 0 whose true probability is 0.1 (more than
    the target 0.075 off) gets a quarter of the runs, and its check passes in at most 10% of draws (90% power)."""
    design, z = PHASE_DESIGNS["full"], _family_z("full")
    n = planned_paths(design, 0.0, z)
    assert n < design.paths
    counts = np.random.default_rng(4).binomial(n, 0.1, size=400)
    verdicts = [probability_check(k, n, 0.0, 0.0, z_confidence(z), {}).verdict for k in counts]
    assert verdicts.count("pass") <= 0.1 * len(verdicts)


def test_a_budget_too_small_for_the_target_is_taken_whole_and_its_check_cannot_pass():
    """With 40 runs a cell cannot resolve the target: the plan takes all 40, and the check is inconclusive for the
    true claim (0 of 40 antipodal, predicted 0) and never passes a near miss (true probability 0.05, predicted 0)."""
    from dataclasses import replace

    design, z = replace(PHASE_DESIGNS["full"], paths=40), _family_z("full")
    assert planned_paths(design, 0.0, z) == 40
    true_claim = probability_check(0, 40, 0.0, 0.0, z_confidence(z), {}, target=design.probability_target)
    assert true_claim.verdict == "inconclusive" and true_claim.resolution > design.probability_target
    counts = np.random.default_rng(5).binomial(40, 0.05, size=200)
    verdicts = {probability_check(k, 40, 0.0, 0.0, z_confidence(z), {}).verdict for k in counts}
    assert "pass" not in verdicts
