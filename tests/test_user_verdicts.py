"""Verdicts on a user's own block are right at the depths, precision and observable the user picks.

* A fail needs evidence in the asymptotic regime (``convergence._statistics.settled_away``): a true limit whose ladder
  is pre-asymptotic (local orders still rising to the rate) is inconclusive, never failed; a wrong one still fails
  once its finest local order is shown below the rate and not rising.
* Orders are "at least p" unless ``exact=True``: a map faster than claimed passes (Ornstein-Uhlenbeck, additive noise,
  where Euler-Maruyama and the exact-in-law step both have strong order 1).
* Rounding is an allowance: a map that *is* one Euler-Maruyama step of its SDE passes the local check against its
  Ito claim and its Stratonovich form; its 5% mutants fail.
* No pass without power: an observable that cannot move under the claim's error is inconclusive.

Seeds are fixed; each test's false-failure rate is the check's family-wise 1% (per check run), and the mutants' miss
rate at most 10% each at their stated resolutions (here far beyond them: drift errors 20 to 100 resolutions).
"""

from dataclasses import replace

import numpy as np
import pytest

import convergence as cv
from convergence._statistics import (
    OrderFit,
    bootstrap_counts,
    differences_settled_away,
    fit_order,
    one_rate_levels,
    settled_away,
)

# Ornstein-Uhlenbeck in R^2: dx = -theta x dt + s dW (additive noise)
THETA, S = 1.0, 0.7
OU_NOISE = cv.field_noise((2,), 1.0)
OU_START = cv.fixed_state(np.array([[1.0, 0.5]]), unit=False)


def ou_euler(x, dw, h):
    return x - THETA * x * h + S * dw[:, None, :]


def ou_exact_in_law(x, dw, h):
    """x e^{-theta h} + s sqrt((1 - e^{-2 theta h}) / (2 theta)) dW / sqrt(h): the transition law exactly."""
    return x * np.exp(-THETA * h) + S * np.sqrt((1 - np.exp(-2 * THETA * h)) / (2 * THETA * h)) * dw[:, None, :]


def ou_claim(drift_factor: float = 1.0):
    return cv.limit_sde(
        lambda x: -drift_factor * THETA * x,
        lambda x, dw: S * np.broadcast_to(dw[:, None, :], x.shape).copy(),
        1,
        2,
        OU_NOISE,
        name=f"OU, drift x {drift_factor:g}",
    )


@pytest.mark.parametrize("step", [ou_euler, ou_exact_in_law], ids=["Euler", "exact in law"])
@pytest.mark.parametrize("order", [0.5, 1.0])
def test_additive_noise_passes_its_true_claim_at_either_order(step, order):
    layer = cv.layer_map(step, 1, 2, OU_NOISE, name=step.__name__)
    outcome = cv.check_strong_order(layer, ou_claim(), order=order, initial=OU_START)
    assert outcome.verdict == "pass", outcome.table()
    checks = {c.name: c for c in outcome.checks}
    assert checks["reference_order"].verdict == "pass"  # Euler-Maruyama's order 1 here is "at least 1/2"
    assert checks["strong_order"].estimate > 0.9  # order 1 measured, whatever was claimed


def test_an_exact_order_claim_is_two_sided():
    """``exact=True``: "exactly 1/2" is wrong for a map of order 1, and the ladder shows one rate, so it fails."""
    layer = cv.layer_map(ou_euler, 1, 2, OU_NOISE)
    outcome = cv.check_strong_order(layer, ou_claim(), order=0.5, exact=True, initial=OU_START)
    assert outcome.verdict == "fail", outcome.table()
    assert {c.name for c in outcome.checks if c.verdict == "fail" and c.claim} & {"strong_order", "strong_order_sup"}
    with pytest.raises(TypeError, match="exact must be True or False"):
        cv.check_strong_order(layer, ou_claim(), exact="yes")


