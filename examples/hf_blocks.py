"""Example (d): Hugging Face decoder layers (Llama, GPT-2, GPT-NeoX) as depth limits, their limits derived by the suite.

The three layers are built in ``convergence/_models/hugging_face.py`` (about a page: read it to build your own, its
docstring says which weights are noise and why): each from a small config (no weights downloaded), wrapped with
``convergence.wrap_library_layer`` and turned into a layer map by ``convergence.torch_layer_map``. All three are
pre-norm: the residual stream lives in R^d, so the step at h = 0 leaves every state in place and the default named
states are resting states.

The limit is not written by hand: ``convergence.derive_limit`` differentiates the layer's step at h = 0. The local
check then compares one step's sampled moments with it (pass) and with its drift x 1.05 (fail). Hugging Face
computes RMSNorm, softmax and the rotary embedding in float32 although the block runs in float64:
``torch_layer_map`` warns and names the first such operation.

``weak(layer)`` runs the weak check against the derived limit (GPT-2: the limit passes, the drift x 1.05 is
rejected; about 800 CPU s, since the Euler reference differentiates the block at every path and step; Llama: the
limit passes and the drift x 1.25 is rejected, a 5% drift error being below the weak check's target there).

Run it:  python examples/hf_blocks.py  (about a minute)  or  python -m pytest examples/hf_blocks.py
Needs the torch and hf extras: pip install torch==2.13.0 && pip install -e ".[torch,hf]".
"""

import warnings

import numpy as np

import convergence as cv

CONFIGS = cv.hugging_face_configs()  # built in convergence/_models/hugging_face.py (read it: it is short)
LLAMA, GPT2, NEOX = CONFIGS["llama"], CONFIGS["gpt2"], CONFIGS["neox"]
neox_block = cv.hugging_face_blocks()["neox"]
SIGMA = 0.5  # the noisy weights' entry standard deviation per unit time

with warnings.catch_warnings(record=True) as FLOAT32_NOTICES:  # kept: the test reads them
    warnings.simplefilter("always")
    LAYERS = cv.hugging_face_layers(SIGMA)
LLAMA_LAYER, GPT2_LAYER, NEOX_LAYER = LAYERS["llama"], LAYERS["gpt2"], LAYERS["neox"]
N, D = LLAMA_LAYER.tokens, LLAMA_LAYER.dim  # 3 tokens in R^4


def check(layer, drift_factor: float = 1.0, seed: int = 0):
    """The local check of ``layer`` against its derived limit with the drift x ``drift_factor``, at the check's
    defaults (four states, pooled target 1%): the layer's own control variates (antithetic steps and the block's
    second-order noise response by automatic differentiation) decide it at the first look, 4096 samples."""
    derived = cv.derive_limit(layer)
    claim = derived if drift_factor == 1.0 else cv.scaled_drift(derived, drift_factor)
    return cv.check_local_consistency(layer, claim, seed=seed, title=f"{layer.name} vs {claim.name}")


def weak(layer, drift_error: float = 0.05, budget: int = 16384):
    """The weak check of ``layer`` against its derived limit from a fixed state in R^d, for the observable along the
    limit's drift there (where a drift error shows most), with the drift x (1 + ``drift_error``) as a near miss on
    the same paths, at most ``budget`` paths. Costly: the Euler reference calls the derived drift (automatic
    differentiation) at every path and step; GPT-2 at 16384 paths about 800 CPU s, Llama at 4096 about 200.

    The weak check's target is a mean error of 0.05 sd(f). GPT-2's drift is large against its noise (along the drift
    at the start, 1.1 per unit time): a 5% drift error moves E f beyond that target and is rejected. Llama's is
    small (0.24: the drift comes only from SiLU's curvature in the gate, the noise also from the attention's output):
    a 5% drift error moves E f by about 0.25 of the target, below what the check claims to see (its local check
    rejects it), and the weak check rejects a 25% one."""
    derived = cv.derive_limit(layer)
    start = 1.5 * np.random.default_rng(0).standard_normal((N, D))
    direction = derived.drift(start[None])[0]
    direction /= np.linalg.norm(direction)
    return cv.check_weak_limit(
        layer,
        derived,
        lambda x: np.sum(x * direction, axis=(-2, -1)),
        depths=(4, 8, 16),
        reference_factor=2,
        near_misses=(drift_error,),
        initial=cv.fixed_state(start, unit=False),
        first=2048,
        budget=budget,
        title=f"{layer.name}: weak limit",
    )


def test_each_layer_has_its_derived_limit_and_a_5_percent_drift_error_is_rejected():
    for layer in LAYERS.values():
        assert check(layer).verdict == "pass", check(layer).table()
        assert check(layer, 1.05).verdict == "fail"


if __name__ == "__main__":
    for notice in FLOAT32_NOTICES:
        print("warning:", notice.message, end="\n\n")
    for layer in LAYERS.values():
        for factor in (1.0, 1.05):
            print(check(layer, factor).table(), end="\n\n")
