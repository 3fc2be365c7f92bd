"""Nested Brownian paths and seeding: block sums, block-size independence, stream separation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats

from convergence._experiments import StrongDesign, coupled_strong_errors
from convergence._models import FedorovModel, matrix_noise, standard_entries
from convergence._paths import (
    BrownianBlock,
    CoarseIncrements,
    PathStreams,
    block_sums,
    simulate,
    uniform_sphere,
)
from convergence._runtime import SEED_BLOCK, compute_blocks

from .helpers import assert_equal_to_rounding


@given(st.integers(1, 6), st.sampled_from([1, 2, 4, 8]), st.integers(0, 2**31))
def test_coarse_increments_are_exact_block_sums(blocks, factor, seed):
    fine = np.random.default_rng(seed).standard_normal((3, blocks * factor, 2, 2))
    coarse = block_sums(fine, factor)
    for j in range(blocks):
        sequential = fine[:, j * factor]
        for i in range(1, factor):
            sequential = sequential + fine[:, j * factor + i]
        assert_array_equal(coarse[:, j], sequential)


@given(st.lists(st.integers(1, 11), min_size=1, max_size=8), st.integers(0, 2**31))
def test_coarse_increments_carried_across_chunks_are_the_sequential_sums(chunks, seed):
    """Chunks of any length, a coarse step straddling several of them: each coarse increment is the time-ordered sum
    of its fine increments, bit for bit, whatever the chunks."""
    factors = (1, 2, 3, 8, 16)
    fine = np.random.default_rng(seed).standard_normal((3, sum(chunks), 2, 2))
    increments, delivered, start = CoarseIncrements(factors), {f: [] for f in factors}, 0
    for length in chunks:
        for f, coarse in increments.add(fine[:, start : start + length]).items():
            delivered[f].append(coarse)
        start += length
    for f in factors:
        coarse = np.concatenate(delivered[f], axis=1)
        assert coarse.shape[1] == fine.shape[1] // f
        for j in range(coarse.shape[1]):
            sequential = fine[:, j * f]
            for i in range(1, f):
                sequential = sequential + fine[:, j * f + i]
            assert_array_equal(coarse[:, j], sequential)


def test_a_strong_run_whose_coarsest_step_spans_several_chunks_gives_the_same_bits(monkeypatch):
    """Depth 8 of 1024 fine steps is a coarse step of 128 fine increments; chunks of 7 or 64 steps carry it over
    (a chunk of 128 steps would hold 33 MB of model F's d x d increments at d = 16)."""
    import convergence._paths.coupling as coupling

    model = FedorovModel(2, 16, 1.0)
    design = StrongDesign(depths=(8, 16, 32, 64), horizon=1.0, reference_factor=16, paths=128, block_paths=128)

    def run():
        data = coupled_strong_errors(model, model.limit_sde(), design, seed=5, key=(1, 2))
        return np.concatenate([data.final_sq, data.sup_sq, data.reference_sq], axis=1)

    monkeypatch.setattr(coupling, "CHUNK_BYTES", 2**40)  # one chunk
    whole = run()
    for steps in (7, 64):
        monkeypatch.setattr(coupling, "CHUNK_BYTES", steps * 128 * 16 * 16 * 8)
        assert_array_equal(run(), whole)


def test_block_sums_rejects_non_dividing_factor():
    with pytest.raises(ValueError, match="factor"):
        block_sums(np.zeros((1, 6)), 4)


def test_chunks_continue_each_path_stream():
    noise = matrix_noise(3, 0.5)
    whole = BrownianBlock(noise, PathStreams(7, 0, 70), 0.01).next(10)
    block = BrownianBlock(noise, PathStreams(7, 0, 70), 0.01)
    assert_array_equal(np.concatenate([block.next(3), block.next(7)], axis=1), whole)


def test_paths_do_not_depend_on_their_block():
    noise = matrix_noise(2, 1.0)
    whole = BrownianBlock(noise, PathStreams(3, 0, 200), 1.0).next(5)
    tail = BrownianBlock(noise, PathStreams(3, 128, 200), 1.0).next(5)
    short = BrownianBlock(noise, PathStreams(3, 0, 10), 1.0).next(5)
    assert_array_equal(whole[128:], tail)
    assert_array_equal(whole[:10], short)
    with pytest.raises(ValueError, match="start must be a multiple of SEED_BLOCK"):
        PathStreams(3, 5, 10)


def test_compute_blocks_are_whole_seed_blocks():
    assert list(compute_blocks(150, 7)) == [(0, SEED_BLOCK), (SEED_BLOCK, 2 * SEED_BLOCK), (2 * SEED_BLOCK, 150)]
    assert list(compute_blocks(150, 1000)) == [(0, 150)]


def test_streams_are_distinct_across_blocks_keys_and_purposes():
    streams = PathStreams(1, 0, 2 * SEED_BLOCK, key=(1, 0))
    other_key = PathStreams(1, 0, SEED_BLOCK, key=(1, 1))
    noise = matrix_noise(2, 1.0)
    init = streams.initial(lambda rng, m: rng.standard_normal((m, 4)))
    inc = streams.increments(noise, 1, 1.0).reshape(2 * SEED_BLOCK, -1)
    other = other_key.increments(noise, 1, 1.0).reshape(SEED_BLOCK, -1)
    draws = [init[0], init[SEED_BLOCK], inc[0], inc[SEED_BLOCK], other[0]]
    for i in range(len(draws)):
        for j in range(i):
            assert not np.array_equal(draws[i][:4], draws[j][:4])


def test_same_seed_same_paths_across_block_sizes():
    """The random numbers depend on the absolute path index only, so another compute-block size gives the same
    numbers to rounding (a path's arithmetic may be ordered differently in another batch; the execution's task size,
    which leaves the blocks alone, changes no bit: tests/test_execution.py)."""
    model = FedorovModel(tokens=3, dim=4, beta=1.0)
    runs = []
    for block_paths in (1, 64, 100, 200):
        design = StrongDesign(depths=(2, 4), reference_factor=8, paths=150, block_paths=block_paths, replicates=100)
        runs.append(coupled_strong_errors(model, model.limit_sde(), design, seed=11, key=(5, 0)))
    for run in runs[1:]:
        assert_equal_to_rounding(run.final_sq, runs[0].final_sq)
        assert_equal_to_rounding(run.sup_sq, runs[0].sup_sq)
        assert_equal_to_rounding(run.reference_sq, runs[0].reference_sq)
    finals = [simulate(model, 8, 1.0, 150, seed=4, block_paths=b) for b in (64, 1000)]
    assert_equal_to_rounding(finals[0], finals[1])


def test_several_claims_in_one_coupled_run_give_each_claims_own_numbers():
    """One run against the true limit and a wrong one (drift x 1.2): each claim's distances equal those of its own
    run bit for bit (shared Brownian paths and layer levels change nothing), and the wrong claim's differ."""
    from convergence._experiments import DriftScaled, coupled_strong_errors_for_claims

    model = FedorovModel(tokens=2, dim=4, beta=1.0)
    design = StrongDesign(depths=(2, 4), reference_factor=8, paths=96, block_paths=64, replicates=100)
    claims = {"true": model.limit_sde(), "drift x 1.2": DriftScaled(model.limit_sde(), 1.2)}
    together = coupled_strong_errors_for_claims(model, claims, design, seed=3, key=(5, 1))
    for name, sde in claims.items():
        alone = coupled_strong_errors(model, sde, design, seed=3, key=(5, 1))
        for field in ("final_sq", "sup_sq", "reference_sq"):
            assert_array_equal(getattr(together[name], field), getattr(alone, field))
    assert not np.array_equal(together["true"].final_sq, together["drift x 1.2"].final_sq)


def test_initial_tokens_do_not_depend_on_depth():
    model = FedorovModel(tokens=2, dim=3, sigma=0.0)
    # With no noise and no mean part the layer is the identity, so the output is the initial state.
    expected = uniform_sphere(PathStreams(2, 0, 5), 2, 3)
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
