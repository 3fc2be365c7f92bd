"""Weak reference (Kolmogorov), reduced sampler, weak and phase-transition studies."""

import json

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy import stats

import verify
from convergence._cli import main
from convergence._experiments import (
    OVERLAP_OBSERVABLES,
    WeakDesign,
    claim_limit_check,
    coupled_observables,
    limit_check,
    order_check,
    weak_order,
)
from convergence._models import (
    FedorovModel,
    ReducedFedorov,
    gram_factor,
    two_token_factor,
)
from convergence._paths import classify, fixed_overlap, overlap
from convergence._references import expectation, lambdify_overlap, value_gradients
from convergence._statistics import wilson, z_value
from verify._analysis import change_variable, p_antipodal_double, quadratic_form_results
from verify._calculus import d, sigma
from verify._models import beta

from .helpers import random_tokens


def _numpy(expr, var):
    fn = sp.lambdify(var, expr, "numpy")
    return lambda x: np.broadcast_to(np.asarray(fn(x), dtype=float), np.shape(x)).copy()


@pytest.mark.parametrize("dim", [3, 5, 8])
def test_kolmogorov_one_token_exact_zonal_moments(dim):
    # E<x_T, e> = exp(-(d-1) T/2) rho_0 and E[<x_T, e>^2 - 1/d] = exp(-d T)(rho_0^2 - 1/d) (sigma = 1):
    # zonal spherical harmonics of degree 1 and 2 are eigenfunctions of the Laplacian.
    b, a = lambdify_overlap(*verify.overlap_sde("one_token"), {d: dim, sigma: 1.0})
    rho0, horizon = np.array([-0.95, -0.2, 0.4, 0.99]), 0.8
    first = expectation(b, a, lambda x: x, horizon, rho0, points=32)
    second = expectation(b, a, lambda x: x**2, horizon, rho0, points=32)
    assert_allclose(first.value, np.exp(-(dim - 1) * horizon / 2) * rho0, atol=1e-11)
    assert_allclose(second.value, 1 / dim + np.exp(-dim * horizon) * (rho0**2 - 1 / dim), atol=1e-11)


@pytest.mark.parametrize("dim", [3, 8])
def test_value_gradients_are_the_zonal_moments_derivatives(dim):
    """u_rho(t, rho) for one token (sigma = 1): d/d rho of exp(-(d-1)(T-t)/2) rho and of 1/d + exp(-d (T-t))
    (rho^2 - 1/d), at every step time t_k = k T / steps, in time order (exact algebra beside the martingale control
    that uses them)."""
    b, a = lambdify_overlap(*verify.overlap_sde("one_token"), {d: dim, sigma: 1.0})
    horizon, steps = 0.8, 8
    times = horizon * np.arange(steps) / steps
    nodes, first = value_gradients(b, a, lambda x: x, horizon, steps, points=32)
    _, second = value_gradients(b, a, lambda x: x**2, horizon, steps, points=32)
    assert first.shape == second.shape == (steps, nodes.size)
    assert_allclose(first, np.exp(-(dim - 1) * (horizon - times) / 2)[:, None] * np.ones_like(nodes), atol=1e-10)
    assert_allclose(second, np.exp(-dim * (horizon - times))[:, None] * 2 * nodes[None, :], atol=1e-9)


def test_kolmogorov_quadratic_form_invariant_and_merge_probability():
    # In the variable y = (2/pi) S(rho), S the derived invariant, the drift vanishes: E y_T = y_0, and
    # E[(1 + rho_T)/2] tends to P(merge) = (S(rho_0) + pi/2) / pi as T grows (exponent -4 at both ends).
    res = quadratic_form_results()
    y = sp.Symbol("y", real=True)
    drift, diffusion = change_variable(
        res.drift, res.diffusion_squared, 2 * res.invariant / sp.pi, sp.sin(sp.pi * y / 2), y
    )
    assert drift == 0
    rho0 = np.array([-0.7, 0.1, 0.6])
    y0 = 2 * np.arcsin(rho0) / np.pi
    mart = expectation(_numpy(drift, y), _numpy(diffusion, y), lambda t: t, 3.0, y0, points=32)
    assert_allclose(mart.value, y0, atol=1e-12)
    merge = expectation(
        _numpy(drift, y), _numpy(diffusion, y), lambda t: (1 + np.sin(np.pi * t / 2)) / 2, 25.0, y0, points=32
    )
    assert_allclose(merge.value, (np.arcsin(rho0) + np.pi / 2) / np.pi, atol=5e-8)


