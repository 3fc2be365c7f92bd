"""Model A: kernels and constants, MLP fields, layer map and limit SDE, estimators of the synchronisation study."""

import flint
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import verify
from convergence._experiments import (
    ExponentDesign,
    KernelMatrixNetwork,
    WidthDesign,
    interaction_energy,
    mean_square_exponent,
    median_exponent,
    record_log_distances,
)
from convergence._models import (
    FACTOR_FORMS,
    AgazziModel,
    FreshFeatureField,
    FrozenFeatureField,
    GaussianField,
    QuadraticFormModel,
    psd_factor,
)
from convergence._paths import BrownianBlock, Level, PathStreams, run_coupled
from tests.helpers import assert_equal_to_rounding, random_tokens
from verify._analysis import KernelSpec, kernel
from verify._rigorous import attention_energy_rate, certified_infimum

K_SE = 5.0  # tolerance in standard errors: two-sided false-failure rate 6e-7 per comparison


def two_points(dim: int, u: float) -> tuple[np.ndarray, np.ndarray]:
    x = np.zeros(dim)
    y = np.zeros(dim)
    x[0] = 1.0
    y[0], y[1] = u, np.sqrt(1 - u * u)
    return x, y


# ---------------------------------------------------------------- kernels and constants


@pytest.mark.parametrize("act,d,sig", [("relu", 5, 0.0), ("relu", 64, 0.1), ("linear", 7, 0.1)])
def test_activation_constants_closed_forms(act, d, sig):
    c = verify.activation_constants(act, d, sig, sig)
    s2 = 1 / d + sig**2
    k1, k1p = (s2 / 2 + sig**2, 1 / (2 * d)) if act == "relu" else (s2 + sig**2, 1 / d)
    assert_allclose([c["k1"], c["k1_prime"]], [k1, k1p], rtol=1e-12)
    # docs/models.md section 2's formulas, written out here independently of verify._analysis.two_point.
    assert_allclose(c["lambda_1"], ((d - 3) * k1p - (d - 1) * k1) / 2, rtol=1e-12)
    assert_allclose(c["lambda_bar"], (d - 1) * k1p - (d - 3) * k1, rtol=1e-12)


@pytest.mark.parametrize("act", ["tanh", "sigmoid", "silu"])
def test_activation_constants_of_smooth_activations_equal_gauss_hermite_sums(act):
    """k(1) and k'(1) (30-digit tanh-sinh quadrature) against a 200-node Gauss-Hermite rule in floats, a quadrature
    computed another way (the integrands are entire, so the rule converges to rounding)."""
    d, sig = 5, 0.1
    sigmoid = lambda z: 1 / (1 + np.exp(-z))
    act_np, derivative = {
        "tanh": (np.tanh, lambda z: 1 - np.tanh(z) ** 2),
        "sigmoid": (sigmoid, lambda z: sigmoid(z) * (1 - sigmoid(z))),
        "silu": (lambda z: z * sigmoid(z), lambda z: sigmoid(z) * (1 + z * (1 - sigmoid(z)))),
    }[act]
    nodes, weights = np.polynomial.hermite.hermgauss(200)
    z = np.sqrt(2 * (1 / d + sig**2)) * nodes
    expect = lambda f: np.sum(weights * f(z)) / np.sqrt(np.pi)
    c = verify.activation_constants(act, d, sig, sig)
    assert_allclose(c["k1"], expect(lambda x: act_np(x) ** 2) + sig**2, rtol=1e-13)
    assert_allclose(c["k1_prime"], expect(lambda x: derivative(x) ** 2) / d, rtol=1e-13)


@pytest.mark.parametrize("act", ["relu", "tanh", "sigmoid", "silu"])
def test_kernel_matches_random_feature_average(act, rng):
    """k(u) is the mean of the width-m feature kernel: check against 10^6 random features."""
    spec = KernelSpec(act, 5, 0.1, 0.2)
    m = 1_000_000
    u_feat = rng.standard_normal((m, 5))
    b = spec.sigma_u * rng.standard_normal(m)
    act_np = {
        "relu": lambda z: np.maximum(z, 0),
        "tanh": np.tanh,
        "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
        "silu": lambda z: z / (1 + np.exp(-z)),
    }[act]
    for u in (-0.7, 0.2, 0.9):
        x, y = two_points(5, u)
        prod = act_np(u_feat @ x / np.sqrt(5) + b) * act_np(u_feat @ y / np.sqrt(5) + b)
        estimate, se = prod.mean() + spec.sigma_w**2, prod.std() / np.sqrt(m)
        assert abs(estimate - float(kernel(spec)(u))) < K_SE * se


