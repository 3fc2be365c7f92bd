"""The textbook SDEs with known solutions: their algebra, their compiled steps, and the local check on each.

Exact algebra: each flow solves its SDE by Ito's formula (``verify._models.textbook.flow_residuals``), the
Ornstein-Uhlenbeck step has the exact transition moments, and the Stratonovich drifts agree with what Stratonovich
calculus says another way (the chain rule: a solution that is a function of W_t alone has Stratonovich drift 0; the
linear SDE's is the exponent's rate alpha - beta^2 / 2). The compiled numpy functions agree with sympy's values at
random points, and every pathwise flow composes (two steps are one step over the summed time and increment).

Statistics: the local check (public defaults, one state: the problem's start) on the exact step and on the Euler
step, against the Ito claim and its Stratonovich form: the true claim passes and its near misses (drift x 1.05,
x 0.95, noise variance x 1.05) fail. Seeds fixed; each run's false-failure rate is the check's 1%, and each near miss
is many resolutions away (the exact steps' second-order control leaves resolutions near 1e-3 at 4096 samples).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import convergence as cv
from convergence._models import textbook_problems
from verify._models import flow_residuals, ornstein_uhlenbeck_moments, stratonovich_drift, textbook_sdes

PROBLEMS = textbook_problems()
PATHWISE = [name for name, problem in PROBLEMS.items() if not problem.exact_in_law_only]


@pytest.mark.parametrize("name", PATHWISE)
def test_each_flow_solves_its_sde_by_itos_formula(name):
    assert flow_residuals(textbook_sdes()[name]) == [0] * (3 * textbook_sdes()[name].dim)


def test_the_ornstein_uhlenbeck_step_has_the_exact_transition_moments():
    assert ornstein_uhlenbeck_moments() == (0, 0)
    with pytest.raises(ValueError, match="no pathwise flow"):
        flow_residuals(textbook_sdes()["Ornstein-Uhlenbeck"])


def test_stratonovich_drifts_agree_with_the_chain_rule():
    sdes = textbook_sdes()
    for name in ("cubic", "wave"):  # X_t = F(W_t + c): Stratonovich calculus has no dt term
        assert stratonovich_drift(sdes[name]) == sp.Matrix([0])
    x = sdes["linear"].coordinates[0]
    assert (
        sp.simplify(stratonovich_drift(sdes["linear"])[0] - (sp.Rational(101, 100) - sp.Rational(87, 100) ** 2 / 2) * x)
        == 0
    )


def _sympy_values(expr: sp.Matrix, symbols, point) -> np.ndarray:
    real = {s: sp.Float(v, 30) for s, v in zip(symbols, point)}
    return np.array([complex(sp.N(e.subs(real), 20)).real for e in expr])


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_compiled_functions_agree_with_sympy(name):
    problem, sde = PROBLEMS[name], textbook_sdes()[name]
    rng = np.random.default_rng(7)
    for _ in range(3):
        state = problem.start[0] + 0.1 * rng.standard_normal(problem.dim)
        dw, h = 0.2 * rng.standard_normal(), 0.05
        x = state.reshape(1, 1, -1)
        np.testing.assert_allclose(problem.drift(x)[0, 0], _sympy_values(sde.drift, sde.coordinates, state), rtol=1e-13)
        np.testing.assert_allclose(
            problem.stratonovich_drift(x)[0, 0],
            _sympy_values(stratonovich_drift(sde), sde.coordinates, state),
            rtol=1e-13,
            atol=1e-15,
        )
        np.testing.assert_allclose(
            problem.diffusion(x, np.array([[dw]]))[0, 0],
            dw * _sympy_values(sde.diffusion, sde.coordinates, state),
            rtol=1e-13,
            atol=1e-16,
        )
        np.testing.assert_allclose(
            problem.exact_step().layer(x, np.array([[dw]]), h)[0, 0],
            _sympy_values(sde.flow, sde.flow_arguments, (*state, dw, h)),
            rtol=1e-13,
        )


def test_a_real_cube_root_keeps_a_negative_state_finite():
    x = np.array([[[-0.5]]])
    assert np.isfinite(PROBLEMS["nonlinear test"].drift(x)).all()
    assert np.isfinite(PROBLEMS["nonlinear test"].euler_step().layer(x, np.array([[0.1]]), 0.01)).all()


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(PATHWISE),
    w1=st.floats(-0.5, 0.5),
    w2=st.floats(-0.5, 0.5),
    h1=st.floats(1e-3, 0.2),
    h2=st.floats(1e-3, 0.2),
)
def test_pathwise_flows_compose(name, w1, w2, h1, h2):
    """phi(phi(x, w1, h1), w2, h2) = phi(x, w1 + w2, h1 + h2): the solution sees the path through W_t alone."""
    step = PROBLEMS[name].exact_step()
    x = PROBLEMS[name].start[None]
    twice = step.layer(step.layer(x, np.array([[w1]]), h1), np.array([[w2]]), h2)
    once = step.layer(x, np.array([[w1 + w2]]), h1 + h2)
    np.testing.assert_allclose(twice, once, rtol=1e-10, atol=1e-12)


def _claim(problem, form: str):
    drift = problem.drift if form == "ito" else problem.stratonovich_drift
    return cv.limit_sde(drift, problem.diffusion, 1, problem.dim, problem.noise, name=problem.name, form=form)


NEAR_MISSES = {
    "drift x 1.05": lambda claim: cv.scaled_drift(claim, 1.05),
    "drift x 0.95": lambda claim: cv.scaled_drift(claim, 0.95),
    "noise variance x 1.05": lambda claim: cv.scaled_diffusion(claim, np.sqrt(1.05)),
}


@pytest.mark.parametrize("form", ["ito", "stratonovich"])
@pytest.mark.parametrize("kind", ["exact", "Euler"])
@pytest.mark.parametrize("name", list(PROBLEMS))
def test_the_local_check_passes_each_true_claim_and_fails_its_near_misses(name, kind, form):
    problem = PROBLEMS[name]
    step = problem.exact_step() if kind == "exact" else problem.euler_step()
    claim = _claim(problem, form)
    states = {"start": problem.start}
    outcome = cv.check_local_consistency(step, claim, states=states)
    assert outcome.verdict == "pass", outcome.table()
    for label, miss in NEAR_MISSES.items():
        rejected = cv.check_local_consistency(step, miss(claim), states=states)
        assert rejected.verdict == "fail", (label, rejected.table())


def test_one_state_carries_the_relative_target_when_its_drift_is_small():
    """With the claim's control variate (no second-order control), the cubic's exact step at its start has a drift
    small beside its noise: its own drift_scale target is relaxed to a typical component, so the check over that one
    state also judges it at the relative target (a 5% drift error may not pass)."""
    problem = PROBLEMS["cubic"]
    claim = cv.scaled_drift(_claim(problem, "ito"), 1.05)
    outcome = cv.check_local_consistency(problem.exact_step(), claim, states={"start": problem.start}, control="claim")
    assert outcome.verdict != "pass", outcome.table()
    assert any(c.name == "drift_scale" and c.config["state"] == "pooled" for c in outcome.checks), outcome.table()


# The strong check's textbook cases. Left out, with reasons: the linear SDE (geometric Brownian motion at beta = 0.87
# has log-normal errors whose spread leaves the order undecided at 16384 paths: inconclusive, never fail) and the
# stiff quadratic's Euler step, whose moments diverge (Hutzenlaub, Jentzen and Kloeden 2011: explicit Euler on
# superlinearly growing coefficients), so its mean-square error is not finite and the check fails it on the paths
# that overflow, rightly.
STRONG = [(name, kind) for name in PROBLEMS for kind in ("exact", "Euler")]
STRONG = [case for case in STRONG if case[0] != "linear" and case != ("stiff quadratic", "Euler")]


def _step(name: str, kind: str):
    return PROBLEMS[name].exact_step() if kind == "exact" else PROBLEMS[name].euler_step()


@pytest.mark.parametrize("name, kind", STRONG)
def test_the_strong_check_passes_each_true_claim_and_fails_a_drift_error_beyond_its_target(name, kind):
    """Ito claims at the defaults (order at least 1/2, target a 20% drift error); the drift x 1.3 fails. The additive
    problem's Euler errors are nearly deterministic, so its plateau fit carries a model bias (h^3 beside h^2), which
    the allowance holds (it used to be left undecided)."""
    problem = PROBLEMS[name]
    start = cv.fixed_state(problem.start, unit=False)
    outcome = cv.check_strong_order(_step(name, kind), _claim(problem, "ito"), initial=start)
    assert outcome.verdict == "pass", outcome.table()
    wrong = cv.check_strong_order(_step(name, kind), cv.scaled_drift(_claim(problem, "ito"), 1.3), initial=start)
    assert wrong.verdict == "fail", wrong.table()


@pytest.mark.parametrize("name, kind", [(n, k) for n, k in STRONG if n in ("cubic", "additive")])
def test_the_weak_check_never_fails_a_textbook_true_claim(name, kind):
    """Weak limit of the first coordinate (defaults): the true claim passes, or is inconclusive saying what would
    decide (the additive problem's noise is 0.005: a target of 0.05 sd(f) is beyond its Euler bias); the drift x 1.05
    fails."""
    problem = PROBLEMS[name]
    start = cv.fixed_state(problem.start, unit=False)
    first = lambda x: x[:, 0, 0]  # noqa: E731
    outcome = cv.check_weak_limit(_step(name, kind), _claim(problem, "ito"), first, initial=start, near_misses=())
    assert outcome.verdict != "fail", outcome.table()
    assert outcome.verdict == "pass" or "decide" in outcome.table(), outcome.table()
    wrong = cv.scaled_drift(_claim(problem, "ito"), 1.05)
    assert cv.check_weak_limit(_step(name, kind), wrong, first, initial=start, near_misses=()).verdict == "fail"


def test_a_pre_asymptotic_weak_order_is_not_failed():
    """The nonlinear test problem's Euler step (drift 6.3 at the start): its coupled differences' local orders rise
    0.62, 0.82, 0.90 towards 1 over depths 4 to 64, so the fitted order 0.78 is no evidence against order 1; the check
    names a deeper ladder instead of failing."""
    problem = PROBLEMS["nonlinear test"]
    outcome = cv.check_weak_order(
        problem.euler_step(), lambda x: x[:, 0, 0], initial=cv.fixed_state(problem.start, unit=False)
    )
    (rate,) = outcome.checks
    assert rate.verdict == "inconclusive" and "a deeper ladder would decide" in rate.note, outcome.table()


def test_a_steady_wrong_weak_order_still_fails():
    """A step whose drift is off by sqrt(h) (x + h (1 + sqrt(h)) + dW): E f(L) - E f(2L) decays like h^(1/2) at every
    level, a rate that holds steady, so the weak order 1 fails on asymptotic evidence."""
    noise = cv.field_noise((1,), 1.0)
    layer = cv.layer_map(lambda x, dw, h: x + h * (1 + np.sqrt(h)) + dw[:, :, None], 1, 1, noise, name="slow drift")
    outcome = cv.check_weak_order(layer, lambda x: x[:, 0, 0], initial=cv.fixed_state(np.zeros((1, 1)), unit=False))
    (rate,) = outcome.checks
    assert rate.verdict == "fail" and "asymptotic evidence" in rate.note, outcome.table()