@pytest.mark.parametrize("step", [ou_euler, ou_exact_in_law], ids=["Euler", "exact in law"])
def test_additive_noise_rejects_a_drift_error_at_the_target(step):
    """The strong check's default target is a 20% drift error: a claim with its drift x 1.3 fails."""
    layer = cv.layer_map(step, 1, 2, OU_NOISE)
    outcome = cv.check_strong_order(layer, ou_claim(1.3), initial=OU_START)
    assert outcome.verdict == "fail", outcome.table()


@pytest.mark.parametrize("factor, verdict", [(1.0, "pass"), (1.05, "fail"), (0.95, "fail")])
def test_the_local_check_decides_ornstein_uhlenbeck(factor, verdict):
    for step in (ou_euler, ou_exact_in_law):
        layer = cv.layer_map(step, 1, 2, OU_NOISE)
        outcome = cv.check_local_consistency(layer, ou_claim(factor), states={"x": np.array([[1.0, 0.5]])})
        assert outcome.verdict == verdict, outcome.table()


# A residual MLP block on R^3 that is exactly one Euler-Maruyama step of its SDE: x + h f(x) + g(x) dW
_RNG = np.random.default_rng(3)
W1, W2, G = _RNG.standard_normal((8, 3)) / 3, _RNG.standard_normal((3, 8)) / 3, _RNG.standard_normal((3, 3)) / 2
EM_NOISE = cv.field_noise((3,), 0.8)


def mlp(x):
    return np.tanh(x @ W1.T) @ W2.T


def linear_noise(x, dw):
    return (x @ G.T) * dw[:, None, :]


EM_BLOCK = cv.layer_map(lambda x, dw, h: x + h * mlp(x) + linear_noise(x, dw), 1, 3, EM_NOISE, name="EM block")


def em_claim(drift=1.0, variance=1.0, form="ito"):
    """The block's SDE, Ito or (the same SDE) in Stratonovich form: the Stratonovich drift is the Ito one less
    (1/2) s^2 sum_k (DG_k) G_k = (1/2) s^2 diag(G) (G x) for G_k(x) = e_k (G x)_k."""
    correction = (lambda x: 0.5 * 0.8**2 * np.diag(G) * (x @ G.T)) if form == "stratonovich" else (lambda x: 0 * x)
    return cv.limit_sde(
        lambda x: drift * mlp(x) - correction(x),
        lambda x, dw: np.sqrt(variance) * linear_noise(x, dw),
        1,
        3,
        EM_NOISE,
        form=form,
    )


@pytest.mark.parametrize("form", ["ito", "stratonovich"])
@pytest.mark.parametrize(
    "drift, variance, verdict", [(1.0, 1.0, "pass"), (1.05, 1.0, "fail"), (0.95, 1.0, "fail"), (1.0, 1.05, "fail")]
)
def test_an_euler_maruyama_block_passes_its_own_claim_and_fails_its_mutants(form, drift, variance, verdict):
    outcome = cv.check_local_consistency(EM_BLOCK, em_claim(drift, variance, form))
    assert outcome.verdict == verdict, outcome.table()
    if verdict == "pass":  # rounding sits in the allowance, and the allowance stays far below the target
        assert all(c.allowance < 1e-9 for c in outcome.checks if c.name == "drift_scale"), outcome.table()


def test_a_pre_asymptotic_true_limit_is_not_failed():
    """Model F (n = 2, d = 4, sigma = 0.9, a mean value part) at depths (4, 8, 16), not deepened: the errors still
    steepen (local orders about 0.26 and 0.33 against the rate 1/2), so neither the order nor same_limit may fail;
    the checks say which depths would decide."""
    model = cv.FedorovModel(2, 4, beta=0.8, sigma=0.9, mean_value=0.4 * np.eye(4))
    outcome = cv.check_strong_order(model, model.limit_sde(), depths=(4, 8, 16), budget=4096, max_depth=16)
    assert outcome.verdict != "fail", outcome.table()
    assert "a deeper ladder would decide: depths (4, 8, 16, 32, 64)" in outcome.table()


