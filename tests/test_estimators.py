"""Estimators on synthetic data whose answer is known exactly."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from convergence._statistics import (
    FAIL,
    INCONCLUSIVE,
    NO_TARGET,
    NO_TARGET_TEXT,
    PASS,
    Check,
    bootstrap_counts,
    combine_verdicts,
    confidence_z,
    detectable_effect,
    effect_verdict,
    fit_order,
    limit_verdict,
    log_log_slope,
    noise_floor_flags,
    order_verdict,
    plateau,
    pre_asymptotic_flags,
    scale_family_interval,
    z_confidence,
)

STEPS = 1.0 / np.array([8, 16, 32, 64, 128])


@given(st.floats(0.1, 2.0), st.floats(1e-3, 1e3))
def test_slope_of_exact_power_law(order, constant):
    assert_allclose(log_log_slope(STEPS, constant * STEPS**order), order, rtol=1e-10)


def test_bootstrap_counts_are_resamples(rng):
    counts = bootstrap_counts(rng, 50, 300)
    assert counts.shape == (300, 50)
    assert_array_equal(counts.sum(axis=1), 50)
    # Each path is drawn Binomial(50, 1/50) times per replicate: mean 1, variance 49/50.
    assert abs(counts.mean() - 1.0) < 4.5 * np.sqrt(0.98 / counts.size)


@pytest.mark.parametrize("paths", [50, 300_000])
def test_bootstrap_counts_are_the_multiplicities_of_one_draw_of_indices(paths):
    """Drawn a batch of replicates at a time (3 replicates a batch at 300000 paths), the multiplicities are those of
    one (replicates, paths) draw of indices; float64 counts hold the same numbers."""
    indices = np.random.default_rng(5).integers(0, paths, size=(7, paths))
    expected = np.stack([np.bincount(row, minlength=paths) for row in indices])
    assert_array_equal(bootstrap_counts(np.random.default_rng(5), paths, 7), expected)
    floats = bootstrap_counts(np.random.default_rng(5), paths, 7, np.float64)
    assert floats.dtype == np.float64
    assert_array_equal(floats, expected)


def test_fit_order_exact_when_every_path_has_the_same_rate(rng):
    # sq_errors[p, l] = Z_p^2 h_l^(2 p): every resample has RMS exactly proportional to h^p.
    z2 = rng.standard_normal(200) ** 2
    fit = fit_order(STEPS, z2[:, None] * STEPS[None, :] ** 1.0, bootstrap_counts(rng, 200, 500))
    assert_allclose([fit.order, *fit.order_ci], 0.5, rtol=1e-10)
    assert_allclose(fit.local_orders, 0.5, rtol=1e-10)


def test_fit_order_interval_covers_the_true_order_on_noisy_data(rng):
    # Independent per-level noise: the 99% interval must contain the true order in most seeds.
    covered = 0
    for trial in range(40):
        noise = np.random.default_rng(trial).exponential(size=(400, STEPS.size))
        fit = fit_order(STEPS, noise * STEPS**1.4, bootstrap_counts(np.random.default_rng(1000 + trial), 400, 400))
        covered += fit.order_ci[0] <= 0.7 <= fit.order_ci[1]
    # With nominal coverage 0.99, P(covered <= 35 of 40) < 1e-4 (binomial), so this fails only if
    # the interval really undercovers.
    assert covered >= 36


def test_fit_order_rejects_bad_input(rng):
    counts = bootstrap_counts(rng, 3, 100)
    with pytest.raises(ValueError, match="sq_errors"):
        fit_order(STEPS, np.ones((3, 2)), counts)
    with pytest.raises(ValueError, match="finite"):
        fit_order(STEPS[:2], np.array([[1.0, np.nan]] * 3), counts)


def test_flags(rng):
    # Levels 0-1 follow h^1 (pre-asymptotic for expected order 1/2), the rest h^(1/2).
    rms = np.array([4.0, 2.0, 2.0**-0.5 * 2.0, 1.0, 2.0**-0.5])
    sq = np.tile(rms**2, (50, 1))
    fit = fit_order(STEPS, sq, bootstrap_counts(rng, 50, 200))
    assert_array_equal(pre_asymptotic_flags(fit, 0.5, 0.05), [True, False, False, False, False])
    assert_array_equal(noise_floor_flags(fit, floor=0.34), [False, False, False, True, True])


@pytest.mark.parametrize(
    ("ci", "usable", "verdict"),
    [
        ((0.45, 0.55), 5, PASS),
        ((0.30, 0.42), 5, FAIL),
        ((0.58, 0.7), 5, FAIL),
        ((0.52, 0.6), 5, PASS),
        ((0.1, 0.9), 5, INCONCLUSIVE),
        ((0.45, 0.55), 2, INCONCLUSIVE),
    ],
)
def test_order_verdict(ci, usable, verdict):
    resolution = detectable_effect(ci, 0.05, 0.99)  # (0.1, 0.9): 0.65, above the target
    assert order_verdict(ci, 0.5, 0.05, resolution, target=0.3, usable_levels=usable) == verdict


def test_a_statistical_claim_check_passes_only_at_a_stated_resolution_within_its_target():
    def verdict(**fields):
        return Check("x", 0.0, 0.0, (-1.0, 1.0), PASS, **fields).verdict

    assert verdict(resolution=0.2, target=0.25) == PASS
    assert verdict(resolution=0.3, target=0.25) == INCONCLUSIVE
    assert verdict() == INCONCLUSIVE  # no resolution, no target
    assert verdict(resolution=0.2) == INCONCLUSIVE
    assert verdict(resolution=float("nan"), target=1.0) == INCONCLUSIVE
    assert "resolution 0.3 > target 0.25" in Check("x", 0.0, 0.0, (-1.0, 1.0), PASS, resolution=0.3, target=0.25).note
    # exact and certified checks (no chance of a false failure) and findings decide without one
    assert verdict(false_failure_rate=0.0) == PASS
    assert verdict(claim=False) == PASS
    assert Check("x", 0.0, 0.0, (-1.0, 1.0), FAIL).verdict == FAIL
    # an interval that decides alone (a rejection, an order above its floor) says so: NO_TARGET, "none needed"
    decided = Check("x", 0.0, 0.0, (-1.0, 1.0), PASS, target=NO_TARGET)
    assert decided.verdict == PASS and decided.to_dict()["target"] == NO_TARGET_TEXT
    assert Check("x", 0.0, 0.0, (-1.0, 1.0), PASS, resolution=0.1, target=0.2).to_dict()["target"] == 0.2


def test_plateau_recovers_exact_model():
    a, b, q = 3.0, 0.02, 1.0
    ms = (a * STEPS**q + b)[None, :]
    assert_allclose(plateau(STEPS, ms, np.array([q])), b, rtol=1e-10)
    assert_allclose(plateau(STEPS, a * STEPS[None, :] ** q, np.array([q])), 0.0, atol=1e-12)


def test_limit_verdict_and_combination():
    assert limit_verdict((-1e-4, 1e-4), allowance=2e-4, resolution=1e-3) == PASS
    assert limit_verdict((5e-4, 9e-4), allowance=2e-4, resolution=1e-3) == FAIL
    assert limit_verdict((-1e-4, 2e-3), allowance=2e-4, resolution=1e-3) == INCONCLUSIVE
    assert combine_verdicts([PASS, PASS]) == PASS
    assert combine_verdicts([PASS, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine_verdicts([INCONCLUSIVE, FAIL]) == FAIL
    assert combine_verdicts([]) == INCONCLUSIVE


def test_findings_are_reported_but_do_not_decide_the_verdict():
    from convergence._output import StudyResult, to_markdown
    from convergence._statistics import Check

    claim = Check("rate", 1.0, 1.0, (0.9, 1.1), "pass", resolution=0.2, target=0.25)
    finding = Check("rate", 1.0, 0.5, (0.4, 0.6), "fail", {"model": "F"}, claim=False)
    result = StudyResult(study="s", profile="quick", seed=0, params={}, checks=[claim, finding])
    assert result.verdict == "pass"
    assert "`rate` (finding)" in to_markdown(result) and "**fail**" in to_markdown(result)
    assert (
        StudyResult(
            study="s", profile="quick", seed=0, params={}, checks=[claim, Check("rate", 1.0, 0.5, (0.4, 0.6), "fail")]
        ).verdict
        == "fail"
    )


def test_effect_verdict_fails_outside_the_band_and_is_inconclusive_without_resolution():
    assert effect_verdict((0.2, 0.3), 0.0, 0.1, 0.05, 0.1) == FAIL  # interval above expected + allowance
    assert effect_verdict((-0.3, -0.2), 0.0, 0.1, 0.05, 0.1) == FAIL
    assert effect_verdict((-0.05, 0.05), 0.0, 0.0, 0.2, 0.1) == INCONCLUSIVE  # cannot see an effect of 0.1
    assert effect_verdict((-0.05, 0.05), 0.0, 0.0, float("inf"), 0.1) == INCONCLUSIVE  # no scale
    assert effect_verdict((-0.05, 0.05), 0.0, 0.0, 0.08, 0.1) == PASS
    assert effect_verdict((float("nan"), 0.05), 0.0, 0.0, 0.08, 0.1) == FAIL


@given(st.floats(0.5, 0.999999))
def test_confidence_z_is_the_two_sided_normal_quantile(confidence):
    from scipy import stats

    z = confidence_z(confidence)
    assert_allclose(stats.norm.cdf(z) - stats.norm.cdf(-z), confidence, rtol=1e-12)


@pytest.mark.parametrize("paths", [1, 2, 7, 64, 101])
def test_bootstrap_medians_equal_the_medians_of_the_same_resamples(paths):
    """Sorted once and read off cumulative multiplicities, the medians equal np.median of each resample (drawn as
    rng.integers(0, paths, paths) in turn) bit for bit, ties included."""
    from convergence._statistics import bootstrap_medians

    values = np.round(np.random.default_rng(paths).standard_normal((paths, 2, 3)), 1)  # rounding makes ties
    fast = bootstrap_medians(values, np.random.default_rng(5), 30)
    rng = np.random.default_rng(5)
    direct = np.stack([np.median(values[rng.integers(0, paths, paths)], axis=0) for _ in range(30)])
    np.testing.assert_array_equal(fast, direct)


@pytest.mark.parametrize(("paths", "window"), [(20_000, None), (20_000, 0), (20_000, 3), (100_000, None)])
def test_bootstrap_medians_read_off_a_window_of_ranks_are_the_medians_of_the_same_resamples(paths, window):
    """The ranks are read off a window of sorted positions (about 12 standard deviations wide by default; 0 and 3
    send most resamples to the whole order; at 100000 paths the 12 replicates come in two batches): np.median of
    each resample, bit for bit."""
    from convergence._statistics import bootstrap_medians

    values = np.round(np.random.default_rng(paths).standard_normal((paths, 3)), 2)  # ties
    fast = bootstrap_medians(values, np.random.default_rng(6), 12, window)
    rng = np.random.default_rng(6)
    direct = np.stack([np.median(values[rng.integers(0, paths, paths)], axis=0) for _ in range(12)])
    np.testing.assert_array_equal(fast, direct)


@pytest.mark.parametrize("paths", [3, 1001, 300_000])
def test_bootstrap_means_drawn_a_batch_at_a_time_are_those_of_one_draw(paths):
    """Batches of replicates continue the generator's stream: the same resamples as one (replicates, paths) draw
    (at 300000 paths a batch holds 3 replicates), so the same means to rounding (one matrix product or several)."""
    from convergence._statistics import bootstrap_means, bootstrap_means_drawn

    values = np.random.default_rng(paths).standard_normal((paths, 4))
    drawn = bootstrap_means_drawn(values, np.random.default_rng(8), 20)
    whole = bootstrap_means(values, bootstrap_counts(np.random.default_rng(8), paths, 20))
    assert drawn.shape == (20, 4)
    assert_allclose(drawn, whole, rtol=1e-12, atol=1e-15)
    assert not np.allclose(drawn, bootstrap_means(values, bootstrap_counts(np.random.default_rng(9), paths, 20)))


def test_binomial_resolutions_are_exact():
    from scipy import stats

    from convergence._statistics import detection_rate, excess_resolution, wilson

    assert stats.binom.sf(1, 10, detection_rate(10, 2)) == pytest.approx(0.9, abs=1e-9)
    assert detection_rate(10, 1) == pytest.approx(1 - 0.1**0.1, rel=1e-9)  # P(at least one) = 0.9
    z = 2.576
    first = next(k for k in range(1, 401) if wilson(k, 400, z)[0] > 0.02)  # the fewest successes that fail
    assert stats.binom.sf(first - 1, 400, excess_resolution(400, 0.02, z)) == pytest.approx(0.9, abs=1e-9)
    assert excess_resolution(400, 0.0, z) == pytest.approx(detection_rate(400, 1))
    assert excess_resolution(50, 0.99, z) == float("inf")  # 50 runs can never show a fraction above 0.99


def test_resolution_ratio_needs_a_finite_resolution_and_a_finite_positive_target():
    """``Check.resolution_ratio``, the one resolution / target that quick-profiles and the power rows read."""
    from convergence._statistics import NO_TARGET, Check

    def ratio(resolution, target):
        return Check("x", 0.0, 0.0, (-1.0, 1.0), "inconclusive", resolution=resolution, target=target).resolution_ratio

    assert ratio(0.3, 0.4) == pytest.approx(0.75)
    assert ratio(0.5, 0.25) == pytest.approx(2.0)  # an undecided check: above 1
    for resolution, target in ((None, 0.4), (0.3, None), (float("nan"), 0.4), (0.3, NO_TARGET), (0.3, 0.0)):
        assert ratio(resolution, target) is None


def test_scale_family_interval_is_the_set_of_means_within_z_relative_errors(rng):
    """[m / (1 + z c), m / (1 - z c)] with c = se / m: both ends v satisfy |m - v| = z c v; a handful of spread-out
    values (z c >= 1) get the t interval, which stays finite."""
    values = 0.3 * rng.chisquare(1, 192)
    confidence = 0.999
    mean, lower, upper = scale_family_interval(values, confidence)
    z, c = confidence_z(confidence), values.std(ddof=1) / np.sqrt(values.size) / values.mean()
    assert_allclose(mean, values.mean(), rtol=1e-15)
    assert_allclose([abs(mean - lower) / lower, abs(upper - mean) / upper], [z * c, z * c], rtol=1e-12)
    assert lower < mean < upper and upper - mean > mean - lower  # skewed toward high means, like the data
    few = np.array([0.01, 0.02, 5.0])
    mean, lower, upper = scale_family_interval(few, confidence)
    half = confidence_z(confidence) * few.std(ddof=1) / np.sqrt(3)
    assert_allclose([lower, upper], [mean - half, mean + half], rtol=1e-12)


@pytest.mark.slow
def test_scale_family_interval_keeps_its_level_for_the_sampler_baseline_statistic():
    """The chaos study's sampler_baseline statistic, N |<x_0^2, mu_a - mu_b>|^2 / 2 averaged over nested N = 16..256
    on 192 paths of uniform tokens on S^4 (mean Var(x_0^2) = 3/35 - 1/25), 6000 replications at z = 2.5: each side
    misses at most 2 x the normal 0.0062, i.e. 75 times (measured at this seed: 42 low, 49 high; at p = 0.008,
    Binomial(6000, p) exceeds 75 with probability 1.1e-4). The t interval misses low 101 times."""
    rng = np.random.default_rng(20261204)
    sizes, variance, confidence = np.array([16, 32, 64, 128, 256]), 3 / 35 - 1 / 25, z_confidence(2.5)
    low = high = 0
    for _ in range(6000):
        a, b = (rng.standard_normal((192, 256, 5)) for _ in range(2))
        phi_a, phi_b = (np.cumsum(x[..., 0] ** 2 / np.vecdot(x, x), axis=1) for x in (a, b))
        values = np.mean([n * ((phi_a[:, n - 1] - phi_b[:, n - 1]) / n) ** 2 / 2 for n in sizes], axis=0)
        _, lower, upper = scale_family_interval(values, confidence)
        low, high = low + (upper < variance), high + (lower > variance)
    assert max(low, high) <= 2 * 0.0062 * 6000, (low, high)
