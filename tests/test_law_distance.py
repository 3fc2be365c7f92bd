"""``cv.check_law``: the law of a statistic at time T along a ladder against the claim's Euler scheme, in Kolmogorov
and Wasserstein-1 distance with distribution-free bands. The distances match scipy's; the DKW band holds at its
level by the exact one-sample Kolmogorov law; an exact step passes its law on a depth ladder and wrong laws fail; an
inconclusive check plans the samples that decide it; the linear layer passes its Wishart law on a width ladder and
the infinite-width ODE fails (in Wasserstein-1: its law is an atom, which the Kolmogorov distance says it cannot
judge); too few samples never pass a near miss; NaN fails naming where; samples do not depend on how a run is split;
bad input is refused."""

import math
import re
import warnings

import numpy as np
import pytest
from scipy import stats

import convergence as cv
from convergence._experiments import LawLadder, law_checks, miss_probability
from convergence._paths import correlation, covariance_euler, width_run
from convergence._statistics import dkw_halfwidth, kolmogorov_norm, l1_norm

from .test_covariance_local import LINEAR, wishart_sigma
from .test_exact_maps import ITO, LAYER, NOISE, START, WRONG, A, diffusion, first_coordinate

WISHART = cv.covariance_sde(lambda v: np.zeros_like(v), wishart_sigma, 2, name="Wishart diffusion")
ODE = cv.covariance_sde(lambda v: np.zeros_like(v), lambda v: 0 * wishart_sigma(v), 2, name="no noise")
WIDE = cv.limit_sde(lambda x: A * x, lambda x, dw: 1.5 * diffusion(x, dw), 1, 2, NOISE, name="b x 1.5")
CHEAP = {"levels": (4, 8, 16), "reference_samples": 32_768}  # the linear layer's ladder


def verdicts(outcome) -> dict[str, str]:
    return {c.name: str(c.verdict) for c in outcome.checks if c.claim}


def test_the_distances_of_empirical_laws_are_scipys():
    rng = np.random.default_rng(0)
    for a, b in (
        (rng.normal(size=300), rng.normal(0.2, 1.3, size=500)),
        (rng.integers(0, 5, 200), rng.integers(0, 6, 90)),
    ):
        assert kolmogorov_norm([a, b], [1, -1]) == pytest.approx(stats.ks_2samp(a, b).statistic, abs=1e-12)
        assert l1_norm([a, b], [1, -1]) == pytest.approx(stats.wasserstein_distance(a, b), rel=1e-10)


@pytest.mark.parametrize("samples", [10, 100, 1000])
@pytest.mark.parametrize("alpha", [0.01, 0.1])
def test_the_dkw_band_holds_at_its_level(samples, alpha):
    # P(sup |F_N - F| > eps) from the exact law of the one-sample Kolmogorov statistic (scipy's kstwo)
    assert stats.kstwo.sf(dkw_halfwidth(samples, alpha), samples) <= alpha


@pytest.mark.parametrize(
    "claim, verdict", [(ITO, "pass"), (WRONG, "fail"), (WIDE, "fail")], ids=["Ito", "drift - b^2/2", "b x 1.5"]
)
def test_an_exact_step_passes_its_law_and_wrong_laws_fail(claim, verdict):
    outcome = cv.check_law(LAYER, claim, first_coordinate, initial=START, samples=32_768, target=0.15)
    assert outcome.verdict == verdict, outcome.table()
    ks = next(c for c in outcome.checks if c.name == "law_ks")
    assert ks.resolution <= 0.15, outcome.table()


def test_the_linear_layer_passes_its_wishart_law_and_the_ode_fails():
    true = cv.check_law(LINEAR, WISHART, samples=16_384, target=0.25, **CHEAP)
    assert verdicts(true) == {"law_ks": "pass", "law_w1": "pass"}, true.table()
    ode = cv.check_law(LINEAR, ODE, samples=16_384, target=0.25, **CHEAP)
    # the claim's law is an atom: the Kolmogorov distance cannot converge to it, Wasserstein-1 decides
    assert verdicts(ode) == {"law_ks": "inconclusive", "law_w1": "fail"}, ode.table()
    assert "atom" in ode.checks[0].note and "samples a level" not in ode.checks[0].note  # no advice: nothing decides
    assert [p.ylabel for p in true.plots] == ["CDF", "density", "distance"]
    assert true.plots[0].curves[-1].label.startswith("claim")


@pytest.mark.parametrize("seed", [1, 4])
def test_a_right_limit_approached_more_slowly_than_claimed_does_not_fail(seed):
    """Laws N(3.5 k^-0.7, 1) at depths 8, 16, 32 tend to N(0, 1), the claim, at rate 0.7; judged at the claimed rate 1
    the ladder's differences (ratio 2^-0.7 = 0.62 against 0.5) are within the regime test's band, and the remainder
    bound of a k^-2 next term is too small. At these seeds that was a fail (law_ks; 2 of seeds 0-7); the rate the
    differences show explains the departure, so the fail is not decided."""
    rng = np.random.default_rng(seed)
    samples, levels = 262_144, (8, 16, 32)
    values = tuple(3.5 * k**-0.7 + rng.standard_normal(samples) for k in levels)
    ladder = LawLadder("depth L", levels, values, rng.standard_normal(samples), rng.standard_normal(samples), 256, 0.0)
    ks = law_checks(ladder, 1.0, 0.15, None, 0.01, 0.9, "x", {})[0][0]
    assert ks.verdict == "inconclusive" and "rate the levels' differences" in ks.note, ks.note
    assert miss_probability(ks) == 1.0  # the gate, not the interval, kept it from failing: a rejection row says so


