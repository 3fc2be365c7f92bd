"""The shaped ReLU MLP's neural covariance SDE (``verify._analysis.covariance``), each step checked another way: the
arc-cosine moment and the shaped kernel by mpmath quadrature, Isserlis' pairing by the moment generating function,
the one-step mean by simulating the layer's neurons with numpy, and the correlation's SDE at its ends."""

from __future__ import annotations

import mpmath
import numpy as np
import sympy as sp

from .._analysis.covariance import (
    ResidualNetwork,
    ShapedMLP,
    T,
    branch_covariance,
    c_minus,
    c_plus,
    correlation_ode,
    correlation_sde,
    epsilon,
    piecewise_linear_kernel,
    relu_moment,
    rho,
)
from .._common import random_stream, working_digits
from .derivation import Derivation

# (var_a, var_b, correlation) at which the closed forms meet quadrature
QUADRATURE_POINTS = ((1.0, 1.0, -0.9), (0.7, 1.6, -0.2), (2.0, 0.5, 0.55), (1.0, 1.0, 0.97))
SHAPING = {c_plus: 0.8, c_minus: -0.5}
ONE_STEP = {"width": 256, "samples": 16384, "state": ((1.0, 0.3), (0.3, 1.5))}
K_SE = 4.0  # one-step check: within 4 standard errors (false-failure rate about 6e-5 per entry)


def kernel_by_conditioning(
    s_plus: float, s_minus: float, var_a: float, var_b: float, correlation: float, dps: int = 30
):
    """E[phi(x) phi(y)], phi(x) = s_+ max(x, 0) + s_- min(x, 0), for centred Gaussian (x, y), as a 1-D integral over
    x = s_a g: given g, y ~ N(mu, tau^2) with mu = s_b r g, tau = s_b sqrt(1 - r^2), and E[y^+ | g] =
    mu Phi(mu / tau) + tau phi(mu / tau), E[y^- | g] = mu - E[y^+ | g] (another route than the arc-cosine form)."""
    with working_digits(dps):
        s_a, s_b, r = mpmath.sqrt(var_a), mpmath.sqrt(var_b), mpmath.mpf(correlation)
        tau = s_b * mpmath.sqrt(1 - r**2)

        def integrand(g):
            x, mu = s_a * g, s_b * r * g
            positive = mu * mpmath.ncdf(mu / tau) + tau * mpmath.npdf(mu / tau)
            conditional = s_plus * positive + s_minus * (mu - positive)
            return (s_plus * x if x > 0 else s_minus * x) * conditional * mpmath.npdf(g)

        return mpmath.quad(integrand, [-mpmath.inf, 0, mpmath.inf])


def shaped_mlp_covariance() -> Derivation:
    """The covariance SDE of the shaped ReLU MLP for m inputs and the correlation SDE of two (module docstring)."""
    der = Derivation("shaped_mlp_covariance", "shaped ReLU MLP at width n, t = l/n: dV = b(V) dt + Sigma(V)^(1/2) dB")
    model = ShapedMLP(2)
    drift, squared = correlation_sde(model)
    der.results.update(
        {
            "b_12(V)": model.drift()[0, 1],
            "Sigma_12,12": model.diffusion(0, 1, 0, 1),
            "Sigma_11,22": model.diffusion(0, 0, 1, 1),
            "correlation drift": drift,
            "correlation diffusion^2": squared,
        }
    )
    orders = ShapedMLP(3).expansion_orders()
    der.check(
        "the one-step mean is V + O(1/n): its eps^0 and eps^1 terms vanish (m = 3)", orders == sp.zeros(*orders.shape)
    )
    diagonal = [sp.simplify(ShapedMLP(3).drift()[a, a]) for a in range(3)]
    der.check("the diagonal has no drift (c keeps E V_aa)", all(v == 0 for v in diagonal), f"{diagonal}")
    _check_kernels(der)
    _check_isserlis(der)
    _check_one_step(der, model)
    at_ends = {end: (sp.simplify(drift.subs(rho, end)), sp.simplify(squared.subs(rho, end))) for end in (1, -1)}
    der.check(
        "rho = 1 is a fixed point (drift and diffusion 0); at rho = -1 the drift is (c_+ - c_-)^2 / 2 > 0",
        at_ends[1] == (0, 0) and sp.simplify(at_ends[-1][0] - (c_plus - c_minus) ** 2 / 2) == 0 and at_ends[-1][1] == 0,
        f"{at_ends}",
    )
    return der


