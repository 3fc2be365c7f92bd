"""Latent diffusion stopping (docs/models.md section 4): symbolic side, rigorous evaluation, sampler, estimator,
study."""

import json
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import verify
from convergence._cli import main
from convergence._experiments import LatentDesign, backward_samples
from convergence._models import (
    LatentSampler,
    discrete_variances,
    plugin_variances,
)
from convergence._statistics import bootstrap_counts, frechet_estimate, frechet_estimates
from verify._common import DOUBLE, working_bits, working_digits
from verify._derivations import latent_diffusion
from verify._rigorous import (
    BALLS,
    FLOATS,
    DerivativesByDimension,
    LatentSetting,
    certify_sign,
    distance,
    distance_derivative,
    monotone_criterion,
    optimal_dimension,
)

from .helpers import assert_equal_to_rounding

GEOMETRIC = [0.6**k for k in range(7)] + [1e-10, 1e-10]


def test_symbolic_derivations_verify():
    der = latent_diffusion()
    assert der.status == "verified", [c for c in der.checks if c["status"] != "verified"]


def test_distance_with_exact_score_reaches_the_truncation_error_at_t_equals_T():
    # With the exact score from the law at T the decoded coordinates are exact at t = T: only the dropped
    # variances remain (an identity independent of the closed form's time dependence).
    with mpmath.workdps(30):
        for d in range(10):
            exact = mpmath.fsum(map(mpmath.mpf, GEOMETRIC[d:]))
            assert mpmath.almosteq(verify.ldm_distance(GEOMETRIC, 2.0, d), exact, 1e-25, 1e-25)
    # at t = 0 nothing has been denoised: each kept coordinate has variance tau2(T) = 1 + e^{-4}(s^2 - 1)
    tau = [1 + np.exp(-4) * (s - 1) for s in GEOMETRIC]
    expected = sum((np.sqrt(tau[j]) - np.sqrt(GEOMETRIC[j])) ** 2 for j in range(3)) + sum(GEOMETRIC[3:])
    assert_allclose(float(verify.ldm_distance(GEOMETRIC, 0.0, 3)), expected, rtol=1e-13)


@settings(max_examples=25, deadline=None)
@given(t=st.floats(0.05, 1.95), start=st.sampled_from(["forward", "standard"]), seed=st.integers(0, 1000))
def test_analytic_time_derivative_equals_numerical_differentiation(t, start, seed):
    rng = np.random.default_rng(seed)
    variances = tuple(sorted(rng.uniform(0.01, 3.0, 4), reverse=True))
    hat = tuple(v * rng.uniform(0.8, 1.2) for v in variances)
    setting = LatentSetting(variances, 2.0, hat, start=start)
    numeric = mpmath.diff(lambda x: distance(mpmath.mp, setting, x, 4), t)
    assert mpmath.almosteq(distance_derivative(mpmath.mp, setting, mpmath.mpf(t), 4), numeric, 1e-10, 1e-12)


def test_switching_times_are_where_the_brute_force_optimal_dimension_changes():
    times = [float(x) for x in verify.ldm_switching_times(GEOMETRIC)]
    assert len(times) == len(GEOMETRIC) + 1 and times[-1] == 2.0 and times == sorted(times)
    setting = LatentSetting(tuple(GEOMETRIC))
    for d in range(3, 8):  # intervals (t_d, t_d+1) that are wider than the tiny last ones
        lo, hi = times[d - 1], times[d]
        if hi - lo > 1e-3:
            assert optimal_dimension(setting, (lo + hi) / 2) == d
    # closed form t_4 = T - log((1 - s^2) / (1 - 4 s^2)) / 2 with s^2 = 0.216
    assert_allclose(times[3], 2.0 - np.log((1 - 0.216) / (1 - 0.864)) / 2, rtol=1e-14)