def shifted_ladder(samples: int, seed: int, reference_shift: float = 0.0) -> LawLadder:
    """Laws N(0.5 / k, 1) at depths 8, 16, 32 (the claim N(0, 1), reached at the claimed rate 1); the reference's run
    at S steps shifted by ``reference_shift`` from its run at S/2 (an Euler bias of that size)."""
    rng = np.random.default_rng(seed)
    levels = (8, 16, 32)
    values = tuple(0.5 / k + rng.standard_normal(samples) for k in levels)
    reference = reference_shift + rng.standard_normal(samples)
    return LawLadder("depth L", levels, values, reference, rng.standard_normal(samples), 256, 0.0)


def test_an_inconclusive_law_check_plans_the_samples_that_decide_it():
    """At 16,384 samples a level the resolution (about 0.26) exceeds the target 0.06 with nothing resolved of the
    departure or the reference's bias: all of the resolution scales as N^-1/2, and the plan (with its 25% margin,
    about 24 times the samples) resolves the target and passes at another seed. With the reference's runs at S and S/2
    steps 0.125 apart (KS 0.05, resolved) and target 0.15, the lower ends of what is resolved give a lower bound that
    a run of that size (another seed) does not yet reach; with them 0.2 apart (KS 0.08, beyond the target however
    many samples) the check says that no sample size decides."""
    pilot = law_checks(shifted_ladder(16_384, 0), 1.0, 0.06, None, 0.01, 0.9, "x", {})[0][0]
    assert pilot.verdict == "inconclusive" and pilot.resolution > 0.2, pilot.note
    planned = int(re.search(r"about (\d+) samples a level", pilot.note).group(1))
    assert planned == math.ceil(1.25 * 16_384 * (pilot.resolution / 0.06) ** 2)  # nothing fixed: all of it scales
    confirm = law_checks(shifted_ladder(planned, 1), 1.0, 0.06, None, 0.01, 0.9, "x", {})[0][0]
    assert confirm.verdict == "pass" and confirm.resolution <= 0.06, confirm.note
    resolved = law_checks(shifted_ladder(16_384, 0, 0.125), 1.0, 0.15, None, 0.01, 0.9, "x", {})[0][0]
    at_least = int(re.search(r"at least about (\d+) samples a level", resolved.note).group(1))
    short = law_checks(shifted_ladder(at_least, 1, 0.125), 1.0, 0.15, None, 0.01, 0.9, "x", {})[0][0]
    assert short.verdict == "inconclusive" and short.resolution > 0.15, short.note
    biased = law_checks(shifted_ladder(16_384, 0, 0.2), 1.0, 0.06, None, 0.01, 0.9, "x", {})[0][0]
    assert biased.verdict == "inconclusive" and "no sample size decides at these levels" in biased.note, biased.note


@pytest.mark.parametrize("samples", [256, 2048])
def test_too_few_samples_never_pass_a_near_miss(samples):
    outcome = cv.check_law(LAYER, WIDE, first_coordinate, initial=START, samples=samples, target=0.15)
    ks = next(c for c in outcome.checks if c.name == "law_ks")
    assert ks.verdict != "pass", outcome.table()
    if ks.verdict == "inconclusive":
        assert ks.resolution > 0.15 and "samples a level (the reference's in proportion) would decide" in ks.note


def test_a_statistic_that_cannot_see_the_error_never_passes():
    """A statistic constant at T (0 for every law): its laws are one atom, so a wrong claim (b x 1.5) is not passed,
    and the plots draw it without a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        outcome = cv.check_law(LAYER, WIDE, lambda x: 0 * x[:, 0, 0], initial=START, samples=1024)
    ks = outcome.checks[0]
    assert ks.verdict == "inconclusive" and "atom" in ks.note, outcome.table()


def test_nan_in_the_claims_scheme_fails_naming_it():
    broken = cv.covariance_sde(lambda v: np.zeros_like(v), lambda v: np.nan * wishart_sigma(v), 2, name="NaN")
    outcome = cv.check_law(LINEAR, broken, samples=256, **CHEAP)
    assert outcome.verdict == "fail" and "reference" in outcome.checks[0].note, outcome.table()


def test_samples_do_not_depend_on_how_a_run_is_split():
    state = np.array([[1.0, 0.5], [0.5, 1.0]])
    few = covariance_euler(WISHART, state, 1.0, 8, 100, correlation, 3, (1,))
    many = covariance_euler(WISHART, state, 1.0, 8, 9000, correlation, 3, (1,))
    np.testing.assert_array_equal(few, many[:100])
    few, _ = width_run(LINEAR, state, 8, 8, 10, correlation, 3, (2,))
    many, _ = width_run(LINEAR, state, 8, 8, 5000, correlation, 3, (2,))
    np.testing.assert_array_equal(few, many[:10])


def test_bad_input_is_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="levels"):
        cv.check_law(LINEAR, WISHART, levels=(4, 8, 12))
    with pytest.raises(ValueError, match="horizon"):
        cv.check_law(LINEAR, WISHART, levels=(4, 8, 16), horizon=0.3)
    with pytest.raises(TypeError, match="statistic"):
        cv.check_law(LAYER, ITO)
    with pytest.raises(ValueError, match="support"):
        cv.check_law(LINEAR, WISHART, support=(1.0, -1.0))
    with pytest.raises(TypeError, match="covariance_sde"):
        cv.check_law(LINEAR, ITO)
    with pytest.raises(ValueError, match="samples"):
        cv.check_law(LINEAR, WISHART, samples=3)
