"""Model F and hybrid layer maps: sphere, equivariances, loop oracle, extreme beta."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import ortho_group

from convergence._models import ENTRY_LAWS, FedorovModel, HybridModel, attention_average

from .helpers import random_tokens
from .oracle import fedorov_layer_loop, hybrid_layer_loop

params = st.fixed_dictionaries(
    {
        "tokens": st.integers(1, 6),
        "dim": st.integers(2, 9),
        "beta": st.floats(-1e3, 1e3),
        "sigma": st.floats(0.0, 3.0),
        "law": st.sampled_from(ENTRY_LAWS),
        "h": st.floats(1e-4, 1.0),
        "seed": st.integers(0, 2**32 - 1),
        "mean": st.booleans(),
    }
)


def _model_and_noise(p):
    rng = np.random.default_rng(p["seed"])
    d = p["dim"]
    mean = rng.standard_normal((d, d)) if p["mean"] else None
    model = FedorovModel(tokens=p["tokens"], dim=d, beta=p["beta"], sigma=p["sigma"], law=p["law"], mean_value=mean)
    x = random_tokens(rng, 5, p["tokens"], d)
    dw = np.stack([model.noise.increments(rng, 1, p["h"])[0] for _ in range(5)])
    return model, x, dw, rng


@given(params)
def test_tokens_stay_on_sphere(p):
    model, x, dw, _ = _model_and_noise(p)
    for _ in range(5):
        x = model.layer(x, dw, p["h"])
    assert np.all(np.isfinite(x))
    assert_allclose(np.linalg.norm(x, axis=-1), 1.0, rtol=0, atol=1e-12)


@given(params)
def test_permutation_equivariance(p):
    model, x, dw, rng = _model_and_noise(p)
    perm = rng.permutation(p["tokens"])
    assert_allclose(model.layer(x[:, perm], dw, p["h"]), model.layer(x, dw, p["h"])[:, perm], atol=1e-12)


@given(params.filter(lambda p: abs(p["beta"]) <= 50))
def test_rotation_equivariance(p):
    # layer(O X, O V O^T) = O layer(X, V) when Q^T K = I (and M -> O M O^T).
    model, x, dw, rng = _model_and_noise(p)
    o = ortho_group.rvs(p["dim"], random_state=rng) if p["dim"] > 1 else np.eye(1)
    rotated_model = FedorovModel(
        tokens=model.tokens,
        dim=model.dim,
        beta=model.beta,
        sigma=model.sigma,
        law=model.law,
        mean_value=None if model.mean_value is None else o @ model.mean_value @ o.T,
    )
    left = rotated_model.layer(x @ o.T, o @ dw @ o.T, p["h"])
    assert_allclose(left, model.layer(x, dw, p["h"]) @ o.T, atol=1e-10)


@given(params.filter(lambda p: abs(p["beta"]) <= 200))
def test_vectorised_layer_equals_loop_oracle(p):
    model, x, dw, rng = _model_and_noise(p)
    g = rng.standard_normal((p["dim"], p["dim"])) / np.sqrt(p["dim"])
    general = FedorovModel(
        tokens=model.tokens,
        dim=model.dim,
        beta=model.beta,
        sigma=model.sigma,
        interaction=g,
        mean_value=model.mean_value,
    )
    expected = fedorov_layer_loop(x, dw, p["h"], p["beta"], g, model.mean_value)
    assert_allclose(general.layer(x, dw, p["h"]), expected, rtol=1e-10, atol=1e-12)


def test_query_key_only_enter_through_their_product(rng):
    q, k = rng.standard_normal((2, 4, 4))
    x = random_tokens(rng, 3, 5, 4)
    dw = rng.standard_normal((3, 4, 4)) * 0.1
    by_qk = FedorovModel.from_query_key(q, k, tokens=5, dim=4, beta=2.0)
    by_g = FedorovModel(tokens=5, dim=4, beta=2.0, interaction=q.T @ k)
    assert_array_equal(by_qk.layer(x, dw, 0.1), by_g.layer(x, dw, 0.1))
    assert_allclose(by_g.layer(x, dw, 0.1), fedorov_layer_loop(x, dw, 0.1, 2.0, q.T @ k), atol=1e-12)


@pytest.mark.parametrize("beta", [1e3, -1e3])
def test_softmax_finite_at_extreme_beta(rng, beta):
    d = 5
    e = np.eye(d)[0]
    geometries = [
        np.stack([e, e, e]),  # one cluster
        np.stack([e, -e, e]),  # antipodal
        random_tokens(rng, 1, 3, d)[0],  # generic
        np.stack([e, np.eye(d)[1], -np.eye(d)[1]]),
    ]
    x = np.stack(geometries)
    a = attention_average(x, beta)
    assert np.all(np.isfinite(a)) and np.all(np.linalg.norm(a, axis=-1) <= 1 + 1e-12)
    model = FedorovModel(tokens=3, dim=d, beta=beta)
    out = model.layer(x, rng.standard_normal((4, d, d)) * 0.1, 0.01)
    assert np.all(np.isfinite(out))


def test_deterministic_flow_increases_energy_and_collapses(rng):
    # GLPR: with Q = K = V = I the energy sum_ij exp(beta <x_i,x_j>) / (2 beta n^2) never decreases.
    n, d, beta, h = 6, 3, 1.0, 0.01
    model = FedorovModel(tokens=n, dim=d, beta=beta, sigma=0.0, mean_value=np.eye(d))
    x = random_tokens(rng, 4, n, d)
    zero = np.zeros((4, d, d))

    def energy(y):
        return np.exp(beta * y @ np.swapaxes(y, -1, -2)).sum(axis=(-1, -2)) / (2 * beta * n**2)

    previous = energy(x)
    for _ in range(3000):
        x = model.layer(x, zero, h)
        current = energy(x)
        assert np.all(current >= previous - 1e-13)
        previous = current
    gram = x @ np.swapaxes(x, -1, -2)
    assert gram.min() > 1 - 1e-6


@given(st.integers(1, 4), st.integers(2, 6), st.floats(-5, 5), st.floats(0, 3), st.integers(0, 2**31))
def test_hybrid_layer_equals_loop_oracle(n, d, beta, eps, seed):
    rng = np.random.default_rng(seed)
    x = random_tokens(rng, 4, n, d)
    db = rng.standard_normal(4) * 0.1
    model = HybridModel(dim=d, beta=beta, eps=eps, tokens=n)
    assert_allclose(model.layer(x, db, 0.01), hybrid_layer_loop(x, db, 0.01, beta, eps), rtol=1e-10, atol=1e-12)


def test_hybrid_finite_and_on_sphere_at_extreme_beta(rng):
    model = HybridModel(dim=4, beta=1e3, eps=2.0)
    x = random_tokens(rng, 16, 2, 4)
    for _ in range(20):
        x = model.layer(x, model.noise.increments(rng, 16, 0.01)[:, ...], 0.01)
    assert np.all(np.isfinite(x))
    assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-12)


@pytest.mark.parametrize("beta", [3.0, -250.0, 299.0, 301.0, 1e3])
def test_attention_average_is_the_shifted_softmax_and_does_not_depend_on_the_batch(rng, beta):
    """Unshifted (|score| <= 300) or shifted, the average equals the row-max-shifted softmax to rounding, and a
    path's result is the same (to rounding) alone or beside a path that needs the shift (decided per path)."""
    from convergence._models import attention_scores, softmax_weights

    x = random_tokens(rng, 3, 7, 4)
    x[1] *= 1.05  # off the sphere: its bound is 1.1 |beta|
    reference = softmax_weights(attention_scores(x, beta)) @ x
    batch = attention_average(x, beta)
    assert_allclose(batch, reference, rtol=1e-13, atol=1e-15)
    for p in range(3):
        assert_allclose(attention_average(x[p : p + 1], beta)[0], batch[p], rtol=1e-14, atol=0)