def test_certified_sign_decides_true_false_and_undecided():
    assert certify_sign(lambda ctx, x: x - 0.5, 0.6, 1.0, +1) is True
    assert certify_sign(lambda ctx, x: x - 0.5, 0.0, 1.0, +1) is False
    assert certify_sign(lambda ctx, x: (x - 0.5) ** 2, 0.0, 1.0, +1, depth=8) is None  # touches 0 at 0.5


@given(st.floats(0.0, 1.9), st.floats(1e-9, 0.1), st.floats(0.0, 1.0))
@settings(max_examples=30, deadline=None)
def test_ball_enclosures_contain_every_value_of_their_box(lo, width, fraction):
    """Soundness: the distance's derivative over a box of times, in ball arithmetic, contains the derivative at a
    point of the box computed in 50-digit mpmath (a ball that covered only its midpoint would fail)."""
    setting = LatentSetting((1.0, 0.36, 0.1, 0.0), 2.0, (0.9, 0.4, 0.05, 0.0))
    point = lo + fraction * width
    with mpmath.workdps(50):
        value = distance_derivative(mpmath.mp, setting, mpmath.mpf(point), 4)
    with working_bits(136):
        enclosure = distance_derivative(BALLS, setting, BALLS.box(lo, lo + width), 4)
        assert enclosure.contains(BALLS.mpf(value)), (enclosure, value)
        assert enclosure.rad() < 1e3 * width  # an enclosure, not a ball of everything


def test_plugin_criterion_is_exact_for_one_coordinate():
    # One coordinate: monotone on [0, T] iff sigma_hat lies between s and 1 (certified both ways).
    for s2, q in ((0.3, 0.5), (0.3, 0.2), (2.0, 1.5), (2.0, 2.5), (0.3, 1.4)):
        setting = LatentSetting((s2,), 2.0, (q,))
        slope = lambda ctx, x, setting=setting: distance_derivative(ctx, setting, x, 1)
        monotone = certify_sign(slope, 0, 2.0, -1, strict=False)
        assert monotone is all(monotone_criterion(setting, 1)), (s2, q)


@pytest.mark.parametrize(
    "bad",
    [
        {"variances": [0.5, 1.0]},
        {"variances": [1.0, float("nan")]},
        {"t": 2.5},
        {"d": 4},
        {"T": 0.0},
        {"variances_hat": [1.0]},
    ],
)
def test_ldm_distance_rejects_bad_input_naming_the_parameter(bad):
    args = {"variances": [1.0, 0.5, 0.1], "t": 1.0, "d": 2, "T": 2.0, "variances_hat": None} | bad
    with pytest.raises(ValueError, match=r"variances|backward time|dimension|T must|variances_hat"):
        verify.ldm_distance(**args)


@pytest.mark.parametrize("method", ["sde", "ode"])
def test_sampler_matches_its_exact_discrete_law_and_is_block_independent(method):
    # Per-coordinate sample variances within 5 standard errors of the exact recursion (false-failure ~1e-5 per
    # coordinate); another block size gives the same result to rounding.
    sampler = LatentSampler((2.0, 0.5, 0.01), 2.0, method=method)
    design = LatentDesign(128, (2,), (0, 64, 128), paths=20_000, block_paths=4096)
    finals, recorded = backward_samples(sampler, design, 3, (99, 1))
    exact = discrete_variances(sampler, 128)[0]
    var = np.mean(finals[0] ** 2, axis=0)
    se = np.sqrt(2 * exact**2 / design.paths)
    assert np.all(np.abs(var - exact) <= 5 * se)
    assert_allclose(recorded[-1], finals[0], rtol=0, atol=0)
    other, _ = backward_samples(sampler, LatentDesign(128, (2,), (0, 64, 128), 20_000, block_paths=1000), 3, (99, 1))
    assert_equal_to_rounding(other, finals)