def test_a_constant_observable_has_no_power():
    """A claim with 5 times the drift: an observable that takes one value on every path cannot see it."""
    a, b = 0.3, 0.5
    noise = cv.field_noise((1,), 1.0)
    layer = cv.layer_map(lambda x, dw, h: x * np.exp((a - b * b / 2) * h + b * dw[:, :, None]), 1, 2, noise)
    wrong = cv.limit_sde(lambda x: 5 * a * x, lambda x, dw: b * x * dw[:, :, None], 1, 2, noise)
    start = cv.fixed_state(np.array([[1.0, 0.0]]))
    outcome = cv.check_weak_limit(layer, wrong, lambda x: np.full(x.shape[0], 2.0), initial=start, paths=4096)
    (limit,) = [c for c in outcome.checks if c.name == "claim_limit"]
    assert outcome.verdict == "inconclusive" and limit.resolution == np.inf and "no power" in limit.note


def _fit(errors: np.ndarray, paths: int = 4000, noise: float = 0.02) -> tuple[OrderFit, np.ndarray]:
    """An order fit of RMS errors ``errors`` at steps 1/8 ... with multiplicative path noise (seeded)."""
    rng = np.random.default_rng(0)
    steps = 1 / 8 / 2.0 ** np.arange(errors.size)
    sq = (
        errors[None, :] ** 2
        * rng.exponential(1.0, (paths, 1))
        * (1 + noise * rng.standard_normal((paths, errors.size)))
    )
    return fit_order(steps, sq, bootstrap_counts(np.random.default_rng(1), paths, 500)), steps


def test_the_regime_test_tells_a_wrong_rate_a_plateau_and_a_pre_asymptotic_bend_apart():
    """settled_away at the band [0.45, inf): a clean rate 0.25 and a plateau (errors levelling off at 0.1) are
    evidence; a curve still rising to 1/2 (local orders about 0.2, 0.26, 0.32, 0.37) is not, nor is a true rate."""
    usable = np.ones(5, bool)
    steps = 1 / 8 / 2.0 ** np.arange(5)
    cases = {
        "wrong rate": (0.3 * steps**0.25, True),
        "plateau": (np.sqrt(0.1 * steps + 0.01), True),
        "errors growing with depth": (0.1 * (1 + np.arange(5) / 10), True),
        "rising to 1/2": (0.3 * np.sqrt(steps) / (1 + 4 * np.sqrt(steps)), False),
        "true rate": (0.3 * np.sqrt(steps), False),
    }
    for name, (errors, evidence) in cases.items():
        fit, _ = _fit(errors)
        assert (settled_away(fit, usable, 0.45) is not None) == evidence, (name, fit.local_orders)


def test_the_regime_is_the_fine_end_where_the_local_orders_agree():
    """one_rate_levels: a clean power law is one rate at every level; a curve still rising to 1/2 (error
    0.3 h^(1/2) / (1 + 8 h): local orders about 0.10, 0.25, 0.32, 0.42, 0.48 at this noise) and a plateau's falling
    orders keep only fine levels, at least three; levels at the floor never join."""
    steps = 1 / 8 / 2.0 ** np.arange(6)
    everywhere = np.ones(6, bool)
    straight, _ = _fit(0.3 * np.sqrt(steps), paths=400, noise=0.2)
    assert one_rate_levels(straight, everywhere).all(), straight.local_orders
    for errors in (0.3 * np.sqrt(steps) / (1 + 8 * steps), np.sqrt(0.1 * steps + 0.01 / 6)):
        fit, _ = _fit(errors, paths=400, noise=0.2)
        assert not one_rate_levels(fit, everywhere)[:2].any(), fit.local_orders
    assert one_rate_levels(straight, np.array([True] * 5 + [False])).tolist() == [True] * 5 + [False]


