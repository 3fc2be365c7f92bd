"""Nested Brownian paths and seeding: block sums, block-size independence, stream separation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats

from convergence.brownian import BrownianBlock, block_sums, path_generators, uniform_sphere
from convergence.fedorov import FedorovModel
from convergence.noise import matrix_noise, standard_entries
from convergence.simulate import simulate
from convergence.strong import StrongDesign, coupled_strong_errors


@given(st.integers(1, 6), st.sampled_from([1, 2, 4, 8]), st.integers(0, 2**31))
def test_coarse_increments_are_exact_block_sums(blocks, factor, seed):
    fine = np.random.default_rng(seed).standard_normal((3, blocks * factor, 2, 2))
    coarse = block_sums(fine, factor)
    for j in range(blocks):
        sequential = fine[:, j * factor]
        for i in range(1, factor):
            sequential = sequential + fine[:, j * factor + i]
        assert_array_equal(coarse[:, j], sequential)


def test_block_sums_rejects_non_dividing_factor():
    with pytest.raises(ValueError, match="factor"):
        block_sums(np.zeros((1, 6)), 4)


def test_chunks_continue_each_path_stream():
    noise = matrix_noise(3, 0.5)
    _, a = path_generators(7, 0, 4)
    _, b = path_generators(7, 0, 4)
    whole = BrownianBlock(noise, a, 0.01).next(10)
    block = BrownianBlock(noise, b, 0.01)
    assert_array_equal(np.concatenate([block.next(3), block.next(7)], axis=1), whole)


def test_paths_do_not_depend_on_their_block():
    _, whole = path_generators(3, 0, 6)
    _, tail = path_generators(3, 4, 6)
    noise = matrix_noise(2, 1.0)
    assert_array_equal(BrownianBlock(noise, whole, 1.0).next(5)[4:], BrownianBlock(noise, tail, 1.0).next(5))


def test_streams_are_distinct_across_paths_keys_and_purposes():
    init0, noise0 = path_generators(1, 0, 2, key=(1, 0))
    _, noise_other_key = path_generators(1, 0, 2, key=(1, 1))
    draws = [g.standard_normal(4) for g in (init0[0], noise0[0], noise0[1], noise_other_key[0])]
    for i in range(len(draws)):
        for j in range(i):
            assert not np.array_equal(draws[i], draws[j])


def test_same_seed_bit_identical_across_block_sizes():
    model = FedorovModel(tokens=3, dim=4, beta=1.0)
    runs = []
    for block_paths in (1, 3, 7, 10):
        design = StrongDesign(depths=(2, 4), reference_factor=8, paths=10, block_paths=block_paths, replicates=100)
        runs.append(coupled_strong_errors(model, model.limit_sde(), design, seed=11, key=(5, 0)))
    for run in runs[1:]:
        assert_array_equal(run.final_sq, runs[0].final_sq)
        assert_array_equal(run.sup_sq, runs[0].sup_sq)
        assert_array_equal(run.reference_sq, runs[0].reference_sq)
    finals = [simulate(model, 8, 1.0, 9, seed=4, block_paths=b) for b in (2, 9)]
    assert_array_equal(finals[0], finals[1])


def test_initial_tokens_do_not_depend_on_depth():
    model = FedorovModel(tokens=2, dim=3, sigma=0.0)
    # With no noise and no mean part the layer is the identity, so the output is the initial state.
    init, _ = path_generators(2, 0, 5)
    expected = uniform_sphere(init, 2, 3)
    for depth in (3, 17):
        assert_allclose(simulate(model, depth, 1.0, 5, seed=2), expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize("law", ["gaussian", "rademacher", "uniform"])
def test_entry_laws_have_mean_zero_and_unit_variance(law):
    # Exact moments: E e = 0, E e^2 = 1, and E e^4 = 3, 1, 9/5. Tolerance: 4.5 standard errors
    # (false-failure rate below 1e-5 per moment, from the normal approximation).
    n = 400_000
    e = standard_entries(np.random.default_rng(99), (n,), law)
    kurtosis = {"gaussian": 3.0, "rademacher": 1.0, "uniform": 9 / 5}[law]
    for power, exact, variance in ((1, 0.0, 1.0), (2, 1.0, kurtosis - 1.0)):
        assert abs(np.mean(e**power) - exact) <= 4.5 * np.sqrt(variance / n)
    if law == "gaussian":
        # Kolmogorov-Smirnov at level 1e-3 (the false-failure rate).
        assert stats.kstest(e[:20000], "norm").pvalue > 1e-3
