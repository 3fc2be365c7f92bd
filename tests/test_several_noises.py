"""Layers with several independent noises, on both sides: a two-head model F (two value matrices, two inverse
temperatures) and attention noise plus a per-token noise.

Symbolic side (``verify.one_step_limit`` / ``check_limit``): the derived limit equals the closed form written
here by hand (-((d-1)/2) sum_h sigma_h^2 |a_h|^2 x for the drift, the projected sum of the heads' covariances),
and plausible near misses fail with derived and claimed entries side by side. Numeric side
(``convergence.layer_map`` with a dict of noises): the local check passes the same closed form and rejects a 3%
drift error and a missing head; the joint noise's draws continue across chunks, carry each part's scale and law.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import convergence as cv
import verify
from convergence._models import attention_average, normalise, tangent_projection
from convergence._paths import PathStreams

N, D = 3, 4
SIGMAS = (sp.Rational(1, 2), sp.Rational(1, 3))
BETAS = (1, sp.Rational(1, 2))
NOISE = {"V1": cv.matrix_noise(D, float(SIGMAS[0])), "V2": cv.matrix_noise(D, float(SIGMAS[1]))}


# --- sympy: the map, the true claim and its near misses ------------------------------------------------
def attention_sym(xs, i, beta):
    weights = [sp.exp(beta * (xs[i].T * x)[0]) for x in xs]
    return sum((w * x for w, x in zip(weights, xs)), sp.zeros(D, 1)) / sum(weights)


def unit(y):
    return y / sp.sqrt((y.T * y)[0])


def two_heads_sym(xs, dw, h):
    return [
        unit(xs[i] + dw["V1"] * attention_sym(xs, i, BETAS[0]) + dw["V2"] * attention_sym(xs, i, BETAS[1]))
        for i in range(N)
    ]


def drift_sym(xs, ito=sp.Rational(D - 1, 2), variances=(SIGMAS[0] ** 2, SIGMAS[1] ** 2)):
    out = []
    for i in range(N):
        a = [attention_sym(xs, i, b) for b in BETAS]
        out.append(-ito * sum(v * (ah.T * ah)[0] for v, ah in zip(variances, a)) * xs[i])
    return out


def diffusion_sym(xs, dw, project=True):
    out = []
    for i in range(N):
        v = dw["V1"] * attention_sym(xs, i, BETAS[0]) + dw["V2"] * attention_sym(xs, i, BETAS[1])
        out.append(v - (xs[i].T * v)[0] * xs[i] if project else v)
    return out


def test_two_heads_derived_limit_is_the_closed_form():
    result = verify.check_limit(two_heads_sym, drift_sym, diffusion_sym, N, D, NOISE)
    assert result.consistent, str(result)
    assert max(result.drift, result.covariance, result.first_order_mean) < 1e-25


def test_the_derivation_is_cached_and_check_limit_reuses_it():
    first = verify.one_step_limit(two_heads_sym, N, D, NOISE)
    assert verify.one_step_limit(two_heads_sym, N, D, NOISE) is first and isinstance(first, verify.StepLimit)
    assert first.drift.shape == (N * D, 1) and first.loadings.shape == (N * D, 2 * D * D)


@pytest.mark.parametrize(
    "claim, coefficient",
    [
        ("(d-2)/2 for (d-1)/2", "drift"),
        ("sigma_2^2 x 1.05", "drift"),
        ("second head's Ito term missing", "drift"),
        ("no tangent projection", "covariance"),
    ],
)
def test_two_head_near_misses_fail_with_derived_and_claimed_side_by_side(claim, coefficient):
    drift, diffusion = drift_sym, diffusion_sym
    if claim.startswith("(d-2)"):
        drift = lambda xs: drift_sym(xs, ito=sp.Rational(D - 2, 2))  # noqa: E731
    elif claim.startswith("sigma_2"):
        drift = lambda xs: drift_sym(xs, variances=(SIGMAS[0] ** 2, SIGMAS[1] ** 2 * sp.Rational(105, 100)))  # noqa: E731
    elif claim.startswith("second"):
        drift = lambda xs: drift_sym(xs, variances=(SIGMAS[0] ** 2, 0))  # noqa: E731
    else:
        diffusion = lambda xs, dw: diffusion_sym(xs, dw, project=False)  # noqa: E731
    result = verify.check_limit(two_heads_sym, drift, diffusion, N, D, NOISE)
    assert not result.consistent
    assert result[coefficient] > 1e-6
    assert result.rows and all(row[0] == coefficient for row in result.rows)
    table = str(result)
    assert "NOT consistent" in table and "claimed/derived" in table
    if claim.startswith("(d-2)"):  # the ratio column names the error: (d-2)/(d-1) = 2/3 at d = 4
        assert all(abs(claimed / derived - 2 / 3) < 1e-9 for _, _, derived, claimed in result.rows)


def test_attention_noise_plus_per_token_noise():
    """Common value matrix plus an independent per-token noise (tuple structure): the Ito drift gains
    -(d-1)/2 tau^2 x_i and the covariance tau^2 P_i on the diagonal blocks; forgetting either fails."""
    sigma, tau = sp.Rational(1, 2), sp.Rational(1, 5)
    noise = (cv.matrix_noise(D, float(sigma)), cv.per_token_noise(N, D, float(tau)))

    def step(xs, dw, h):
        value, own = dw
        return [unit(xs[i] + value * attention_sym(xs, i, 1) + own[i, :].T) for i in range(N)]

    def drift(xs, with_own=True):
        return [
            -sp.Rational(D - 1, 2)
            * (sigma**2 * (attention_sym(xs, i, 1).T * attention_sym(xs, i, 1))[0] + (tau**2 if with_own else 0))
            * xs[i]
            for i in range(N)
        ]

    def diffusion(xs, dw, with_own=True):
        value, own = dw
        out = []
        for i in range(N):
            v = value * attention_sym(xs, i, 1) + (own[i, :].T if with_own else sp.zeros(D, 1))
            out.append(v - (xs[i].T * v)[0] * xs[i])
        return out

    assert verify.check_limit(step, drift, diffusion, N, D, noise).consistent
    missing_drift = verify.check_limit(step, lambda xs: drift(xs, False), diffusion, N, D, noise)
    assert not missing_drift.consistent and missing_drift.drift > 1e-3 and missing_drift.covariance < 1e-25
    missing_noise = verify.check_limit(step, drift, lambda xs, dw: diffusion(xs, dw, False), N, D, noise)
    assert not missing_noise.consistent and missing_noise.covariance > 1e-3


def test_a_step_the_expansion_cannot_handle_is_named():
    def step(xs, dw, h):
        return [xs[i] + sp.Max(dw[0, 0], 0) * xs[i] for i in range(2)]

    with pytest.raises(NotImplementedError, match="Max"):
        verify.one_step_limit(step, 2, 2, cv.matrix_noise(2, 1.0))


def test_a_noise_without_shape_is_refused_by_name():
    with pytest.raises(TypeError, match=r"noise\['V'\] must have a shape and a scale"):
        verify.one_step_limit(two_heads_sym, N, D, {"V": "matrix"})


# --- numpy: the same map and claims, local consistency ---------------------------------------------------
def two_heads(x, dw, h):
    return normalise(x + _applied(x, dw))


def _applied(x, dw):
    return sum(attention_average(x, float(b)) @ np.swapaxes(dw[name], -1, -2) for b, name in zip(BETAS, NOISE))


def two_heads_drift(x, scale=1.0, heads=(1.0, 1.0)):
    norms = [
        h * float(s) ** 2 * np.sum(a * a, axis=-1, keepdims=True)
        for h, s, a in zip(heads, SIGMAS, (attention_average(x, float(b)) for b in BETAS))
    ]
    return -scale * 0.5 * (D - 1) * sum(norms) * x


def two_heads_diffusion(x, dw):
    return tangent_projection(x, _applied(x, dw))


@pytest.mark.parametrize(
    "name, drift, verdict",
    [
        ("true", two_heads_drift, "pass"),
        ("drift x 1.03", lambda x: two_heads_drift(x, scale=1.03), "fail"),
        ("second head's Ito term missing", lambda x: two_heads_drift(x, heads=(1.0, 0.0)), "fail"),
    ],
)
def test_two_heads_local_consistency(name, drift, verdict):
    layer = cv.layer_map(two_heads, N, D, NOISE, name="two heads")
    claim = cv.limit_sde(drift, two_heads_diffusion, N, D, NOISE, name=name)
    outcome = cv.check_local_consistency(layer, claim, states=("uniform", "near merged"))
    assert outcome.verdict == verdict, outcome.table()


def test_joint_noise_draws_continue_across_chunks_with_each_parts_scale_and_law():
    joint = cv.joint_noise({"a": cv.matrix_noise(3, 0.5, "rademacher"), "b": cv.scalar_noise(2.0)})
    assert joint.law == "mixed" and not joint.brownian and joint.shape == (10,)
    whole = PathStreams(0, 0, 300).standard_draws(joint, 5)
    streams = PathStreams(0, 0, 300)
    chunks = np.concatenate([streams.standard_draws(joint, 3), streams.standard_draws(joint, 2)], axis=1)
    np.testing.assert_array_equal(whole, chunks)
    parts = joint.split(PathStreams(0, 0, 300).increments(joint, 400, 0.01))
    assert parts["a"].shape == (300, 400, 3, 3) and parts["b"].shape == (300, 400)
    np.testing.assert_array_equal(np.abs(parts["a"]), 0.05)  # Rademacher entries: +-scale sqrt(h)
    # Gaussian part: sd 2 * 0.1 = 0.2 from 120000 draws (standard error of the sd about 0.2 / sqrt(240000))
    assert abs(parts["b"].std() - 0.2) < 5 * 0.2 / np.sqrt(2 * parts["b"].size)
    gaussian = cv.joint_noise((cv.matrix_noise(2, 1.0), cv.scalar_noise()))
    assert gaussian.brownian and isinstance(gaussian.split(np.zeros((1, 5))), tuple)


def test_a_joint_noise_part_must_be_a_noise():
    with pytest.raises(TypeError, match="noise part 'V'"):
        cv.joint_noise({"V": (3, 3)})


def test_a_step_that_moves_tokens_without_noise_is_not_consistent():
    """x + x/10 + dw x (a forgotten h) has no diffusion limit: step(x, 0, 0) - x is reported, never ignored."""
    noise = cv.matrix_noise(2, 1.0)

    def step(xs, dw, h):
        return [x + x / 10 + dw * x for x in xs]

    result = verify.check_limit(step, lambda xs: [sp.zeros(2, 1)] * 2, lambda xs, dw: [dw * x for x in xs], 2, 2, noise)
    assert not result.consistent and result.zeroth_order > 0.01 and result.drift < 1e-25
    assert any(row[0] == "zeroth_order" for row in result.rows)


def test_abs_of_a_noisy_expression_expands():
    """|x + dw x| keeps its sign near dw = 0: its jet goes through Abs' real derivative."""
    noise = cv.scalar_noise(sp.Rational(1, 2))

    def step(xs, dw, h):
        return [xs[0].applyfunc(lambda c: sp.Abs(c + dw * c))]

    result = verify.check_limit(
        step, lambda xs: [sp.zeros(2, 1)], lambda xs, dw: [dw * xs[0]], 1, 2, noise, points=[np.array([[0.6, 0.8]])]
    )
    assert result.consistent, str(result)