def test_weak_differences_crossing_zero_are_no_evidence():
    """differences_settled_away: coupled differences 0.08, 0.04, 0.02, 0.01 halving (order 1) against the band
    [0.85, inf) are no evidence, those decaying at order 1/2 are; differences that change sign (0.08, 0.02, -0.03: a
    curve crossing its limit, whose log |D| 'local order' is -0.58) or one of whose finest three is within its noise
    (0.08, 0.0001, 0.01: 'local order' -6.6) are none."""
    rng = np.random.default_rng(3)

    def values(differences):
        levels = np.concatenate([[0.0], -np.cumsum(differences)])  # f_l - f_{l+1} = D_l
        return levels[None, :] + 0.01 * rng.standard_normal((100_000, levels.size))

    assert differences_settled_away(values([0.08, 0.04, 0.02, 0.01]), 0.85) is None
    assert differences_settled_away(values([0.08, 0.08 / 2**0.5, 0.04, 0.04 / 2**0.5]), 0.85) is not None
    assert differences_settled_away(values([0.1, 0.08, 0.02, -0.03]), 0.85) is None
    assert differences_settled_away(values([0.1, 0.08, 0.0001, 0.01]), 0.85) is None


def test_a_resolution_holds_whatever_the_bias_within_the_allowance():
    """With bias_span 2 the stated resolution R is rejected with probability >= 90% for every bias b in
    [-allowance, allowance] (the worst, b = -allowance, gives exactly 90%); the zero-bias formula (span 1) does not."""
    from scipy import stats

    from convergence._statistics import detectable_effect

    allowance, se, confidence = 0.004, 0.001, 0.999
    z = stats.norm.ppf(0.5 + confidence / 2)
    ci = (-z * se, z * se)
    for span, worst in ((2.0, 0.9), (1.0, None)):
        effect = detectable_effect(ci, allowance, confidence, 0.9, bias_span=span)
        biases = np.linspace(-allowance, allowance, 9)
        rejection = [stats.norm.sf((allowance + z * se - effect - b) / se) for b in biases]
        if worst is None:
            assert min(rejection) < 0.5  # the zero-bias resolution overstates the power at the band's far edge
        else:
            assert min(rejection) == pytest.approx(worst, abs=1e-12) and max(rejection) > 0.9


def test_a_claim_equal_in_law_decides_the_drift_with_the_layers_own_control():
    """Model F (n = 3, d = 8) against its limit written with dW^T a for dW a (equal in law, not pathwise): with the
    claim's noise as control variate the drift is blind at 4096 samples; the layer's own (antithetic) control resolves
    it as finely as for the pathwise claim, and a 5% drift error of the same claim fails."""
    from convergence._models import tangent_projection

    model = cv.FedorovModel(3, 8, beta=1.0)
    true = model.limit_sde()
    law = cv.limit_sde(
        true.drift, lambda x, dw: tangent_projection(x, model.attention(x) @ dw), 3, 8, true.noise, name="dW^T a"
    )

    def pooled_drift(outcome):
        return next(c for c in outcome.checks if c.name == "drift_scale" and c.config["state"] == "pooled")

    by_layer = pooled_drift(cv.check_local_consistency(model, law, samples=4096))
    by_claim = pooled_drift(cv.check_local_consistency(model, law, samples=4096, control="claim"))
    pathwise = pooled_drift(cv.check_local_consistency(model, true, samples=4096))
    assert by_layer.verdict != "fail" and by_layer.resolution < 1.2 * pathwise.resolution
    assert by_claim.resolution > 4 * by_layer.resolution
    assert cv.check_local_consistency(model, cv.scaled_drift(law, 1.05)).verdict == "fail"


def test_a_claim_equal_in_law_costs_what_a_pathwise_one_does():
    """The covariance statistics use the layer's own linear noise response (central differences) and the claim's exact
    covariance, so the claim written with dW^T a gives the pathwise claim's numbers: both pass at the same look with
    the same resolutions (the claim's noise as control left its diffusion check at 0.43 per component, inconclusive),
    and a 5% variance error of it fails."""
    from convergence._models import tangent_projection

    model = cv.FedorovModel(3, 8, beta=1.0)
    true = model.limit_sde()
    law = cv.limit_sde(
        true.drift, lambda x, dw: tangent_projection(x, model.attention(x) @ dw), 3, 8, true.noise, name="dW^T a"
    )
    by_law, pathwise = cv.check_local_consistency(model, law), cv.check_local_consistency(model, true)
    assert by_law.verdict == pathwise.verdict == "pass" and by_law.sample_size == pathwise.sample_size
    for mine, theirs in zip(by_law.checks, pathwise.checks):
        assert mine.resolution == pytest.approx(theirs.resolution, rel=1e-6), (mine.name, mine.config)
    assert cv.check_local_consistency(model, cv.scaled_diffusion(law, np.sqrt(1.05))).verdict == "fail"


