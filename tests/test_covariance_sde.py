"""The shaped ReLU MLP's neural covariance SDE (``verify._analysis.covariance``): the derivation and its checks, the
correlation SDE against its closed form, and near misses that the checks reject."""

import numpy as np
import pytest
import sympy as sp

from verify._analysis import ResidualNetwork, ShapedMLP, correlation_ode, correlation_sde
from verify._analysis import covariance as covariance_sde
from verify._derivations import (
    K_SE,
    kernel_by_conditioning,
    residual_network_covariance,
    shaped_mlp_covariance,
    simulated_one_step,
    simulated_resnet_step,
)

c_plus, c_minus, epsilon, rho = (
    covariance_sde.c_plus,
    covariance_sde.c_minus,
    covariance_sde.epsilon,
    covariance_sde.rho,
)
relu_moment = covariance_sde.relu_moment


def test_the_derivation_verifies_every_check():
    der = shaped_mlp_covariance()
    assert der.status == "verified", [c for c in der.checks if c["status"] != "verified"]
    assert len(der.checks) == 7


def test_the_correlation_sde_is_nu_less_the_wishart_pull_with_diffusion_one_minus_rho_squared():
    """Closed form written here: nu(rho) = (c_+ - c_-)^2 (sqrt(1 - rho^2) - rho arccos rho) / (2 pi), the Wishart part
    -rho (1 - rho^2) / 2, and (1 - rho^2)^2 for the squared diffusion."""
    drift, squared = correlation_sde(ShapedMLP(2))
    nu = (c_plus - c_minus) ** 2 * (sp.sqrt(1 - rho**2) - rho * sp.acos(rho)) / (2 * sp.pi)
    assert sp.simplify(drift - (nu - rho * (1 - rho**2) / 2)) == 0
    assert sp.simplify(squared - (1 - rho**2) ** 2) == 0


def test_a_shaping_slower_than_n_to_the_minus_half_leaves_an_order_eps_drift():
    """s_+- = 1 + c_+- eps^(1/2) (a shaping at rate n^(-1/4)): the one-step mean's O(eps) term no longer vanishes, so
    the expansion check would fail (the rate n^(-1/2) is the one the drift needs)."""
    model = ShapedMLP(2)
    mean = model.one_step_mean().subs(epsilon, sp.sqrt(epsilon))
    first = sp.simplify(sp.diff(mean[0, 1], epsilon).subs(epsilon, 0))
    assert first != 0


def test_the_quadrature_check_rejects_arccos_for_pi_minus_arccos():
    wrong = sp.sqrt(1 * 1) * (sp.sqrt(1 - sp.Float(0.55) ** 2) + sp.acos(sp.Float(0.55)) * 0.55) / (2 * sp.pi)
    integral = float(kernel_by_conditioning(1.0, 0.0, 1.0, 1.0, 0.55))
    assert abs(float(relu_moment(sp.Float(1), sp.Float(1), sp.Float(0.55))) - integral) < 1e-12
    assert abs(float(wrong) - integral) > 1e-3


@pytest.mark.parametrize("factor", [0.0, 1.5])
def test_the_simulated_one_step_rejects_a_drift_off_by_half_or_absent(factor):
    """At n = 256 and 16384 states the simulated n (E V' - V)_12 has standard error 0.012 against the derived 0.208:
    the derived value is within 4 standard errors (checked by the derivation), drift x 1.5 and no drift are not."""
    v = np.array([[1.0, 0.3], [0.3, 1.5]])
    mean, se = simulated_one_step(v, (0.8, -0.5), 256, 16384)
    model = ShapedMLP(2)
    symbols = {model.state[0, 0]: 1.0, model.state[0, 1]: 0.3, model.state[1, 1]: 1.5, c_plus: 0.8, c_minus: -0.5}
    exact = float((model.one_step_mean()[0, 1].subs(symbols).subs(epsilon, 256**-0.5) - 0.3) * 256)
    assert abs(mean[0, 1] - exact) < K_SE * se[0, 1]
    assert abs(mean[0, 1] - factor * exact) > K_SE * se[0, 1]


def test_the_resnet_derivation_verifies_and_its_correlation_rate_is_the_shaped_mlps_nu():
    der = residual_network_covariance()
    assert der.status == "verified", [c for c in der.checks if c["status"] != "verified"]
    rate = correlation_ode(ResidualNetwork(2, "relu"))
    depth_ratio = covariance_sde.T
    assert sp.simplify(rate - (sp.sqrt(1 - rho**2) - rho * sp.acos(rho)) / (sp.pi * depth_ratio)) == 0


def test_the_resnet_step_check_sees_a_missing_branch_scale_and_a_diffusion_of_order_one():
    """One simulated layer (n = 128, depth 2 n): n E[V' - V] is c K(Z) / T, and twice that (the branch's c left out of
    the mean, or depth n instead of 2 n) is rejected; n^2 Var(V'_12) ~ 0.95 is O(1), so n Var = O(1/n): a claimed
    diffusion of order one per unit t (n Var ~ 1) is rejected by orders of magnitude."""
    v = np.array([[1.0, -0.4], [-0.4, 0.8]])
    mean, se, variance, (v_z, k_z) = simulated_resnet_step(v, "relu", 128, 2.0, 4000)
    assert np.all(np.abs(mean - k_z / 2.0) < K_SE * se)
    assert np.any(np.abs(mean - k_z) > K_SE * se)
    assert variance[0] / 128 < 0.05


def test_an_unknown_branch_is_refused():
    with pytest.raises(ValueError, match="branch must be 'relu' or 'linear', got 'tanh'"):
        ResidualNetwork(2, "tanh")
