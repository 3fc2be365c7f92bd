"""A PyTorch block as a layer map (``convergence.torch_layer_map``), on the example ``examples/post_ln_torch.py``:
a post-LN ``torch.nn.TransformerEncoderLayer`` with fresh output weights at every layer.

The torch block equals the same block written in numpy from its definition (1e-13); local consistency passes the
derived limit and rejects model F's Ito factor and a 5% drift error; the expansion and the weak check are the
example's own tests (the weak check is slow); a path's result does not depend on the other paths in its block (to
rounding) and the layer survives pickling (dask workers; tests/test_reproducibility.py runs it there). Needs the
torch extra (CI installs it): skipped, never passed, without torch.
"""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import convergence as cv  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "post_ln_torch.py"
spec = importlib.util.spec_from_file_location("post_ln_torch", EXAMPLE)
post_ln = importlib.util.module_from_spec(spec)
spec.loader.exec_module(post_ln)


def _by_hand(x: np.ndarray, parts: dict) -> np.ndarray:
    """The post-LN block from its definition: LN(x + W_o attn(x)), then LN(y + W_2 GELU(W_1 y)), path by path."""
    out = []
    for p in range(x.shape[0]):
        u, _ = post_ln.features(x[p])
        y = post_ln.on_layer_norm_sphere(x[p] + u @ parts["self_attn.out_proj.weight"][p].T)
        _, f = post_ln.features(y)
        out.append(post_ln.on_layer_norm_sphere(y + f @ parts["linear2.weight"][p].T))
    return np.array(out)


def test_the_torch_block_is_the_block_by_definition():
    rng = np.random.default_rng(0)
    x = post_ln.on_layer_norm_sphere(rng.standard_normal((6, post_ln.N, post_ln.D)))
    dw = 0.3 * rng.standard_normal((6, *post_ln.LAYER.noise.shape))
    np.testing.assert_allclose(post_ln.LAYER.layer(x, dw, 0.01), _by_hand(x, post_ln.LAYER.noise.split(dw)), atol=1e-13)
    # paths are independent: a block of paths gives each path what it gets alone, to rounding (torch's batched
    # kernels may order a sum differently for another batch; the suite always hands a map the same block of paths)
    np.testing.assert_allclose(
        post_ln.LAYER.layer(x, dw, 0.01)[2:3], post_ln.LAYER.layer(x[2:3], dw[2:3], 0.01), rtol=1e-13, atol=1e-15
    )


@pytest.mark.parametrize(
    "claim, verdict",
    [(post_ln.CLAIM, "pass"), (post_ln.MODEL_F_FACTOR, "fail"), (post_ln.DRIFT_5_PERCENT, "fail")],
    ids=lambda c: getattr(c, "name", c),
)
def test_local_consistency_of_the_torch_block(claim, verdict):
    outcome = cv.check_local_consistency(post_ln.LAYER, claim, states=post_ln.STATES, target=0.02)
    assert outcome.verdict == verdict, outcome.table()


def test_the_expansion_of_the_block_is_the_derived_limit(depth_limits):
    post_ln.test_the_expansion_gives_the_derived_limit(depth_limits)


@pytest.mark.slow
def test_the_block_converges_in_law_to_the_derived_limit():
    post_ln.test_the_torch_layers_converge_in_law_to_the_derived_limit()


def test_the_layer_pickles_and_rebuilds_the_same_block():
    copy = pickle.loads(cloudpickle.dumps(post_ln.LAYER))  # as dask ships it to a worker
    rng = np.random.default_rng(1)
    x = post_ln.on_layer_norm_sphere(rng.standard_normal((3, post_ln.N, post_ln.D)))
    dw = 0.3 * rng.standard_normal((3, *post_ln.LAYER.noise.shape))
    np.testing.assert_array_equal(copy.layer(x, dw, 0.01), post_ln.LAYER.layer(x, dw, 0.01))


def test_bad_block_arguments_are_named():
    with pytest.raises(
        ValueError, match=r"noise_parameters must name parameters of the block, got \['linear3.weight'\]"
    ):
        cv.torch_layer_map(post_ln.block, 2, 4, {"linear3.weight": 1.0})
    with pytest.raises(TypeError, match="factory\\(\\) must return a torch.nn.Module"):
        cv.torch_layer_map(lambda: 3, 2, 4, {"w": 1.0})
    with pytest.raises(ValueError, match="noise_parameters must be a non-empty dict"):
        cv.torch_layer_map(post_ln.block, 2, 4, {})


def test_default_states_move_to_the_layer_norm_sphere_where_the_block_lives():
    """The named states are drawn on the unit sphere; the post-LN block lives on its LayerNorm sphere (radius
    sqrt(d), centred): each is moved there by one step without noise, and the check passes the derived limit there
    and rejects model F's factor."""
    from convergence._checks import where_it_lives

    x = np.array([[0.6, 0.8, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    moved = where_it_lives(post_ln.LAYER, x, "x")
    np.testing.assert_allclose(np.linalg.norm(moved, axis=-1), np.sqrt(post_ln.D), rtol=1e-12)
    np.testing.assert_allclose(moved.sum(axis=-1), 0.0, atol=1e-12)
    for claim, verdict in ((post_ln.CLAIM, "pass"), (post_ln.MODEL_F_FACTOR, "fail")):
        outcome = cv.check_local_consistency(post_ln.LAYER, claim, states=("uniform", "near merged"), target=0.02)
        assert outcome.verdict == verdict, outcome.table()


class _InPlaceResidual(torch.nn.Module):
    """x + W x with the residual added in place, in a submodule: it mutates the block's input."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3, bias=False)
        self.merge = _AddInPlace()

    def forward(self, x):
        return self.merge(x, self.linear(x))


class _AddInPlace(torch.nn.Module):
    def forward(self, x, y):
        return x.add_(y)


def test_an_in_place_op_is_named_with_its_module_at_construction_and_derive_limit_refuses_it():
    """The step is traced once (a forward-mode derivative under vmap) when the map is built: an in-place op that
    derive_limit cannot differentiate is a warning then, naming the op and the module it ran in, and derive_limit
    refuses the block with the same sentence instead of a raw torch error inside a check."""
    with pytest.warns(UserWarning, match=r"in-place operation aten::add_.Tensor in module 'merge'"):
        layer = cv.torch_layer_map(_InPlaceResidual, 2, 3, {"linear.weight": 0.5})
    with pytest.raises(ValueError, match=r"derive_limit cannot take torch block: in-place .* use out-of-place ops"):
        cv.derive_limit(layer)