def _check_kernels(der: Derivation) -> None:
    gaps = {"relu": [], "shaped": []}
    for name, (s_plus, s_minus) in (("relu", (1.0, 0.0)), ("shaped", (1.24, 0.85))):
        for var_a, var_b, r in QUADRATURE_POINTS:
            closed = piecewise_linear_kernel(
                sp.Float(s_plus), sp.Float(s_minus), sp.Float(var_a), sp.Float(var_b), sp.Float(r)
            )
            if name == "relu":
                closed = relu_moment(sp.Float(var_a), sp.Float(var_b), sp.Float(r))
            gaps[name].append(abs(float(closed) - float(kernel_by_conditioning(s_plus, s_minus, var_a, var_b, r))))
    der.check(
        "arc-cosine moment E[x^+ y^+] equals the conditioned 1-D integral",
        max(gaps["relu"]) < 1e-12,
        f"max gap {max(gaps['relu']):.1e}",
    )
    der.check(
        "shaped kernel E[phi(x) phi(y)] (s_+ = 1.24, s_- = 0.85) equals the conditioned 1-D integral",
        max(gaps["shaped"]) < 1e-12,
        f"max gap {max(gaps['shaped']):.1e}",
    )


def _check_isserlis(der: Derivation) -> None:
    model = ShapedMLP(3)
    k = model.state
    gaps = [
        sp.simplify(model.diffusion(a, b, c, d) - (k[a, c] * k[b, d] + k[a, d] * k[b, c]))
        for a, b, c, d in ((0, 1, 0, 1), (0, 1, 1, 2), (0, 0, 1, 2), (2, 2, 2, 2))
    ]
    der.check(
        "Sigma_ab,cd from the moment generating function equals Isserlis' pairing V_ac V_bd + V_ad V_bc (m = 3)",
        all(g == 0 for g in gaps),
        f"{gaps}",
    )


def simulated_one_step(
    state: np.ndarray, shaping: tuple[float, float], width: int, samples: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The shaped MLP's n (E[V' | Z] - V(Z)) = n (c K(Z) - V(Z)) and its standard error, over ``samples`` states Z
    of ``width`` neurons with columns i.i.d. N(0, ``state``), s_+- = 1 + c_+- / sqrt(n) for ``shaping`` = (c_+, c_-):
    the layer written in numpy, independently of the symbolic derivation (E over W is exact: c K(Z))."""
    eps = width**-0.5
    s_plus, s_minus = 1 + shaping[0] * eps, 1 + shaping[1] * eps
    scale = 2 / (s_plus**2 + s_minus**2)
    z = random_stream(seed, (55, 1)).standard_normal((samples, width, state.shape[0])) @ np.linalg.cholesky(state).T
    phi = np.where(z > 0, s_plus * z, s_minus * z)
    # the state's own V(Z), not its law's V: the fluctuations of V(Z) about V are the state's, not the step's
    per_sample = scale * np.einsum("sna,snb->sab", phi, phi) - np.einsum("sna,snb->sab", z, z)
    return per_sample.mean(axis=0), per_sample.std(axis=0, ddof=1) / np.sqrt(samples)


def _check_one_step(der: Derivation, model: ShapedMLP) -> None:
    """The simulated one-step mean at width n against the derived one at eps = n^{-1/2} (exact in eps), beside the
    drift (its eps -> 0 limit)."""
    width, samples, v = ONE_STEP["width"], ONE_STEP["samples"], np.array(ONE_STEP["state"])
    mean, se = simulated_one_step(v, (SHAPING[c_plus], SHAPING[c_minus]), width, samples)
    symbols = {model.state[0, 0]: v[0, 0], model.state[0, 1]: v[0, 1], model.state[1, 1]: v[1, 1], **SHAPING}
    exact = np.array((model.one_step_mean().subs(symbols).subs(epsilon, width**-0.5) - sp.Matrix(v)) * width, float)
    limit = np.array(model.drift().subs(symbols), dtype=float)
    worst = float(np.max(np.abs(mean - exact) / se))
    der.check(
        f"simulated one-step mean at n = {width} ({samples} states) equals the derived one at eps = n^-1/2",
        worst < K_SE,
        f"n (E V' - V)_12: {mean[0, 1]:.4f} +- {se[0, 1]:.4f}, derived {exact[0, 1]:.4f}, drift b_12 {limit[0, 1]:.4f}",
    )


RESNET_STEP = {"width": 128, "depth_ratio": 2.0, "samples": 4000, "state": ((1.0, -0.4), (-0.4, 0.8))}


def simulated_resnet_step(
    state: np.ndarray, branch: str, width: int, depth_ratio: float, samples: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One layer of the 1/sqrt(depth) ResNet (``ResidualNetwork``) at one state Z (columns i.i.d. N(0, ``state``)),
    written in numpy, over ``samples`` draws of W: n E[V' - V] and n^2 Var(V'_12) with their standard errors, and the
    state's own V(Z) and c K(Z) (at which the derived formulas are evaluated)."""
    rng = random_stream(seed, (55, 2))
    z = rng.standard_normal((width, 2)) @ np.linalg.cholesky(state).T  # (neurons, inputs)
    phi, c = (np.maximum(z, 0.0), 2.0) if branch == "relu" else (z, 1.0)
    v_z, k_z = z.T @ z / width, c * phi.T @ phi / width
    depth = depth_ratio * width
    steps = []
    for _ in range(samples):
        w = rng.standard_normal((width, width))
        moved = z + np.sqrt(c / (depth * width)) * w @ phi  # Z' = Z + sqrt(c / (L n)) phi(Z) W^T, transposed
        steps.append(moved.T @ moved / width - v_z)
    steps = np.array(steps)
    mean, mean_se = width * steps.mean(axis=0), width * steps.std(axis=0, ddof=1) / np.sqrt(samples)
    centred = width**2 * (steps[:, 0, 1] - steps[:, 0, 1].mean()) ** 2
    return mean, mean_se, np.array([centred.mean(), centred.std(ddof=1) / np.sqrt(samples)]), np.stack([v_z, k_z])