def test_deficit_keeps_relative_precision_for_close_points():
    for act in ("relu", "tanh", "sigmoid"):
        k = kernel(KernelSpec(act, 5, 0.1, 0.1))
        z = np.array([1e-14, 1e-12, 1e-10])  # ReLU has a z^(3/2) term: relative 3e-7 at 1e-10
        assert_allclose(k.deficit(z) / z, k.k1_prime, rtol=1e-5)


@pytest.mark.parametrize("act", ["tanh", "sigmoid", "silu"])
@pytest.mark.parametrize("d", [4, 64])
def test_truncated_kernel_series_is_as_accurate_as_direct_quadrature(act, d):
    """The slope's Chebyshev series is cut to a low degree; between its test points (a 10 times finer grid) the
    deficit still equals direct Gauss-Hermite quadrature to 1e-14 (one degree fewer misses it for tanh, d = 4)."""
    from verify._analysis import deficit_quadrature

    k = kernel(KernelSpec(act, d, 0.1, 0.1))
    z = np.linspace(0.0, 2.0, 2001)[1:]
    exact = deficit_quadrature(k.spec, z)
    assert k.slope.degree() < 20
    assert np.max(np.abs(k.deficit(z) - exact)) < 1e-14
    if (act, d) == ("tanh", 4):
        assert np.max(np.abs(z * k.slope.cutdeg(k.slope.degree() - 1)(z) - exact)) > 1e-14


@given(st.integers(2, 6), st.sampled_from(["relu", "tanh", "sigmoid", "silu", "linear"]), st.integers(0, 10**6))
def test_kernel_matrices_are_positive_semidefinite(n, act, seed):
    y = random_tokens(np.random.default_rng(seed), 1, n, 4)
    k = kernel(KernelSpec(act, 4, 0.1, 0.0))
    gram = k(y @ np.swapaxes(y, -1, -2))
    assert np.linalg.eigvalsh(gram).min() > -1e-12


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"activation": "gelu"}, "activation"),
        ({"dim": 1}, "dim"),
        ({"sigma_u": -0.1}, "sigma_u"),
        ({"sigma_w": float("nan")}, "sigma_w"),
    ],
)
def test_kernel_spec_rejects_bad_input(bad, match):
    args = {"activation": "relu", "dim": 5, "sigma_u": 0.0, "sigma_w": 0.0, **bad}
    with pytest.raises(ValueError, match=match):
        KernelSpec(**args)


def test_certified_infimum_of_a_known_function():
    def point(x):
        return (flint.arb(x) - flint.arb("0.3")) ** 2 - 1

    def enclose(a, b):
        return (flint.arb(a).union(flint.arb(b)) - flint.arb("0.3")) ** 2 - 1

    lower, upper, argmin, _ = certified_infimum(enclose, point, -1.0, 1.0, tol=1e-9)
    assert lower <= -1 <= upper and float(upper - lower) <= 1e-9
    assert abs(argmin - 0.3) < 1e-4


def test_lambda_bar_prime_brackets_a_dense_grid_minimum():
    spec = KernelSpec("sigmoid", 5, 0.0, 0.0)
    enclosure = verify.lambda_bar_prime("sigmoid", 5, 0.0, 0.0, beta=1.0)
    k = kernel(spec)
    u = np.linspace(-1, 0.999, 100001)
    g = k(u) * (3 + u**2 - u * (1 - u**2)) + k.k1 * ((1 - u**2) - 4 * u)
    f = np.exp(u) * g / (np.e - np.exp(u))
    assert float(enclosure.lower) - 1e-12 <= -f.min() <= float(enclosure.upper) + 1e-12  # float rounding of the grid
    assert float(enclosure.width) < 1e-6


# ---------------------------------------------------------------- fields and layer map


@pytest.mark.parametrize("n", [2, 4])
def test_gaussian_field_factor_reproduces_the_kernel_matrix(n, rng):
    field = GaussianField(KernelSpec("tanh", 5, 0.1, 0.1), n)
    y = random_tokens(rng, 7, n, 5)
    f = field.factor(y)
    assert_allclose(f @ np.swapaxes(f, -1, -2), field.kernel(y @ np.swapaxes(y, -1, -2)), atol=1e-12)


def test_gaussian_field_difference_variance_for_a_close_pair():
    field = GaussianField(KernelSpec("sigmoid", 5, 0.0, 0.0), 2)
    x, _ = two_points(5, 0.0)
    y = x.copy()
    y[1] = 1e-7
    y /= np.linalg.norm(y)
    f = field.factor(np.stack([x, y])[None])
    difference = f[0, 1] - f[0, 0]  # G(y) - G(x) = (row 1 - row 0) dZ
    z = 0.5 * np.sum((x - y) ** 2)
    assert_allclose(difference @ difference, 2 * field.kernel.deficit(z), rtol=1e-8)


