"""A layer map that is an exact step of its claimed SDE: its errors sit at the floor at every depth, so its order is
not identifiable, and the limit decides (public interface only).

Geometric Brownian motion on a ray of R^2: the exact step x exp((a - b^2/2) h + b dW) of the Ito SDE
dx = a x dt + b x dW. Against the Ito SDE it passes (the strong errors are the Euler reference's own at every depth;
the weak ladder's coupled differences are rounding); against dx = (a - b^2/2) x dt + b x dW, the Ito SDE whose
solution is a different law (the Stratonovich reading of the same coefficients), it fails. No NaN or warning
reaches a table.
"""

import warnings

import numpy as np
import pytest

import convergence as cv

A, B = 0.3, 0.5
NOISE = cv.field_noise((1,), 1.0)
START = cv.fixed_state(np.array([[1.0, 0.0]]))


def exact_step(x, dw, h):
    return x * np.exp((A - B * B / 2) * h + B * dw[:, :, None])


def diffusion(x, dw):
    return B * x * dw[:, :, None]


def first_coordinate(x):
    return x[:, 0, 0]


LAYER = cv.layer_map(exact_step, 1, 2, NOISE, name="GBM exact step")
ITO = cv.limit_sde(lambda x: A * x, diffusion, 1, 2, NOISE, name="dx = a x dt + b x dW")
WRONG = cv.limit_sde(lambda x: (A - B * B / 2) * x, diffusion, 1, 2, NOISE, name="dx = (a - b^2/2) x dt + b x dW")


@pytest.mark.parametrize("claim, verdict", [(ITO, "pass"), (WRONG, "fail")], ids=["Ito", "wrong drift"])
def test_an_exact_step_is_judged_by_its_limit(claim, verdict):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        strong = cv.check_strong_order(LAYER, claim, initial=START, paths=512)
        weak = cv.check_weak_limit(LAYER, claim, first_coordinate, initial=START, paths=8192, near_misses=())
    assert strong.verdict == verdict, strong.table()
    assert weak.verdict == verdict, weak.table()
    for outcome in (strong, weak):
        assert "nan" not in outcome.table().lower()
    if verdict == "pass":
        orders = [c for c in strong.checks if c.name.startswith("strong_order")]
        assert all(not c.claim and "order not identifiable" in c.note for c in orders)
        assert next(c for c in weak.checks if c.name == "weak_order").claim is False


def test_the_weak_order_of_an_exact_step_is_not_identifiable_and_says_so():
    outcome = cv.check_weak_order(LAYER, first_coordinate, initial=START, paths=4096)
    assert outcome.verdict == "inconclusive", outcome.table()  # alone, nothing else can decide
    assert "order not identifiable" in outcome.checks[0].note and "nan" not in outcome.table().lower()
    staged = cv.check_weak_order(LAYER, first_coordinate, initial=START)  # more paths cannot help: the first look
    assert staged.verdict == "inconclusive" and staged.params["paths"] == staged.params["looks"][0]


NEAR = cv.limit_sde(lambda x: 1.05 * A * x, diffusion, 1, 2, NOISE, name="drift x 1.05")


def test_an_exact_step_rejects_a_five_percent_drift_error_and_never_passes_it_unseen():
    """The limit that decides for an exact step sees a 5% drift error (strong within its budget, in law at 8192),
    states its resolution, and with 16 paths, too few to see it, says inconclusive, never pass."""
    # every strong level sits near the reference's floor: a fail waits until the reference is shown to converge at its
    # rate (its error is then a sound allowance), which the staged looks reach at their budget
    strong = cv.check_strong_order(LAYER, NEAR, initial=START)
    same_limit = next(c for c in strong.checks if c.name == "same_limit")
    assert strong.verdict == "fail" and same_limit.verdict == "fail" and same_limit.resolution > 0, strong.table()
    weak = cv.check_weak_limit(LAYER, NEAR, first_coordinate, initial=START, paths=8192, near_misses=())
    assert weak.verdict == "fail", weak.table()
    assert cv.check_strong_order(LAYER, NEAR, initial=START, paths=16).verdict != "pass"


ON_LINE = cv.layer_map(
    lambda x, dw, h: x * np.exp((A - B * B / 2) * h + B * dw[:, :, None]), 1, 1, NOISE, name="GBM exact step on R"
)


@pytest.mark.parametrize("drift_factor, verdict", [(1.0, "pass"), (1.05, "fail")])
def test_a_map_on_the_real_line_is_checked_from_any_state(drift_factor, verdict):
    """d = 1, a state off any sphere (x = 1.5, and a fixed start 2.0): the same checks apply."""
    claim = cv.limit_sde(lambda x: drift_factor * A * x, diffusion, 1, 1, NOISE)
    local = cv.check_local_consistency(ON_LINE, claim, states={"x = 1.5": np.array([[1.5]])})
    assert local.verdict == verdict, local.table()
    if verdict == "pass":
        strong = cv.check_strong_order(ON_LINE, claim, initial=cv.fixed_state([[2.0]], unit=False), paths=512)
        assert strong.verdict == "pass", strong.table()
    with pytest.raises(ValueError, match="pass unit=False"):
        cv.fixed_state([[2.0]])