def test_kolmogorov_reference_for_model_f_is_accurate_to_1e8():
    b, a = lambdify_overlap(*verify.overlap_sde("fedorov"), {d: 4, beta: 1.317, sigma: 0.5})
    sol = expectation(b, a, np.exp, 2.0, [-0.5, 0.3], points=96)
    assert np.all(sol.error < 1e-8)


def test_reduced_sampler_factor_is_exact_even_for_merged_tokens(rng):
    a = random_tokens(rng, 50, 3, 5)
    a[:10, 1] = a[:10, 0]  # merged tokens: singular Gram matrix
    f = gram_factor(a)
    assert_allclose(f @ np.swapaxes(f, -1, -2), a @ np.swapaxes(a, -1, -2), atol=1e-12)


def test_reduced_sampler_has_the_law_of_the_full_matrix(rng):
    # One layer from a fixed state: increments y - x before normalisation are Gaussian with covariance
    # sigma^2 h <a_i, a_j> I. Moments within 4.5 standard errors; a two-sample Kolmogorov-Smirnov test of
    # a projection against the full-matrix sampler at level 1e-3 (false-failure rates ~1e-5 and 1e-3).
    dim, n, paths, h = 6, 3, 200_000, 0.04
    model = FedorovModel(tokens=n, dim=dim, beta=1.5, sigma=0.8)
    reduced = ReducedFedorov(model)
    x = np.repeat(random_tokens(rng, 1, n, dim), paths, axis=0)
    a = model.attention(x[:1])[0]
    dz = np.sqrt(h) * rng.standard_normal((paths, dim, n))
    inc_reduced = model.sigma * (gram_factor(model.attention(x)) @ np.swapaxes(dz, -1, -2))
    v = model.noise.increments(rng, paths, h)
    inc_full = model.attention(x) @ np.swapaxes(v, -1, -2)
    exact = model.sigma**2 * h * (a @ a.T)  # Cov of coordinate k of tokens i and j
    for inc in (inc_reduced, inc_full):
        empirical = np.einsum("pik,pjk->ij", inc, inc) / (paths * dim)
        se = np.sqrt((exact**2 + np.outer(np.diag(exact), np.diag(exact))) / (paths * dim))
        assert np.all(np.abs(empirical - exact) <= 4.5 * se)
    direction = rng.standard_normal((n, dim))
    proj = lambda inc: np.einsum("pik,ik->p", inc, direction)
    assert stats.ks_2samp(proj(inc_reduced), proj(inc_full)).pvalue > 1e-3
    # and the layer itself uses it
    out = reduced.layer(x[:5], dz[:5], h)
    assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    beta=st.floats(-1e3, 1e3),
    dim=st.integers(2, 9),
    merge=st.sampled_from([None, 1.0, -1.0]),
)
def test_two_token_layer_equals_the_general_layer(seed, beta, dim, merge):
    # The closed-form two-token path and the general one (softmax, then Gram-Schmidt) are the same map;
    # `merge` puts token 2 on token 1 or on its antipode (singular Gram matrix).
    rng = np.random.default_rng(seed)
    x = random_tokens(rng, 16, 2, dim)
    if merge is not None:
        x[:8, 1] = merge * x[:8, 0]
    dz = 0.1 * rng.standard_normal((16, dim, 2))
    reduced = ReducedFedorov(FedorovModel(tokens=2, dim=dim, beta=beta, sigma=0.9))
    assert_allclose(reduced.layer(x, dz, 0.01), reduced.general_layer(x, dz, 0.01), rtol=0, atol=1e-13)