def test_frozen_field_increment_covariance_is_the_feature_kernel(rng):
    spec = KernelSpec("relu", 4, 0.1, 0.3)
    field = FrozenFeatureField.draw(spec, 32, rng)
    x, y = two_points(4, 0.4)
    pts = np.stack([x, y])[None]
    h, draws = 0.01, 200_000
    dw = np.sqrt(h) * rng.standard_normal((draws, 4, 33))
    xi = field.increment(np.broadcast_to(pts, (draws, 2, 4)), dw, h)
    prod = np.sum(xi[:, 0] * xi[:, 1], axis=-1) / (h * 4)
    psi = field.features(pts)[0]
    assert abs(prod.mean() - psi[0] @ psi[1]) < K_SE * prod.std() / np.sqrt(draws)
    # linear in the Brownian increment, so increments of nested grids add up
    assert_allclose(
        field.increment(pts, dw[:1] + dw[1:2], h), field.increment(pts, dw[:1], h) + field.increment(pts, dw[1:2], h)
    )


def test_fresh_field_covariance_is_the_kernel(rng):
    spec = KernelSpec("tanh", 4, 0.2, 0.1)
    field = FreshFeatureField(spec, 8)
    x, y = two_points(4, -0.3)
    h, draws = 0.01, 200_000
    dw = np.sqrt(h) * rng.standard_normal((draws, *field.noise.shape))
    xi = field.increment(np.broadcast_to(np.stack([x, y]), (draws, 2, 4)), dw, h)
    prod = np.sum(xi[:, 0] * xi[:, 1], axis=-1) / (h * 4)
    assert abs(prod.mean() - float(kernel(spec)(-0.3))) < K_SE * prod.std() / np.sqrt(draws)
    assert not field.noise.brownian


def test_fresh_noise_cannot_be_refined_in_depth(rng):
    model = AgazziModel(2, FreshFeatureField(KernelSpec("relu", 4), 8), 1.0, 0.0)
    streams = PathStreams(0, 0, 4)
    block = BrownianBlock(model.noise, streams, 0.1)
    with pytest.raises(ValueError, match="nested"):
        run_coupled([Level("a", model, 1), Level("b", model, 2)], [], random_tokens(rng, 4, 2, 4), block, 4)
    with pytest.raises(ValueError, match="Brownian"):
        model.limit_sde()


def test_layer_map_is_two_normalised_half_steps(rng):
    spec = KernelSpec("silu", 5, 0.1, 0.1)
    field = FrozenFeatureField.draw(spec, 16, rng)
    x = random_tokens(rng, 3, 4, 5)
    dw = 0.1 * rng.standard_normal((3, 5, 17))
    h, beta, v = 0.05, 2.0, -1.0
    model = AgazziModel(4, field, beta, v)
    scores = beta * x @ np.swapaxes(x, -1, -2)
    w = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    y = x + h * v * (w @ x)
    y /= np.linalg.norm(y, axis=-1, keepdims=True)
    psi = np.concatenate([spec_silu(y @ field.u.T / np.sqrt(5) + field.b) / 4, np.full((3, 4, 1), 0.1)], -1)
    out = y + psi @ np.swapaxes(dw, -1, -2)
    assert_allclose(model.layer(x, dw, h), out / np.linalg.norm(out, axis=-1, keepdims=True), atol=1e-13)


def spec_silu(z):
    return z / (1 + np.exp(-z))


@pytest.mark.parametrize("field_kind", ["frozen", "gaussian"])
def test_limit_drift_keeps_the_sphere_invariant(field_kind, rng):
    """Ito: d|x|^2 = 2 <x, b> dt + tr(P_x Cov P_x) dt = 0 with Cov = k(x, x) I (module docstring)."""
    spec = KernelSpec("tanh", 6, 0.1, 0.1)
    field = FrozenFeatureField.draw(spec, 24, rng) if field_kind == "frozen" else GaussianField(spec, 3)
    sde = AgazziModel(3, field, 1.0, 1.0).limit_sde()
    x = random_tokens(rng, 5, 3, 6)
    radial = np.sum(x * sde.drift(x), axis=-1)
    k = field.kernel_diagonal(x)[..., 0]
    assert_allclose(2 * radial + (6 - 1) * k, 0.0, atol=1e-12)


