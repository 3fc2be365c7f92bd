"""The strong check against an exact solution (``check_strong_order(..., reference=exact_flow)``) on three textbook
SDEs with closed-form solutions (Kloeden and Platen, section 4.4), one token on the real line (d = 1):

  geometric Brownian motion  dX = a X dt + b X dW                       X_t = X_0 exp((a - b^2/2) t + b W_t)
  an arctangent              dX = -0.01 sin X cos^3 X dt + 0.1 cos^2 X dW   X_t = atan(0.1 W_t + tan X_0)
  a cubic                    dX = (X^(1/3)/3 + 6 X^(2/3)) dt + X^(2/3) dW  X_t = (2t + 1 + W_t/3)^3 (X_0 = 1)

each written as its exact one-step flow. Euler-Maruyama of the SDE passes at strong order 1/2 against the exact
solution (no reference error: same_limit's allowance is rounding) and with its drift 30% off fails same_limit;
Milstein's scheme (order 1 for a scalar noise, higher than an Euler-Maruyama reference's 1/2, so only an exact
reference can show it) passes at order 1. The cubic is pre-asymptotic at practical depths (Euler-Maruyama's RMS order
is about 0.78 over h = T/16 .. T/512, its large drift's O(h) error dominating), so only its near miss is tested."""

from __future__ import annotations

import numpy as np
import pytest

import convergence as cv

NOISE = cv.field_noise((1,), 1.0)
A, B = 0.3, 0.5


def _w(dw):
    return dw[:, :, None]


# drift f, diffusion g (times dW), g g' (Milstein's term), the exact flow, X_0
PROBLEMS = {
    "gbm": (
        lambda x: A * x,
        lambda x: B * x,
        lambda x: B * B * x,
        lambda x, dw, h: x * np.exp((A - B * B / 2) * h + B * _w(dw)),
        1.0,
    ),
    "arctangent": (
        lambda x: -0.01 * np.sin(x) * np.cos(x) ** 3,
        lambda x: 0.1 * np.cos(x) ** 2,
        lambda x: -0.02 * np.sin(x) * np.cos(x) ** 3,
        lambda x, dw, h: np.arctan(0.1 * _w(dw) + np.tan(x)),
        0.5,
    ),
    "cubic": (
        lambda x: np.cbrt(x) / 3 + 6 * np.cbrt(x) ** 2,
        lambda x: np.cbrt(x) ** 2,
        lambda x: 2 * np.cbrt(x) / 3,
        lambda x, dw, h: (np.cbrt(x) + 2 * h + _w(dw) / 3) ** 3,
        1.0,
    ),
}


def _outcome(name: str, drift_factor: float, milstein: bool = True, paths: int | None = None):
    f, g, gg, flow, x0 = PROBLEMS[name]

    def step(x, dw, h):
        euler = x + drift_factor * f(x) * h + g(x) * _w(dw)
        return euler + 0.5 * gg(x) * (_w(dw) ** 2 - h) if milstein else euler

    layer = cv.layer_map(step, 1, 1, NOISE, name=f"{'Milstein' if milstein else 'Euler'}, drift x {drift_factor:g}")
    claim = cv.limit_sde(f, lambda x, dw: g(x) * _w(dw), 1, 1, NOISE, name=name)
    exact = cv.layer_map(flow, 1, 1, NOISE, name=f"{name}: exact flow")
    return cv.check_strong_order(
        layer,
        claim,
        order=1.0 if milstein else 0.5,
        reference=exact,
        initial=cv.fixed_state([[x0]], unit=False),
        depths=(8, 16, 32, 64),
        horizon=0.5 if name == "cubic" else 1.0,
        paths=paths,
    )


@pytest.mark.parametrize("name", ["gbm", "arctangent"])
def test_euler_maruyama_converges_at_order_one_half_to_the_exact_solution(name):
    outcome = _outcome(name, 1.0, milstein=False)
    assert outcome.verdict == "pass", outcome.table()
    checks = {c.name: c for c in outcome.checks}
    assert checks["reference_exact"].estimate < 1e-12  # the exact flow agrees with itself to rounding
    assert checks["same_limit"].allowance < 1e-20


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_a_drift_30_percent_off_fails_against_the_exact_solution(name):
    outcome = _outcome(name, 1.3, milstein=False)
    assert {c.name for c in outcome.checks if c.verdict == "fail"} >= {"same_limit"}, outcome.table()


def test_milsteins_order_one_shows_against_the_exact_solution():
    """An Euler-Maruyama reference (order 1/2) could not show it. The maximum over grid times converges more slowly
    (a log factor: RMS order about 0.91 over these depths, which more paths show as a regime below 1, a fail), so only
    the error at T is claimed at order 1, on one look of 1024 paths."""
    checks = {c.name: c for c in _outcome("gbm", 1.0, paths=1024).checks}
    assert checks["strong_order"].verdict == "pass" and checks["strong_order"].ci[0] > 0.9
    assert checks["same_limit"].verdict == "pass" and checks["reference_exact"].verdict == "pass"


def test_a_pre_asymptotic_ladder_is_not_a_second_limit():
    """Milstein on the cubic against its exact solution: at claimed mean-square rate 2 the fit over depths 8..64 puts
    the h^3 terms into the plateau (B = 0.0004 [0.0004, 0.0005], finest level 0.022), and B moves by about as much
    when the coarsest fitted level is dropped. With no reference error to absorb that bias, the public check counts the
    fit's model bias (twice that move) in the allowance, so the true claim passes (it used to fail, then to be left
    undecided); a drift error at the check's target (20%) still fails, as does a GBM drift 5% off, whose plateau stays
    when a level is dropped."""
    true_claim = {c.name: c for c in _outcome("cubic", 1.0).checks}["same_limit"]
    assert true_claim.verdict == "pass" and "model bias of the fit" in true_claim.note, true_claim
    assert {c.name: c for c in _outcome("cubic", 1.2).checks}["same_limit"].verdict == "fail"
    assert {c.name: c for c in _outcome("gbm", 1.05).checks}["same_limit"].verdict == "fail"