def test_a_pre_asymptotic_ladder_deepens_itself_within_the_budget():
    """The same model at depths (4, 8, 16), budget 1024 paths: undecided there, the check doubles the deepest depth up
    to max_depth = 64, each deeper ladder on the paths that do the last look's work (1024 x 16 / 32 = 512, then 256),
    as one more Bonferroni look; it never fails the true claim."""
    model = cv.FedorovModel(2, 4, beta=0.8, sigma=0.9, mean_value=0.4 * np.eye(4))
    outcome = cv.check_strong_order(model, model.limit_sde(), depths=(4, 8, 16), first=512, budget=1024)
    assert outcome.verdict != "fail", outcome.table()
    notes = " ".join(c.note for c in outcome.checks)
    assert outcome.params["depths_asked"] == [4, 8, 16] and outcome.params["depths"][-1] in (32, 64)
    deepest = outcome.params["depths"][-1]
    assert f"deepened to depths {tuple(outcome.params['depths'])} on {1024 * 16 // deepest} paths" in notes
    assert f"of {2 + 2}" in notes  # two staged looks and two deeper ladders share the 1% rate


def test_the_weak_limit_check_deepens_itself_while_its_bias_allowance_hides_the_target():
    """Model F at depths (2, 4, 8), 4096 paths: claim_limit's allowance (the finest coupled difference and the Euler
    reference's bias at h_ref = h / 4) exceeds its 0.05 sd(f) target, so the check doubles the deepest depth, on the
    paths that do the same work (4096 x 8 / 16 = 2048, then 1024); max_depth = 8 turns deepening off and names
    it instead."""
    model = cv.FedorovModel(2, 4, beta=0.8, sigma=0.9, mean_value=0.4 * np.eye(4))

    def overlap_squared(x):
        return np.sum(x[:, 0] * x[:, 1], axis=-1) ** 2

    def run(max_depth):
        return cv.check_weak_limit(
            model, model.limit_sde(), overlap_squared, depths=(2, 4, 8), paths=4096, near_misses=(), max_depth=max_depth
        )

    deepened = run(None)
    deepest = deepened.params["depths"][-1]
    assert deepened.verdict != "fail" and deepest in (16, 32), deepened.table()
    notes = " ".join(c.note for c in deepened.checks)
    assert f"deepened to depths {tuple(deepened.params['depths'])} on {4096 * 8 // deepest} paths" in notes
    assert "of 3)" in notes  # one look and two deeper ladders share the 1% rate
    kept = run(8)
    (limit,) = [c for c in kept.checks if c.name == "claim_limit"]
    assert kept.params["depths"] == [2, 4, 8] and "a deeper ladder would decide" in limit.note
    assert "deepened" not in limit.note


def test_the_strong_order_is_judged_on_the_levels_of_one_rate_and_a_fit_bias_names_deeper_depths():
    """The registry's hybrid model at depths 8 ... 128, 2048 paths, no deepening: its errors still bend at the coarse
    end, so the orders are fitted over the fine levels whose local orders agree (not over L = 8, 16), and same_limit's
    allowance lies above its target by the plateau fit's model bias (not the reference's error): it names deeper
    depths, which shrink that bias. Nothing fails."""
    from convergence._models import MODELS

    model = MODELS["hybrid"]()
    outcome = cv.check_strong_order(model, model.limit_sde(), depths=(8, 16, 32, 64, 128), paths=2048, max_depth=128)
    checks = {c.name: c for c in outcome.checks}
    assert outcome.verdict != "fail", outcome.table()
    for name in ("strong_order", "strong_order_sup"):
        note = checks[name].note
        assert "judged on the levels of one rate above the floor (L = " in note, note
        kept = note.split("(L = ")[1].split(":")[0]
        assert not kept.startswith(("8,", "16,")), kept
    assert "by the plateau fit's model bias" in checks["same_limit"].note
    assert "a deeper ladder would decide: depths (8, 16, 32, 64, 128, 256, 512)" in checks["same_limit"].note