@pytest.mark.parametrize("bad,match", [({"v": 2.0}, "v"), ({"beta": -1.0}, "beta"), ({"tokens": 3}, "tokens")])
def test_model_rejects_bad_input(bad, match):
    args = {"tokens": 2, "field": GaussianField(KernelSpec("relu", 4), 2), "beta": 1.0, "v": 0.0, **bad}
    with pytest.raises(ValueError, match=match):
        AgazziModel(**args)


def test_infinite_width_network_uses_the_kernel_matrix(rng):
    spec = KernelSpec("relu", 5, 0.0, 0.0)
    net = KernelMatrixNetwork(spec, 3, 16, None)
    y = random_tokens(rng, 4, 3, 5)
    assert_allclose(net.covariance(y, None, 0.1), kernel(spec)(y @ np.swapaxes(y, -1, -2)), atol=1e-14)
    k = net.covariance(y, None, 0.1)
    assert_allclose(psd_factor(k, "symmetric") @ psd_factor(k, "symmetric"), k, atol=1e-12)
    with pytest.raises(ValueError, match="widths"):
        WidthDesign(widths=(8, 4, 16))


def test_the_pivoted_factor_reproduces_the_kernel_matrix_also_when_tokens_merge(rng):
    """The law-only field (pivoted Cholesky, stopping at the numerical rank): F F^T = K(Y), with merged tokens (K
    singular, rank below n) and without; its covariance is the kernel of the Gram matrix, built from the upper
    triangle."""
    for dim in (5, 64):
        field = GaussianField(KernelSpec("relu", dim, 0.0, 0.0), 12, pivoted=True)
        y = random_tokens(rng, 3, 12, dim)
        y[1, 6:] = y[1, 0]  # tokens 0 and 6-11 of one path merged: 6 distinct
        k = kernel(field.spec)(y @ np.swapaxes(y, -1, -2))
        f = field.factor(y)
        assert_allclose(f @ np.swapaxes(f, -1, -2), k, atol=1e-12)
        assert np.linalg.matrix_rank(f[1], tol=1e-8) == 6 and np.linalg.matrix_rank(f[0], tol=1e-8) == 12


def test_the_field_factor_is_nested_and_keeps_merged_tokens_together(rng):
    """The infinite-width field's Cholesky factor: the first k tokens of an n-token field move as the k-token field
    with the first k noise rows; tokens merged in one path (K singular, which LAPACK's dpotrf rejects) keep equal
    rows, F F^T = K still, and the other paths of the batch get the factor they get alone, bit for bit."""
    spec = KernelSpec("relu", 5, 0.0, 0.0)
    y = random_tokens(rng, 4, 10, 5)
    dz = rng.standard_normal((4, 10, 5))
    full = GaussianField(spec, 10).increment(y, dz, 0.1)
    assert_allclose(full[:, :6], GaussianField(spec, 6).increment(y[:, :6], dz[:, :6], 0.1), rtol=0, atol=1e-14)
    merged = y.copy()
    merged[2, 7:] = merged[2, 3]  # tokens 3, 7, 8, 9 of path 2 merged
    f = GaussianField(spec, 10).factor(merged)
    assert_allclose(f @ np.swapaxes(f, -1, -2), kernel(spec)(merged @ np.swapaxes(merged, -1, -2)), atol=1e-12)
    assert_allclose(f[2, 7:], np.broadcast_to(f[2, 3], (3, 10)), rtol=0, atol=1e-7)
    assert np.all(np.triu(f, 1) == 0.0)
    for path in (0, 1, 3):
        np.testing.assert_array_equal(f[path], GaussianField(spec, 10).factor(merged[path : path + 1])[0])


def test_the_lower_factor_is_continuous_and_propagates_non_finite_input(rng):
    """Cholesky is smooth where K is positive definite: a perturbation of the tokens of size eps moves the factor by
    O(eps) (the symmetric root would too; the pivoted factor need not). A matrix with NaN gives NaN, not a factor."""
    field = GaussianField(KernelSpec("tanh", 5, 0.1, 0.1), 8)
    y = random_tokens(rng, 3, 8, 5)
    direction = rng.standard_normal(y.shape)
    for eps in (1e-4, 1e-6):
        moved = y + eps * direction
        moved /= np.linalg.norm(moved, axis=-1, keepdims=True)
        assert np.max(np.abs(field.factor(moved) - field.factor(y))) < 100 * eps
    bad = np.stack([np.eye(3), np.full((3, 3), np.nan)])
    f = psd_factor(bad, "lower")
    assert np.all(np.isnan(f[1][np.tril_indices(3)])) and np.array_equal(f[0], np.eye(3))


# ---------------------------------------------------------------- energy and exponents