@pytest.mark.parametrize("beta", [0.7, -40.0, 1e3, -1e3])
@pytest.mark.parametrize("general", [False, True])
def test_two_token_attention_is_the_softmax_in_closed_form(rng, beta, general):
    """Two tokens take ``two_token_average``: the shifted softmax to rounding, for Q^T K = I or any G, off the sphere,
    merged, antipodal and at |beta| = 1e3, each path the same alone as in its batch; a wrong weight (the other
    token's score difference, or tanh(u) for tanh(u/2)) is seen at these tolerances."""
    from convergence._models import attention_scores, softmax_weights

    x = random_tokens(rng, 6, 2, 5)
    x[1] *= 1.05
    x[2, 1] = x[2, 0]  # merged
    x[3, 1] = -x[3, 0]  # antipodal
    g = rng.standard_normal((5, 5)) if general else None
    reference = softmax_weights(attention_scores(x, beta, g)) @ x
    batch = attention_average(x, beta, g)
    assert_allclose(batch, reference, rtol=1e-13, atol=1e-15)
    for p in range(6):
        assert_allclose(attention_average(x[p : p + 1], beta, g)[0], batch[p], rtol=1e-14, atol=0)
    bound = np.linalg.norm(x, axis=-1).max(axis=-1)[:, None] * (1 + 1e-15)  # convex combinations of the two tokens
    assert np.all(np.linalg.norm(batch, axis=-1) <= bound)


@pytest.mark.parametrize("name", ["fedorov", "hybrid"])
def test_layer_maps_equal_the_independent_ones_verify_cross_checks(name):
    """``verify._derivations.crosscheck`` writes models F and H from docs/models.md without this package; both must
    agree on the same noise (at random token pairs, not only the check's configuration)."""
    from verify._derivations import crosscheck

    dim, h, params = 4, 0.01, crosscheck.PARAMS
    ours = {
        "fedorov": FedorovModel(2, dim, params["beta"], sigma=params["sigma"], mean_value=params["m"] * np.eye(dim)),
        "hybrid": HybridModel(dim, params["beta"], params["epsilon"], law="gaussian"),
    }[name]
    draw, theirs = crosscheck.INDEPENDENT[name]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((500, 2, dim))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    noise = draw(rng, 500, h, dim)
    np.testing.assert_allclose(ours.layer(x, noise, h), theirs(x, noise, h), rtol=0, atol=1e-14)