def test_a_weak_limit_whose_rate_is_undecided_cannot_fail():
    """The registry's hybrid model at depths (4, 8, 16): its weak order there is about 0.1 (pre-asymptotic), so
    claim_limit's bias bound t(0.85) |Delta_last| does not hold and its difference (about 0.12 at look 1, where the
    check used to fail the true limit) is no evidence: inconclusive, deepening, never fail."""
    from convergence._models import MODELS

    model = MODELS["hybrid"]()

    def overlap_squared(x):
        return np.sum(x[:, 0] * x[:, 1], axis=-1) ** 2

    outcome = cv.check_weak_limit(model, model.limit_sde(), overlap_squared, depths=(4, 8, 16), near_misses=())
    assert outcome.verdict != "fail", outcome.table()


def test_a_near_miss_is_not_rejected_on_a_bias_bound_the_rate_does_not_show():
    """The same ladder, not deepened, with a drift x 1.05 near miss: its difference from the layer is no more evidence
    than the true claim's (the bias bound needs a weak order of at least 0.85), so the rejection row is undecided, not a
    pass that would credit the check with power it has not shown."""
    from convergence._models import MODELS

    model = MODELS["hybrid"]()
    outcome = cv.check_weak_limit(
        model,
        model.limit_sde(),
        lambda x: np.sum(x[:, 0] * x[:, 1], axis=-1) ** 2,
        depths=(4, 8, 16),
        near_misses=(0.05,),
        max_depth=16,
    )
    checks = {c.name: c for c in outcome.checks}
    assert checks["weak_order"].verdict == "inconclusive", outcome.table()
    assert checks["rejects"].verdict == "inconclusive", outcome.table()


def test_a_drift_free_claims_weak_limit_still_compares_laws():
    """Brownian motion x + dW against dx = dW: the drift near misses are the claim itself (0 x 1.05 = 0), which
    leaves claim_limit its power to compare laws: it passes."""
    noise = cv.field_noise((3,), 0.5)
    layer = cv.layer_map(lambda x, dw, h: x + dw[:, None, :], 1, 3, noise)
    claim = cv.limit_sde(
        lambda x: np.zeros_like(x), lambda x, dw: np.broadcast_to(dw[:, None, :], x.shape).copy(), 1, 3, noise
    )
    outcome = cv.check_weak_limit(layer, claim, lambda x: x[:, 0, 0] ** 2, paths=4096)
    (limit,) = [c for c in outcome.checks if c.name == "claim_limit"]
    assert limit.verdict == "pass" and np.isfinite(limit.resolution), outcome.table()


def test_levels_at_the_references_floor_never_fail_a_true_limit():
    """The random quadratic form (unit-variance noise, T = 1) at depths (4, 8, 16): every level's error lies within
    the Euler reference's own (RMS 0.4 at 256 steps), so the orders are findings and same_limit, whose plateau then
    measures the reference and the fit's model bias, is inconclusive and names the reference factor that would decide
    (it used to fail)."""
    model = cv.QuadraticFormModel(2, 4)
    outcome = cv.check_strong_order(model, model.limit_sde(), depths=(4, 8, 16), paths=1024)
    (same,) = [c for c in outcome.checks if c.name == "same_limit"]
    assert same.verdict == "inconclusive" and "a reference_factor of about" in same.note, outcome.table()