def test_a_claim_with_other_noise_scales_is_refused():
    layer = cv.layer_map(two_heads, N, D, NOISE)
    other = {"V1": cv.matrix_noise(D, 0.5), "V2": cv.matrix_noise(D, 0.3)}
    with pytest.raises(ValueError, match="the noises must have the same shape and scale"):
        cv.check_local_consistency(layer, cv.limit_sde(two_heads_drift, two_heads_diffusion, N, D, other))


def test_the_generator_of_the_two_heads_keeps_the_sphere_and_moves_the_overlap():
    """L |x_i|^2 = 0 on the sphere (both heads' Ito terms together) and L <x_1, x_2> equals the closed form
    -(d-1) sum_h s_h^2 |a_h|^2-weighted overlap terms written here independently of the derivation."""
    limit = verify.one_step_limit(two_heads_sym, N, D, NOISE)
    x0, x1 = limit.tokens[0], limit.tokens[1]
    state = np.random.default_rng(4).standard_normal((N, D))
    state /= np.linalg.norm(state, axis=1, keepdims=True)
    for i in range(N):  # the state is on the sphere to double precision, hence 1e-12 rather than 1e-25
        assert abs(limit.evaluate(limit.generator((limit.tokens[i].T * limit.tokens[i])[0]), state)) < 1e-12
    # L <x_0, x_1> = <b_0, x_1> + <x_0, b_1> + sum_h s_h^2 <a_0^h, a_1^h> <P_0 e, P_1 e> summed over e: the
    # cross covariance of the two tokens' increments, sum_h s_h^2 <a_0^h, a_1^h> tr(P_0 P_1)
    x = [sp.Matrix(row) for row in state]
    a = [[attention_sym(x, i, b).evalf(40) for b in BETAS] for i in range(2)]
    drifts = [
        -sp.Rational(D - 1, 2) * sum(s**2 * (a[i][h].T * a[i][h])[0] for h, s in enumerate(SIGMAS)) * x[i]
        for i in range(2)
    ]
    projections = [sp.eye(D) - x[i] * x[i].T for i in range(2)]
    expected = (
        (drifts[0].T * x[1])[0]
        + (x[0].T * drifts[1])[0]
        + sum(s**2 * (a[0][h].T * a[1][h])[0] for h, s in enumerate(SIGMAS)) * (projections[0] * projections[1]).trace()
    )
    assert abs(limit.evaluate(limit.generator((x0.T * x1)[0]), state) - float(expected)) < 1e-12


def test_a_scaled_diffusion_of_a_joint_noise_is_a_near_miss_the_local_check_rejects():
    """``cv.scaled_diffusion`` takes the packed increment the claim's own diffusion takes (here a dict of two matrix
    noises), so a 5% noise variance error is one call; the drift is kept."""
    layer = cv.layer_map(two_heads, N, D, NOISE, name="two heads")
    claim = cv.limit_sde(two_heads_drift, two_heads_diffusion, N, D, NOISE, name="true")
    near = cv.scaled_diffusion(claim, np.sqrt(1.05))
    x = cv.uniform_sphere(PathStreams(0, 0, 2, (5,)), N, D)
    dw = NOISE["V1"].standard(np.random.default_rng(0), (2, *claim.noise.shape))
    np.testing.assert_allclose(near.diffusion(x, dw), np.sqrt(1.05) * claim.diffusion(x, dw), rtol=1e-15)
    np.testing.assert_array_equal(near.drift(x), claim.drift(x))
    outcome = cv.check_local_consistency(layer, near, states=("uniform", "near merged"))
    assert outcome.verdict == "fail", outcome.table()
    with pytest.raises(ValueError, match="factor must be finite"):
        cv.scaled_diffusion(claim, float("nan"))