@pytest.mark.parametrize(
    ("method", "cap", "start"), [("sde", None, "forward"), ("ode", None, "standard"), ("sde", 100.0, "forward")]
)
@pytest.mark.parametrize(("steps", "record_every"), [(1024, 0), (1000, 7), (3, 1), (64, 16)])
def test_discrete_variances_equal_the_step_by_step_recursion(method, cap, start, steps, record_every):
    """The records summed in closed form between them equal v <- (1 + h (1 - c m_j))^2 v + a run one step at a time
    in plain floats (a zero variance makes the last factors tiny; the cap binds near the end)."""
    variances = (2.0, 0.5, 0.01, 0.0)
    sampler = LatentSampler(variances, 2.0, cap=cap, method=method, start=start)
    h, c = 2.0 / steps, 2.0 if method == "sde" else 1.0
    expected = []
    for j, q in enumerate(variances):
        v = 1.0 + math.exp(-4.0) * (q - 1.0) if start == "forward" else 1.0
        column = [v] if record_every else []
        for k in range(steps):
            m = 1.0 / (1.0 + math.exp(-2.0 * (2.0 - k * h)) * (q - 1.0))
            g = 1.0 + h * (1.0 - c * (m if cap is None else min(cap, m)))
            v = g * g * v + (2.0 * h if method == "sde" else 0.0)
            if record_every and (k + 1) % record_every == 0:
                column.append(v)
        expected.append(column or [v])
    assert_allclose(discrete_variances(sampler, steps, record_every), np.array(expected).T, rtol=1e-12)


def test_frechet_estimator_is_unbiased_after_correction_on_a_known_gaussian():
    # Samples from N(0, diag(a)) against N(0, diag(b)): FD = sum (sqrt a - sqrt b)^2 exactly.
    rng = np.random.default_rng(0)
    a, b = np.array([1.5, 0.4, 0.1]), np.array([1.0, 0.5, 0.0])
    x = rng.standard_normal((40_000, 3)) * np.sqrt(a)
    est = frechet_estimate(x, b, bootstrap_counts(rng, 40_000, 200))
    exact = np.sum((np.sqrt(a) - np.sqrt(b)) ** 2)
    assert abs(est.value - est.bias - exact) <= 4 * est.standard_error  # false-failure ~6e-5
    assert est.ci[0] <= est.value <= est.ci[1]


def test_frechet_estimates_of_every_leading_dimension_match_a_direct_computation():
    """One pass over the paths for every d against FD computed another way: the sample mean and biased covariance of
    the first d coordinates and a matrix square root (scipy's sqrtm), for the estimate and for two replicates."""
    from scipy.linalg import sqrtm

    rng = np.random.default_rng(4)
    x = rng.standard_normal((3000, 4)) @ rng.standard_normal((4, 4)) * 0.5
    target = np.array([1.0, 0.5, 0.2, 0.05])
    counts = bootstrap_counts(rng, 3000, 5)

    def direct(weights: np.ndarray, d: int) -> float:
        mean = weights @ x[:, :d]
        cov = (weights * (x[:, :d] - mean).T) @ (x[:, :d] - mean)
        root = np.sqrt(np.diag(target[:d]))
        return float(mean @ mean + np.trace(cov) + target.sum() - 2 * np.trace(sqrtm(root @ cov @ root)).real)

    estimates = frechet_estimates(x, target, counts, (0, 1, 2, 3, 4))
    assert estimates[0].value == target.sum()
    for d in range(1, 5):
        assert_allclose(estimates[d].value, direct(np.full(3000, 1 / 3000), d), rtol=1e-10)
        for r in (0, 3):
            assert_allclose(estimates[d].replicates[r], direct(counts[r] / 3000, d), rtol=1e-10)
    assert_allclose(frechet_estimate(x[:, :2], target, counts).replicates, estimates[2].replicates, rtol=1e-14)
    with pytest.raises(ValueError, match="dims"):
        frechet_estimates(x, target, counts, (5,))


