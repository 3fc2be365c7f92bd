"""``derive_limit`` of a width-indexed ``activation_block``: its covariance SDE by automatic differentiation of
Gaussian quadratures equals the symbolic derivation of the shaped ReLU MLP (``covariance_limit``, arc-cosine kernels in
sympy) to rounding, a smooth activation's drift equals its Gaussian integrals by scipy, a user's shaped ReLU block
passes its derived limit in the local check while the drift 20% off fails (slow), and activations without a limit in
t = l/n are refused naming why."""

import numpy as np
import pytest
from scipy import integrate

import convergence as cv

torch = pytest.importorskip("torch")  # the torch extra (CI installs it): skipped, never passed, without torch

STATES = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.5], [0.5, 2.0]], [[2.0, -0.9], [-0.9, 0.5]]])
EDGES = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, -0.5], [-0.5, 0.25]]])  # correlation +1 and -1


def shaped_relu(c_plus: float, c_minus: float):
    """psi(x; eps) = sqrt(c) (s_+ max(x, 0) + s_- min(x, 0)), s_+- = 1 + c_+- eps, c = 2 / (s_+^2 + s_-^2)."""

    def psi(x, eps):
        s_plus, s_minus = 1 + c_plus * eps, 1 + c_minus * eps
        return torch.sqrt(2 / (s_plus**2 + s_minus**2)) * torch.where(x > 0, s_plus * x, s_minus * x)

    return psi


def smooth(x, eps):
    """x + eps (sqrt(1 + x^2) - 1): even in x beside the identity, so the first order in eps has mean 0."""
    return x + eps * (torch.sqrt(1 + x * x) - 1)


@pytest.mark.parametrize("c_plus, c_minus", [(1.5, -1.5), (0.8, -0.5)])
def test_the_shaped_relu_limit_is_the_symbolic_derivation(c_plus, c_minus):
    derived = cv.derive_limit(cv.activation_block(shaped_relu(c_plus, c_minus)))
    symbolic = cv.covariance_limit(cv.ShapedMLPBlock(2, c_plus=c_plus, c_minus=c_minus))
    states = np.concatenate([STATES, EDGES])
    np.testing.assert_allclose(derived.drift(states), symbolic.drift(states), rtol=0, atol=1e-12)
    np.testing.assert_allclose(derived.diffusion(states), symbolic.diffusion(states), rtol=0, atol=1e-12)


def test_the_block_is_the_shaped_mlp_block():
    """The same step and the same exact mean as ``ShapedMLPBlock`` on the same weights, at a width where
    eps = n^-1/2 = 1/4."""
    rng = np.random.default_rng(3)
    z, weights = rng.standard_normal((5, 2, 16)), {"W": rng.standard_normal((5, 16, 16))}
    ours, shipped = cv.activation_block(shaped_relu(1.5, -1.5)), cv.ShapedMLPBlock(2, 1.5, -1.5)
    np.testing.assert_allclose(ours.block(z, weights), shipped.block(z, weights), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(ours.mean_estimate(z, weights), shipped.mean_estimate(z, weights), rtol=1e-13)


def test_a_smooth_activations_drift_is_its_gaussian_integral_by_scipy():
    """d^2/d eps^2 of (h_a + eps g(h_a)) (h_b + eps g(h_b)) is 2 g(h_a) g(h_b): b_ab = E[g(h_a) g(h_b)],
    g(x) = sqrt(1 + x^2) - 1, (h_a, h_b) ~ N(0, V), by scipy's quad and dblquad."""
    limit = cv.derive_limit(cv.activation_block(smooth, rate=1.0))
    for v in STATES:
        cov = np.linalg.inv(v)
        norm = 1 / (2 * np.pi * np.sqrt(np.linalg.det(v)))

        def density(x, y):
            return norm * np.exp(-0.5 * (cov[0, 0] * x * x + 2 * cov[0, 1] * x * y + cov[1, 1] * y * y))

        def g(x):
            return np.sqrt(1 + x * x) - 1

        cross, _ = integrate.dblquad(
            lambda y, x: g(x) * g(y) * density(x, y), -40, 40, -40, 40, epsabs=1e-13, epsrel=1e-12
        )
        diagonal = [
            integrate.quad(lambda h, s=v[a, a]: g(h) ** 2 * np.exp(-h * h / (2 * s)) / np.sqrt(2 * np.pi * s), -60, 60)[
                0
            ]
            for a in range(2)
        ]
        drift = limit.drift(v[None])[0]
        np.testing.assert_allclose([drift[0, 0], drift[1, 1], drift[0, 1]], [*diagonal, cross], rtol=1e-8)


@pytest.mark.slow  # the local check at its default budget: about 30 s
def test_a_users_shaped_relu_block_passes_its_derived_limit_and_a_drift_20_percent_off_fails():
    block = cv.activation_block(shaped_relu(1.5, -1.5), rate=1.0)
    limit = cv.derive_limit(block)
    states = {"uncorrelated": np.eye(2)}
    assert cv.check_local_consistency(block, limit, states=states, target=0.2).verdict == "pass"
    wrong = cv.covariance_sde(lambda s: 1.2 * limit.drift(s), limit.diffusion, 2, name="drift x 1.2")
    assert cv.check_local_consistency(block, wrong, states=states, target=0.2).verdict == "fail"


@pytest.mark.parametrize(
    "activation, reason",
    [
        (lambda x, eps: 2 * x + eps * x, "must be the identity"),
        (lambda x, eps: (1 + eps) * x, "first derivative in eps"),
        (lambda x, eps: x + eps * (abs(x - 1) + abs(x + 1) - 2), "do not converge"),
        (lambda x, eps: x + abs(eps) * (torch.sqrt(1 + x * x) - 1), "not smooth in eps"),
    ],
    ids=["not the identity at eps = 0", "a gain 1 + n^-1/2", "kinks at +-1", "|eps|"],
)
def test_an_activation_without_a_width_limit_is_refused_naming_why(activation, reason):
    with pytest.raises(ValueError, match=reason):
        cv.derive_limit(cv.activation_block(activation)).drift(STATES[:1])


@pytest.mark.parametrize(
    "state, where",
    [
        ([[1.0, 1.5], [1.5, 1.0]], "expected a covariance"),
        ([[1.0, np.nan], [np.nan, 1.0]], "expected finite entries"),
        ([[0.0, 0.0], [0.0, 1.0]], "positive diagonal"),
    ],
)
def test_a_state_that_is_no_covariance_is_refused_naming_the_entry(state, where):
    with pytest.raises(ValueError, match=rf"V\[0, 0, [01]\].*{where}"):
        cv.derive_limit(cv.activation_block(smooth)).drift(np.array([state]))


def test_derive_limit_names_what_it_takes():
    with pytest.raises(TypeError, match="activation_block"):
        cv.derive_limit(cv.ShapedMLPBlock(2))
    with pytest.raises(TypeError, match="activation"):
        cv.activation_block("relu")