@pytest.mark.parametrize("angle", [1e-4, 1e-9, 1e-13, np.pi - 1e-4, np.pi - 1e-9, np.pi])
@pytest.mark.parametrize("beta", [0.0, 2.0, -3.0])
def test_two_token_factor_keeps_relative_accuracy_near_merged_and_antipodal_tokens(angle, beta):
    # Against 120-digit arithmetic on the same float64 tokens (a_i by softmax, then Gram-Schmidt): each of
    # r11, r12, r22 to 1e-9 relative. r22 ~ beta angle^2 near merging (det W -> 0 as the weights -> 1/2);
    # a determinant formed as |a1|^2 |a2|^2 - <a1,a2>^2 would leave no correct digit of it there.
    import mpmath

    x = np.zeros((1, 2, 3))
    x[0, 0, 0] = 1.0
    x[0, 1, :2] = np.cos(angle), np.sin(angle)
    factor = [float(r[0]) for r in two_token_factor(x, beta)]
    with mpmath.workdps(120):
        t = [[mpmath.mpf(float(v)) for v in row] for row in x[0]]
        dot = lambda u, v: mpmath.fsum(p * q for p, q in zip(u, v))
        a = []
        for i in range(2):
            w = [mpmath.exp(beta * dot(t[i], t[j])) for j in range(2)]
            a.append([(w[0] * t[0][k] + w[1] * t[1][k]) / (w[0] + w[1]) for k in range(3)])
        r11 = mpmath.sqrt(dot(a[0], a[0]))
        r12 = dot(a[0], a[1]) / r11 if r11 else mpmath.mpf(0)
        r22 = mpmath.sqrt(max(dot(a[1], a[1]) - r12**2, 0))
        exact = [float(r11), float(r12), float(r22)]
    assert_allclose(factor, exact, rtol=1e-9, atol=1e-50)  # the reference's own cancellation is ~1e-60


def test_reduced_sampler_rejects_non_gaussian_entries():
    with pytest.raises(ValueError, match="Gaussian entries only"):
        ReducedFedorov(FedorovModel(tokens=2, dim=3, law="rademacher"))


def test_double_precision_p_antipodal_matches_30_digits():
    values = p_antipodal_double(5, 2.0, [-0.9, 0.0, 0.7])
    exact = [float(verify.p_antipodal(5, 2.0, r, dps=30)) for r in (-0.9, 0.0, 0.7)]
    assert_allclose(values, exact, rtol=1e-9)


def test_weak_limit_rejects_a_wrong_reference():
    # The limit check against the reference of a wrong SDE (beta set to 0 in the derivation) must fail.
    dim, b = 8, 2.5
    design = WeakDesign(depths=(8, 16, 32), horizon=2.0, paths=20_000, block_paths=5000)
    model = FedorovModel(tokens=2, dim=dim, beta=b)
    obs = {"rho^2": lambda x: overlap(x) ** 2}
    values = coupled_observables(model, design, obs, 0, (90, 0), fixed_overlap(-0.5))
    z = z_value(4)
    fits = weak_order(values, design.steps(), np.random.default_rng(0), 500, z)
    fit = fits["rho^2"]
    for beta_claimed, expected in ((b, "pass"), (0.0, "fail")):
        bb, aa = lambdify_overlap(*verify.overlap_sde("fedorov"), {d: dim, beta: beta_claimed, sigma: model.sigma})
        ref = expectation(bb, aa, OVERLAP_OBSERVABLES["rho^2"], design.horizon, -0.5)
        check = limit_check(
            values["rho^2"],
            fit.differences[-1],
            fit.standard_errors[-1],
            float(ref.value[0]),
            float(ref.error[0]),
            None,
            design,
            z,
            {},
        )
        assert check.verdict == expected, check


def _noisy_ladder(rng, paths: int = 4000, levels: int = 4) -> np.ndarray:
    """Values of an observable on a depth ladder: O(h) differences well above their noise."""
    h = 1.0 / 2 ** np.arange(levels)
    noise = 0.05 * rng.standard_normal((paths, 1)) + 1e-3 * rng.standard_normal((paths, levels))
    return 1.0 + 0.01 * h[None, :] + noise