def test_derivatives_by_dimension_give_distance_derivative_enclosure_for_enclosure():
    setting = LatentSetting((1.0, 0.36, 0.1, 0.0), 2.0, (0.9, 0.4, 0.05, 0.0))
    derivatives = DerivativesByDimension(setting)
    with working_bits(136):
        for box in (BALLS.box(0.25, 0.5), BALLS.box(1.9, 2.0), BALLS.mpf(1.5)):
            for d in (1, 3, 4):
                shared, alone = derivatives.slope(d)(BALLS, box), distance_derivative(BALLS, setting, box, d)
                assert (shared.mid(), shared.rad()) == (alone.mid(), alone.rad())  # arb's == compares points
    assert derivatives.slope(2)(mpmath.mp, mpmath.mpf(0.7)) == distance_derivative(
        mpmath.mp, setting, mpmath.mpf(0.7), 2
    )
    for d in range(1, 5):
        shared = certify_sign(derivatives.slope(d), 0, 2.0, -1, budget=4000, strict=False)
        alone = certify_sign(
            lambda ctx, box, d=d: distance_derivative(ctx, setting, box, d), 0, 2.0, -1, budget=4000, strict=False
        )
        assert shared == alone
    with pytest.raises(ValueError, match="latent dimension"):
        derivatives.slope(5)


def test_plugin_variances_are_seeded_second_moments():
    v = plugin_variances(np.array([4.0, 1.0]), 100_000, np.random.default_rng(1))
    assert_allclose(v, [4.0, 1.0], rtol=0.03)


