"""The two-token overlap chain is model F's layer map in law: exact algebra against the d-dimensional sampler,
the Bartlett draws' moments, and the chain's law after many layers against the reduced sampler's."""

import numpy as np
import pytest
from scipy import stats

import convergence as cv
from convergence._models import (
    FrameNoise,
    TwoTokenOverlapChain,
    normalise,
    plane_coordinates,
    two_token_step,
)
from convergence._paths import fixed_overlap, overlap, simulate

from .helpers import assert_equal_to_rounding, random_tokens


def _bartlett(z_perp: np.ndarray) -> np.ndarray:
    """(c_1, b, c_2) of the orthogonal parts (paths, d - 2, 2): the upper-triangular factor of their Gram matrix."""
    g11 = np.sum(z_perp[..., 0] ** 2, axis=-1)
    g12 = np.sum(z_perp[..., 0] * z_perp[..., 1], axis=-1)
    g22 = np.sum(z_perp[..., 1] ** 2, axis=-1)
    c1 = np.sqrt(g11)
    b = g12 / c1
    return np.stack([c1, b, np.sqrt(np.maximum(g22 - b * b, 0.0))], axis=-1)


@pytest.mark.parametrize("dim", [3, 4, 16])
def test_one_layer_is_the_d_dimensional_layer_given_the_same_gaussians(rng, dim):
    """Exact algebra: the same z_1, z_2 in R^d, split into in-plane coordinates and the Bartlett factor of the
    orthogonal parts, give the same next overlap and the same distances to both ends (1e-13)."""
    model = cv.FedorovModel(2, dim, beta=1.7, sigma=0.8)
    paths = 256
    x = random_tokens(rng, paths, 2, dim)
    x[:8, 1] = x[:8, 0] + 1e-9 * random_tokens(rng, 8, 1, dim)[:, 0]  # nearly merged pairs
    x[8:16, 1] = -x[8:16, 0] + 1e-9 * random_tokens(rng, 8, 1, dim)[:, 0]  # nearly antipodal pairs
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    dz = 0.1 * rng.standard_normal((paths, dim, 2))
    direct = normalise(two_token_step(x, dz, model.beta, model.sigma))
    # an orthonormal basis whose first two vectors span the tokens' plane, with x_1 = e_1 and s >= 0
    basis = np.linalg.qr(
        np.concatenate([x[:, 0:1], x[:, 1:2], rng.standard_normal((paths, dim - 2, dim))], axis=1).swapaxes(1, 2)
    )[0]
    basis *= np.sign(np.einsum("pd,pd->p", basis[..., 0], x[:, 0]))[:, None, None]
    second = np.einsum("pdk,pd->pk", basis, x[:, 1])[:, 1]
    basis[..., 1] *= np.sign(second)[:, None]
    coordinates = np.einsum("pdk,pd->pk", basis, dz[..., 0]), np.einsum("pdk,pd->pk", basis, dz[..., 1])
    frame = np.concatenate(
        [
            coordinates[0][:, :2],
            coordinates[1][:, :2],
            _bartlett(np.stack([coordinates[0][:, 2:], coordinates[1][:, 2:]], axis=-1)),
        ],
        axis=-1,
    )
    chain = TwoTokenOverlapChain(model)
    planar = chain.layer(plane_coordinates(x), frame, 0.01)
    np.testing.assert_allclose(overlap(planar), overlap(direct), rtol=0, atol=1e-13)
    for sign in (1.0, -1.0):  # distance to each end, relative: tokens' difference and sum kept to full precision
        near = np.linalg.norm(direct[:, 1] - sign * direct[:, 0], axis=-1)
        np.testing.assert_allclose(
            np.linalg.norm(planar[:, 1] - sign * planar[:, 0], axis=-1)[:16], near[:16], rtol=1e-6
        )


@pytest.mark.parametrize("dim", [3, 5, 16])
def test_bartlett_draws_have_their_laws(dim):
    """c_1^2 ~ chi^2_{d-2}, b ~ N(0, 1), c_2^2 ~ chi^2_{d-3} (0 at d = 3), independent; p's standard normal.
    Kolmogorov-Smirnov at 1% Bonferroni over the laws."""
    noise = FrameNoise(shape=(7,), scale=1.0, nested=False, space_dim=dim)
    draws = noise.standard(np.random.default_rng(3), (20000, 7))
    alpha = 0.01 / 7
    for k in range(4):
        assert stats.kstest(draws[:, k], "norm").pvalue > alpha
    assert stats.kstest(draws[:, 4] ** 2, stats.chi2(dim - 2).cdf).pvalue > alpha
    assert stats.kstest(draws[:, 5], "norm").pvalue > alpha
    if dim == 3:
        assert np.all(draws[:, 6] == 0)
    else:
        assert stats.kstest(draws[:, 6] ** 2, stats.chi2(dim - 3).cdf).pvalue > alpha
    corr = np.corrcoef(draws[:, : 6 if dim == 3 else 7].T)
    assert np.max(np.abs(corr - np.eye(corr.shape[0]))) < 4.5 / np.sqrt(draws.shape[0])


def test_the_chain_after_many_layers_has_the_reduced_samplers_law():
    """Independent runs (different random numbers): the final overlaps of 4000 runs of each sampler at d = 8,
    L = 200, rho0 = -0.5 agree (two-sample Kolmogorov-Smirnov, alpha = 1%)."""
    model = cv.FedorovModel(2, 8, beta=2.0, sigma=1.0)
    start = fixed_overlap(-0.5)
    chain = overlap(simulate(TwoTokenOverlapChain(model), 200, 2.0, 4000, 0, (1,), start))
    reduced = overlap(simulate(cv.ReducedFedorov(model), 200, 2.0, 4000, 0, (2,), start))
    assert stats.ks_2samp(chain, reduced).pvalue > 0.01


def test_the_chain_refuses_models_it_does_not_reduce():
    with pytest.raises(ValueError, match="two tokens"):
        TwoTokenOverlapChain(cv.FedorovModel(3, 8))
    with pytest.raises(ValueError, match="Gaussian"):
        TwoTokenOverlapChain(cv.FedorovModel(2, 8, law="rademacher"))
    with pytest.raises(ValueError, match="dim >= 3"):
        TwoTokenOverlapChain(cv.FedorovModel(2, 2))


def test_the_chain_does_not_depend_on_the_block_size_or_the_chunk_length(monkeypatch):
    """The frame numbers are drawn step by step: another chunk length gives the same bits, another compute block size
    (hence chunk length) the same runs to rounding."""
    import convergence._paths.coupling as coupling

    model = cv.FedorovModel(2, 6, beta=1.0, sigma=1.0)
    runs = [
        simulate(TwoTokenOverlapChain(model), 50, 1.0, 192, 0, (3,), fixed_overlap(0.2), block_paths=b)
        for b in (64, 192)
    ]
    monkeypatch.setattr(coupling, "CHUNK_BYTES", 7 * 8 * 64 * 3)  # chunks of 3 steps
    runs.append(simulate(TwoTokenOverlapChain(model), 50, 1.0, 192, 0, (3,), fixed_overlap(0.2), block_paths=64))
    assert_equal_to_rounding(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