def test_a_non_finite_value_fails_every_weak_check_with_its_name():
    """A NaN reference error (the allowance), a NaN path on the ladder, a NaN level mean: each fails, never passes
    or sits inconclusive, and the note names it. The finite twin of each passes, so the failure is the NaN's."""
    rng = np.random.default_rng(0)
    design = WeakDesign(depths=(2, 4, 8, 16), horizon=1.0, paths=4000, block_paths=4000)
    values = _noisy_ladder(rng)
    z = z_value(4)
    fit = weak_order({"f": values}, design.steps(), np.random.default_rng(1), 200, z)["f"]
    limit = values[:, -1].mean()
    good = limit_check(values, fit.differences[-1], fit.standard_errors[-1], limit, 1e-4, None, design, z, {})
    assert good.verdict == "pass", good
    bad = limit_check(values, fit.differences[-1], fit.standard_errors[-1], limit, float("nan"), None, design, z, {})
    assert bad.verdict == "fail" and "non-finite values in reference and its error" in bad.note, bad
    claim = np.stack([values[:, -1], values[:, -1]], axis=1)
    assert claim_limit_check(values, claim, z, 0.5, {}).verdict == "pass"
    claim[7, 0] = np.nan  # one Euler path diverged: the allowance becomes NaN
    check = claim_limit_check(values, claim, z, 0.5, {})
    assert check.verdict == "fail" and "non-finite values in claim values" in check.note, check
    assert order_check({"f": fit}, design, z, {}).verdict == "pass"
    broken = values.copy()
    broken[3, 1] = np.nan  # a level whose mean is NaN is not "not significant"
    fits = weak_order({"f": broken}, design.steps(), np.random.default_rng(1), 200, z)
    check = order_check(fits, design, z, {})
    assert check.verdict == "fail" and "non-finite values in coupled differences of f" in check.note, check


def test_wilson_interval_edges():
    assert wilson(0, 100, 3.0)[0] == 0.0 and wilson(100, 100, 3.0)[1] == 1.0
    lo, hi = wilson(30, 100, 1.96)
    assert 0.21 < lo < 0.3 < hi < 0.4


def test_configuration_classes():
    e = np.eye(3)
    x = np.stack(
        [
            np.stack([e[0]] * 4),
            np.stack([e[0], -e[0], e[0], -e[0]]),
            np.stack([e[0], e[0], e[0], -e[0]]),
            np.stack([e[0], e[1], e[0], e[0]]),
        ]
    )
    assert classify(x).tolist() == [0, 1, 2, 3]


@pytest.fixture(scope="module")
def statistical_reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("weak")
    status = main(["run", "weak-fedorov", "phase-transition", "--profile", "quick", "--out", str(out)])
    return out, status


@pytest.mark.slow  # two whole quick-profile studies: minutes on 2 cores
def test_quick_weak_and_phase_transition_studies_pass(statistical_reports):
    out, status = statistical_reports
    assert status == 0
    weak = json.loads((out / "weak-fedorov.json").read_text())
    assert weak["verdict"] == "pass"
    orders = [c for c in weak["checks"] if c["name"] == "weak_order"]
    assert orders and all(c["ci"][0] <= 1.0 <= c["ci"][1] or c["verdict"] == "pass" for c in orders)
    assert all(c["verdict"] == "pass" for c in weak["checks"] if c["name"] == "weak_limit")
    laws = {c["config"]["entries"] for c in weak["checks"]}
    assert laws == {"gaussian", "rademacher", "uniform"}
    phase = json.loads((out / "phase-transition.json").read_text())
    assert phase["verdict"] == "pass"
    names = {c["name"] for c in phase["checks"]}
    assert names >= {"p_antipodal", "undecided", "antipodal_persists", "noise_off_collapse", "hybrid_dichotomy"}
    for name in ("phase-transition.png", "phase-transition-phase-diagram.png", "phase-transition-many-tokens.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"


def test_reduced_limit_sde_has_the_drift_and_diffusion_covariance_of_the_full_one(rng):
    """Exact algebra: both diffusions are linear in their noise, so sum over a basis gives the covariance."""
    model = FedorovModel(tokens=3, dim=4, beta=1.3, sigma=0.7)
    full, reduced = model.limit_sde(), ReducedFedorov(model).limit_sde()
    x = random_tokens(rng, 2, 3, 4)
    np.testing.assert_array_equal(full.drift(x), reduced.drift(x))

    def covariance(sde):
        shape = sde.noise.shape
        basis = np.eye(int(np.prod(shape))).reshape(-1, *shape)
        columns = [sde.diffusion(x, np.broadcast_to(e, (2, *shape))).reshape(2, -1) for e in basis]
        g = np.stack(columns, axis=-1)  # (paths, n d, noise entries), entries of variance scale^2 per unit time
        return sde.noise.scale**2 * (g @ np.swapaxes(g, -1, -2))

    np.testing.assert_allclose(covariance(reduced), covariance(full), atol=1e-13)