def test_interaction_energy_formula_and_single_cluster(rng):
    x = random_tokens(rng, 3, 5, 4)
    gram = x @ np.swapaxes(x, -1, -2)
    direct = np.sum(np.exp(1.5) - np.exp(1.5 * gram), axis=(-1, -2)) / (2 * 25)
    assert_allclose(interaction_energy(x, 1.5), direct, rtol=1e-12)
    assert_allclose(interaction_energy(np.repeat(x[:, :1], 5, axis=1), 1.5), 0.0, atol=0)


@pytest.mark.parametrize("spread", [1e-3, 1e-6, 1e-9])
def test_interaction_energy_keeps_relative_precision_on_a_near_cluster(rng, spread):
    """Tokens within ``spread`` of one point: the energy (~ spread^2) to 1e-9 relative, against the pairwise
    differences summed directly (1 - <x_i, x_j> alone would lose every digit at spread 1e-9)."""
    centre = random_tokens(rng, 2, 1, 4)
    x = centre + spread * rng.standard_normal((2, 6, 4))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    diff = x[:, :, None, :] - x[:, None, :, :]
    z = 0.5 * np.sum(diff * diff, axis=-1)
    direct = np.exp(1.5) * np.sum(-np.expm1(-1.5 * z), axis=(-1, -2)) / (2 * 36)
    assert_allclose(interaction_energy(x, 1.5), direct, rtol=1e-9)


@given(st.integers(0, 10**6), st.sampled_from([1.0, -1.0]), st.floats(0.2, 5.0))
def test_attention_flow_energy_rate_bound(seed, v, beta):
    """dE/dt <= eps E along dx_i/dt = v P a_i (eps = 0 for v = 1, 4 for v = -1), by a small step."""
    x = random_tokens(np.random.default_rng(seed), 1, 6, 3)
    field = GaussianField(KernelSpec("relu", 3), 6)
    model = AgazziModel(6, field, beta, v)
    h = 1e-7
    rate = (interaction_energy(model.attention_step(x, h), beta) - interaction_energy(x, beta)) / h
    assert rate[0] <= attention_energy_rate(v) * interaction_energy(x, beta)[0] + 1e-5


def test_exponent_estimators_on_exact_geometric_brownian_motion(rng):
    """log r_t = log delta0 + lam t + s B_t: median slope lam, mean-square slope 2 lam + 2 s^2."""
    design = ExponentDesign(horizon=2.0, steps=40, records=20, paths=20000, replicates=200)
    lam, s = -0.3, 0.5
    dt = design.horizon / design.records
    walk = np.cumsum(
        np.concatenate(
            [np.zeros((design.paths, 1)), s * np.sqrt(dt) * rng.standard_normal((design.paths, design.records))], 1
        ),
        1,
    )
    logs = np.log(design.delta0) + lam * design.times + walk
    both = np.stack([logs, logs], axis=1)  # two identical "levels": no step bias
    med = median_exponent(both, design, rng)
    ms = mean_square_exponent(both, design, rng)
    assert med.ci[0] <= lam <= med.ci[1]
    assert ms.ci[0] <= 2 * lam + 2 * s * s <= ms.ci[1]
    assert med.ci[1] - med.ci[0] < 0.1


def test_recorded_paths_do_not_depend_on_blocks():
    model = QuadraticFormModel(2, 3)
    design = ExponentDesign(horizon=0.5, steps=20, records=5, paths=200, block_paths=4096)
    small = ExponentDesign(horizon=0.5, steps=20, records=5, paths=200, block_paths=64)
    assert_equal_to_rounding(record_log_distances(model, design, 3, (9,)), record_log_distances(model, small, 3, (9,)))


@pytest.mark.parametrize("form", FACTOR_FORMS)
def test_a_repeated_covariance_is_factored_once_with_the_batch_numbers(rng, form):
    """Every sample at one state (the local checks) repeats one covariance: factored once, its factor is bit for bit
    the one that matrix gets inside a batch of distinct matrices, F F^T = C; a batch that differs in one matrix takes
    the batched route."""
    a = rng.standard_normal((4, 6))
    c = a @ a.T
    other = c + 1e-3 * np.eye(4)
    repeated = psd_factor(np.broadcast_to(c, (5, 4, 4)), form)
    mixed = psd_factor(np.stack([c, c, other, c, c]), form)
    np.testing.assert_array_equal(repeated, mixed[[0, 1, 3, 4, 0]])
    assert_allclose(repeated @ np.swapaxes(repeated, -1, -2), np.broadcast_to(c, (5, 4, 4)), atol=1e-12)
    assert_allclose(mixed[2] @ mixed[2].T, other, atol=1e-12)
    assert repeated.flags.writeable