def test_the_second_difference_along_each_draw_is_the_hessians_quadratic_form():
    """Two routes to the layer's centred second-order noise response (model F, n = 2, d = 3: m = 9 noise entries, so
    the Hessian is affordable): ``draw_quadratic`` (two calls per draw along the draw itself, centred by the diagonal's
    trace) against ``difference_quadratic`` ((E^T H E - tr H) / (2 h), H from 2 m^2 + 1 calls). They differ only by
    the fourth-order terms, O(t^2) = 1e-4 of the response; and the traces agree to rounding (the same diagonal
    differences). A map with no curvature (an Euler step of additive noise) gives a response of 0."""
    from convergence._experiments import local_draws

    curvature_trace, draw_quadratic = local_draws.curvature_trace, local_draws.draw_quadratic
    difference_quadratic, noise_derivatives = local_draws.difference_quadratic, local_draws.noise_derivatives

    model = cv.FedorovModel(2, 3, beta=1.0)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    steps = (1 / 64, 1 / 128)
    drawn = rng.standard_normal((512, *model.noise.shape))
    hessians = [noise_derivatives(model, x, h, second=True)[1] for h in steps]
    curvatures = [curvature_trace(model, x, h) for h in steps]
    by_hessian = difference_quadratic(hessians, steps, drawn)
    along = draw_quadratic(model, x, drawn, steps, curvatures)
    scale = np.sqrt(np.mean(by_hessian**2))
    assert scale > 0.1  # model F's step is curved in its noise: the control has something to remove
    np.testing.assert_allclose(along, by_hessian, rtol=0, atol=2e-3 * scale)
    for hessian, (_, trace) in zip(hessians, curvatures):
        np.testing.assert_allclose(trace, np.trace(hessian, axis1=1, axis2=2), rtol=1e-9, atol=1e-9)
    additive = cv.limit_sde(lambda x: -x, lambda x, dw: dw[:, None, :], 1, 3, cv.CommonNoise((3,)), name="additive")
    euler, start = cv.EulerMaruyama(additive), np.ones((1, 3))
    flat_traces = [curvature_trace(euler, start, h) for h in steps]
    flat = draw_quadratic(euler, start, rng.standard_normal((64, 3)), steps, flat_traces)
    np.testing.assert_allclose(flat, 0.0, atol=1e-6)


def test_the_draw_wise_control_is_the_same_over_staged_looks_and_bounds_its_rounding():
    """Model F (n = 2, d = 16: the draw-wise control): a second look extends the first look's samples with the state's
    curvatures kept, giving exactly the control a one-look run of all the samples gives; the control's rounding
    bound enters the drift's rounding allowance; and a map that returns float32 gets no draw-wise control (its
    second differences would round at eps32 / t^2)."""
    from convergence._experiments import LocalDesign, local_draws, local_statistics

    layer_samples, quadratic_kind = local_draws.layer_samples, local_draws._quadratic_kind
    curvature_rounding, local_samples = local_statistics.curvature_rounding, local_statistics.local_samples

    model = cv.FedorovModel(2, 16, beta=1.0)
    x = np.eye(16)[:2]
    design = LocalDesign(samples=256, control="layer", block_paths=128)
    first = layer_samples(model, x, design, 0, (7,))
    staged = layer_samples(model, x, LocalDesign(samples=512, control="layer", block_paths=128), 0, (7,), first)
    whole = layer_samples(model, x, LocalDesign(samples=512, control="layer", block_paths=128), 0, (7,))
    assert staged.curvatures and len(staged.curvatures) == 3
    np.testing.assert_allclose(staged.quadratic, whole.quadratic, rtol=1e-12, atol=1e-12)
    unit = np.zeros((512, 32))
    with_bound = local_samples(whole, unit, design, np.eye(32)[:3], x=x)
    floor = curvature_rounding(x, np.asarray(design.steps), (float(np.finfo(np.float64).eps), 0.0), 256)
    without = local_samples(replace(whole, curvatures=()), unit, design, np.eye(32)[:3], x=x)
    np.testing.assert_allclose(with_bound.drift_rounding - without.drift_rounding, floor, rtol=1e-12)
    assert np.all(floor > 0)

    class Float32(cv.FedorovModel):
        def layer(self, x, dw, h):
            return super().layer(x, dw, h).astype(np.float32)

    assert quadratic_kind(model, x, 1 / 64, True, False) == "draws"
    assert quadratic_kind(Float32(2, 16, beta=1.0), x, 1 / 64, True, False) is None