@pytest.mark.slow  # a whole quick-profile study: minutes on 2 cores
def test_quick_ldm_stopping_study_passes(tmp_path):
    assert main(["run", "ldm-stopping", "--profile", "quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "ldm-stopping.json").read_text())
    assert report["verdict"] == "pass"
    names = {c["name"] for c in report["checks"]}
    assert names >= {
        "switching_times",
        "exact_monotone",
        "weak_order",
        "closed_form_limit",
        "discrete_law",
        "low_rank_joint_optimum",
        "capped_dimension_growth",
    }
    assert (tmp_path / "ldm-stopping.png").read_bytes()[:4] == b"\x89PNG"


def test_float64_joint_optimum_agrees_with_the_30_digit_search():
    # The study decides d* and t* < T on a float64 grid; the mpmath search (roots of the derivative) must agree.
    from convergence._experiments import PAPER_HORIZON as HORIZON
    from convergence._experiments import PAPER_SPECTRA as SPECTRA
    from convergence._models import joint_optimum
    from verify._rigorous import optimal_stopping_time

    variances = SPECTRA["low-rank"]
    for i in range(6):
        hat = plugin_variances(np.array(variances), 1000, np.random.default_rng(i))
        for start in ("forward", "standard"):
            setting = LatentSetting(variances, 2.0, tuple(hat), start=start)
            (t_star, _), d_star = min(
                ((optimal_stopping_time(setting, d, grid=100), d) for d in range(1, 7)),
                key=lambda item: (item[0][1], item[1]),
            )
            d_grid, t_grid = joint_optimum(variances, hat, start, HORIZON)
            assert d_grid == d_star and (t_grid < 2.0) == (t_star < 2.0)


def test_the_papers_criterion_is_derived_and_a_wrong_criterion_fails_both_ways():
    import sympy as sp

    from convergence._experiments import criterion_sign, iff_check
    from verify._models import latent_variances as ld
    from verify._rigorous import (
        LatentSetting,
        certify_sign,
        distance_derivative,
    )

    x, term = ld.plugin_remaining_term()
    derivative = sp.diff(term, x).subs(x, 0)
    assert sp.simplify(derivative - ld.plugin_criterion_term()) == 0
    for wrong in ((1 - ld.s / sp.sqrt(ld.q)) * (1 + ld.q), (1 - ld.s**2 / ld.q) * (1 - ld.q)):  # near misses
        assert sp.simplify(derivative - wrong) != 0
    # numerically: sigma_hat = 1.5 s_j overshoots, sigma_hat < s undershoots; the certified signs agree with the
    # criterion, and the "wrong side" claim (criterion < 0 <=> monotone) fails as a certified counterexample
    for hat in ((0.36, 0.2), (0.2, 0.05)):
        setting = LatentSetting((0.25, 0.1), 2.0, hat)
        paper = criterion_sign(setting, 2)
        monotone = certify_sign(
            lambda ctx, box: distance_derivative(ctx, setting, box, 2), 0, 2.0, -1, budget=4000, strict=False
        )
        assert paper is not None and monotone is not None
        assert iff_check("c", paper, monotone, {}, "").verdict == "pass"
        assert iff_check("c", not paper, monotone, {}, "").verdict == "fail"


def test_a_closed_form_with_a_wrong_exponent_fails_along_the_run():
    """Near miss: the closed form with e^{-t} off by 2% (t -> 1.02 t) everywhere but at t = T (where the exact score
    makes both vanish) fails the exact-algebra convergence check along the run; the true closed form passes."""
    from convergence._experiments import PAPER_HORIZON as HORIZON
    from convergence._experiments import PAPER_SPECTRA as SPECTRA
    from convergence._experiments import exact_discrete_convergence
    from convergence._models import LatentSampler
    from verify._rigorous import LatentSetting, distance

    variances = SPECTRA["geometric"]
    sampler = LatentSampler(variances, HORIZON, method="sde")
    setting = LatentSetting(variances, HORIZON)

    def warped(ctx, claim, t, d):
        return distance(ctx, claim, t * 1.02 if t < HORIZON else t, d)

    assert exact_discrete_convergence(sampler, variances, setting, {}).verdict == "pass"
    assert exact_discrete_convergence(sampler, variances, setting, {}, closed_form=warped).verdict == "fail"


def test_the_optimal_stopping_time_is_found_where_the_distance_is_flat_to_rounding_near_its_end():
    """Plug-in variances drawn at one of quick-profiles' ldm-stopping seeds: for d = 9 the derivative changes sign at
    T - t = 3e-12, where it is flat to rounding and mpmath's Anderson-Bjorck iteration stops short of its tolerance
    (it raised there). The root is then bisected: t* lies in its cell and no time of the grid does better."""
    from verify._rigorous import optimal_stopping_time

    plug_in = (0.9475565133292915, 0.5532305220726916, 0.3723736864525005, 0.20059261416548374, 0.13172271253910575)
    plug_in += (0.0761782588773762, 0.046095826925889136, 9.944566216021654e-11, 9.779575892560139e-11)
    setting = LatentSetting(tuple([0.6**k for k in range(7)] + [1e-10, 1e-10]), 2.0, plug_in)
    t_star, value = optimal_stopping_time(setting, 9)
    assert 1.9999999999943765 <= t_star <= 1.9999999999968376
    grid = [mpmath.mpf(2) * k / 400 for k in range(401)] + [2 - mpmath.mpf(10) ** (-k / 4) for k in range(4, 49)]
    assert all(value <= distance(mpmath.mp, setting, t, 9) for t in grid)


def test_ball_precision_blocks_of_two_threads_do_not_change_each_others_precision():
    """flint's precision is process-wide: a block in one thread must keep its bits while another thread's block
    (another precision) starts and ends (studies run side by side in threads)."""
    import threading
    import time

    import flint

    seen: dict[int, list[int]] = {53: [], 300: []}

    def hold(bits: int) -> None:
        with working_bits(bits):
            for _ in range(20):
                seen[bits].append(flint.ctx.prec)
                time.sleep(0.001)

    threads = [threading.Thread(target=hold, args=(bits,)) for bits in (53, 300)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {53: [53] * 20, 300: [300] * 20}


@pytest.mark.parametrize("start", ["forward", "standard"])
def test_float64_arrays_of_times_give_the_30_digit_distances_slopes_and_optimal_dimensions(start):
    """``FLOATS`` evaluates the closed forms at an array of times in one call, from t = 0 to 1e-11 before T: the
    distance equals mpmath's 30-digit value to 1e-12 of its scale; the derivative to 1e-6 of its scale (its terms
    carry 1 - s_j / sqrt(v_j), which cancels as v_j -> s_j^2 at T: rounding grows as 1e-16 / (T - t), in float64 as in
    mpmath at 53 bits), with the 30-digit sign wherever it is larger; the optimal dimension at every time is
    mpmath's (plug-in variances 20% off, and the exact score)."""
    remaining = np.logspace(-11, math.log10(2.0), 61)
    times = 2.0 - remaining
    hat = tuple(v * (1.2 if k % 2 else 0.8) for k, v in enumerate(GEOMETRIC))
    for setting in (LatentSetting(GEOMETRIC, 2.0, start=start), LatentSetting(GEOMETRIC, 2.0, hat, start=start)):
        for d in (1, 4, 9):
            with mpmath.workdps(30):
                exact = [
                    (distance(mpmath.mp, setting, mpmath.mpf(t), d), distance_derivative(mpmath.mp, setting, t, d))
                    for t in map(mpmath.mpf, times)
                ]
            values, slopes = (np.array([float(pair[k]) for pair in exact]) for k in (0, 1))
            assert_allclose(distance(FLOATS, setting, times, d), values, rtol=0, atol=1e-12 * np.max(np.abs(values)))
            scale = np.max(np.abs(slopes))
            float_slopes = distance_derivative(FLOATS, setting, times, d)
            assert_allclose(float_slopes, slopes, rtol=0, atol=1e-6 * scale)
            clear = np.abs(slopes) > 1e-6 * scale
            np.testing.assert_array_equal(np.sign(float_slopes[clear]), np.sign(slopes[clear]))
        with working_digits(30):
            dims = [optimal_dimension(setting, t, mpmath.mp) for t in times]
        np.testing.assert_array_equal(optimal_dimension(setting, times, FLOATS), dims)


def test_certified_enclosures_convert_to_mpmath_without_setting_mpmaths_process_wide_precision():
    """``critical_beta`` hands its arb enclosure over as mpmath numbers, exactly (the ends are dyadic: at 400 bits they
    equal the 53-bit results), and never sets mpmath's working precision: a study in another thread computes at
    it (phase-transition calls ``critical_beta`` from its grid runs side by side with other studies). Its closed
    form's one-time sympy derivation does (sympy's sign queries evalf under ``mpmath.workprec``, depending on hash
    order), under the precision lock; it is done before the recording starts."""
    from unittest import mock

    verify.critical_beta(5)

    context = type(mpmath.mp)
    prec = context.prec
    sets = []
    recording = property(prec.fget, lambda ctx, bits: (sets.append(bits), prec.fset(ctx, bits)))
    with mock.patch.object(context, "prec", recording):
        lo, hi = verify.critical_beta(5)
    assert sets == []
    assert 0 < hi - lo < 1e-12
    with mpmath.workprec(400):
        assert (lo, hi) == verify.critical_beta(5)


def test_a_closed_form_in_the_double_context_ignores_the_process_wide_precision():
    """Studies run in threads and mpmath.mp's precision is process-wide: a closed form evaluated with ``ctx = DOUBLE``
    (53 bits in a context of its own) gives the same float inside another block's raised precision; with
    ``mpmath.mp`` it does not (the control: the ldm reports' exact convergence moved by 5e-14 between two runs)."""
    setting = LatentSetting((1.0, 0.36, 0.1, 0.0), 2.0, (0.9, 0.4, 0.05, 0.0))
    times = [0.1 * k for k in range(1, 20)]
    alone = [float(distance(DOUBLE, setting, t, 3)) for t in times]
    ambient = [float(distance(mpmath.mp, setting, t, 3)) for t in times]
    with working_digits(40):
        assert [float(distance(DOUBLE, setting, t, 3)) for t in times] == alone
        assert [float(distance(mpmath.mp, setting, t, 3)) for t in times] != ambient