def residual_network_covariance() -> Derivation:
    """The 1/sqrt(depth) ResNet's covariance limit (``ResidualNetwork``): an ODE, and its correlation's rate against
    the shaped MLP's drift (Li and Nica 2023: the two share a limit when depth << width)."""
    der = Derivation("residual_network_covariance", "ResNet, branch 1/sqrt(T n), t = l/n: dV/dt = c K(V) / T, no noise")
    relu, linear = ResidualNetwork(2, "relu"), ResidualNetwork(2, "linear")
    rate = correlation_ode(relu)
    der.results.update({"b(V), ReLU": relu.drift(), "d rho / dt, ReLU": rate, "b(V), linear": linear.drift()})
    shaped = ShapedMLP(2)
    scale = sp.sqrt(shaped.state[0, 0] * shaped.state[1, 1])
    nu = (shaped.drift()[0, 1] / scale).subs(shaped.state[0, 1], rho * scale)
    matched = sp.simplify(rate - nu.subs({c_plus: sp.sqrt(2 / T), c_minus: 0}))
    der.check(
        "the ReLU ResNet's correlation rate is the shaped MLP's nu(rho) with (c_+ - c_-)^2 = 2 / T",
        matched == 0,
        f"difference {matched}",
    )
    der.check("a linear branch leaves the correlation constant", correlation_ode(linear) == 0)
    _check_resnet_step(der, relu)
    return der


def _check_resnet_step(der: Derivation, model: ResidualNetwork) -> None:
    """Simulated one layer at one state: n E[V' - V] equals c K(Z) / T within 4 standard errors, and n^2 Var(V'_12)
    equals the derived leading term within 4 standard errors plus its O(1 / (T n)) relative remainder, so
    n Var(V'_12) = O(1/n): no diffusion."""
    width, ratio, samples = RESNET_STEP["width"], RESNET_STEP["depth_ratio"], RESNET_STEP["samples"]
    mean, mean_se, variance, (v_z, k_z) = simulated_resnet_step(
        np.array(RESNET_STEP["state"]), model.branch, width, ratio, samples
    )
    worst = float(np.max(np.abs(mean - k_z / ratio) / mean_se))
    derived = float(branch_covariance(v_z, k_z, ratio, (0, 1, 0, 1)))
    allowance = K_SE * variance[1] + derived * 2 / (ratio * width)
    der.check(
        f"simulated layer (n = {width}, depth {ratio:g} n, {samples} draws of W): n E[V' - V] = c K(Z) / T",
        worst < K_SE,
        f"largest gap {worst:.2f} standard errors",
    )
    der.check(
        "simulated n^2 Var(V'_12) equals (c/T)(V_11 K_22 + 2 V_12 K_12 + V_22 K_11): n Var -> 0",
        abs(variance[0] - derived) < allowance,
        f"{variance[0]:.4f} +- {variance[1]:.4f} against {derived:.4f} (allowance {allowance:.4f})",
    )
