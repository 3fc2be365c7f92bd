"""The shaped attention and shaped transformer blocks' covariance SDEs (``verify._analysis.shaped_attention``): the
derivations verify, the two-token correlation SDE meets its closed form written here, and the simulated layers that
verify the true moments reject the near misses (temperature off by 10%, the drift without the softmax's second-order
term, the diffusion without the value matrix's cross term or the attention's noise, the transformer without its hidden
layer's fluctuation, the infinite-width ODE)."""

import numpy as np
import pytest
import sympy as sp

from verify._analysis import ShapedAttention, ShapedMLP, ShapedTransformer, correlation_sde
from verify._analysis import covariance as covariance_sde
from verify._analysis import shaped_attention as attention
from verify._derivations import (
    BLOCK,
    ENTRIES,
    SHAPING,
    STATE,
    moment_gap,
    shaped_attention_covariance,
    shaped_transformer_covariance,
)

gamma, tau_0, rho = attention.gamma, attention.tau_0, covariance_sde.rho
WIDTH = 128  # the covariance rows' width; their allowance adds 4 |Sigma| / n


@pytest.fixture(scope="module")
def attention_derivation():
    return shaped_attention_covariance()


@pytest.fixture(scope="module")
def transformer_derivation():
    return shaped_transformer_covariance()


def at_state(expression: sp.Expr, model, temperature: float = BLOCK["tau_0"]) -> float:
    v, state = model.state, np.array(STATE)
    values = {v[a, b]: state[a, b] for a in range(3) for b in range(3)}
    values.update({tau_0: temperature, gamma: BLOCK["gamma"], **SHAPING})
    return float(expression.subs(values))


def with_derived(rows: list[dict], derived: list[float]) -> list[dict]:
    return [{**row, "derived": value} for row, value in zip(rows, derived)]


def test_both_derivations_verify_every_check(attention_derivation, transformer_derivation):
    for der, count in ((attention_derivation, 7), (transformer_derivation, 3)):
        assert der.status == "verified", [c for c in der.checks if c["status"] != "verified"]
        assert len(der.checks) == count


def test_the_correlation_sde_at_equal_norms_is_the_wishart_pull_plus_the_attention_push():
    """Closed forms written here: drift -gamma^2 (2 - gamma^2) rho (1 - rho^2) / 2 + gamma^4 (1 - rho^2)(1 - rho)^2
    (2 - rho) / (8 tau_0^2), squared diffusion gamma^2 (1 - rho^2)^2 [2 - gamma^2 + gamma^2 (1 - rho)^2 / (4 tau_0^2)].
    """
    model = ShapedAttention(2)
    drift, squared = correlation_sde(model)
    equal = {model.state[0, 0]: 1, model.state[1, 1]: 1}
    pull = -(gamma**2) * (2 - gamma**2) * rho * (1 - rho**2) / 2
    push = gamma**4 * (1 - rho**2) * (1 - rho) ** 2 * (2 - rho) / (8 * tau_0**2)
    assert sp.simplify(drift.subs(equal) - pull - push) == 0
    noise = gamma**2 * (1 - rho**2) ** 2 * (2 - gamma**2 + gamma**2 * (1 - rho) ** 2 / (4 * tau_0**2))
    assert sp.simplify(squared.subs(equal) - noise) == 0


def test_for_two_tokens_the_attention_drift_scales_v_and_leaves_the_correlation_alone():
    model = ShapedAttention(2)
    b, v = model.drift(), model.state
    assert sp.simplify(b[0, 1] / v[0, 1] - b[0, 0] / v[0, 0]) == 0


def test_the_simulated_mean_rejects_a_temperature_off_by_ten_percent_and_a_first_order_only_drift(
    attention_derivation,
):
    rows = attention_derivation.results["n E[V' - V], simulated at n = 1024"]
    model = ShapedAttention(3)
    entries = [(a, b) for a in range(3) for b in range(a, 3)]
    assert moment_gap(rows) < 1
    hotter = [at_state(model.drift()[a, b], model, 1.1 * BLOCK["tau_0"]) for a, b in entries]
    assert moment_gap(with_derived(rows, hotter)) > 1
    first, _ = attention.softmax_expansion(3)
    only_first = (first * model.state * first.T).applyfunc(lambda e: attention.logit_expectation(e, model.state))
    assert moment_gap(with_derived(rows, [at_state(gamma**2 * only_first[a, b], model) for a, b in entries])) > 1


def test_the_simulated_covariance_rejects_a_missing_cross_term_a_missing_attention_noise_and_no_noise(
    attention_derivation,
):
    rows = attention_derivation.results["n Var(V'_ab), simulated at n = 128"]
    model = ShapedAttention(3)
    v = model.state
    assert moment_gap(rows, 4 / WIDTH) < 1
    no_cross = [
        model.diffusion(a, b, a, b) - (1 - gamma**2) * gamma**2 * 2 * (v[a, a] * v[b, b] + v[a, b] ** 2)
        for a, b in ENTRIES
    ]
    no_attention = [model.diffusion(a, b, a, b) - model.attention_noise(a, b, a, b) for a, b in ENTRIES]
    for wrong in (no_cross, no_attention):
        assert moment_gap(with_derived(rows, [at_state(e, model) for e in wrong]), 4 / WIDTH) > 1
    assert moment_gap(with_derived(rows, [0.0] * len(rows)), 4 / WIDTH) > 1  # the infinite-width ODE


def test_the_transformer_checks_reject_a_missing_hidden_fluctuation_and_a_missing_mlp_drift(transformer_derivation):
    rows = transformer_derivation.results["n Var(V'_ab), simulated at n = 128"]
    model = ShapedTransformer(3)
    v = model.state
    one_wishart = [model.diffusion(a, b, a, b) - gamma**4 * 2 * (v[a, a] * v[b, b] + v[a, b] ** 2) for a, b in ENTRIES]
    assert moment_gap(with_derived(rows, [at_state(e, model) for e in one_wishart]), 4 / WIDTH) > 1
    means = transformer_derivation.results["n E[V'' - V], simulated at n = 128"]
    entries = [(a, b) for a in range(3) for b in range(a, 3)]
    attention_only = [at_state(ShapedAttention(3).drift()[a, b], model) for a, b in entries]
    assert moment_gap(with_derived(means, attention_only)) > 1
    assert ShapedMLP(3).drift()[0, 0] == 0  # the MLP half moves only the off-diagonal entries
