"""Benchmarks of many-token layers (``python -m pytest benchmarks``): one layer of 4096 tokens in d = 16.

``extra_info`` holds token-steps per second; the attention is computed in row blocks (bounded memory).
"""

import numpy as np
import pytest

from convergence._models import AgazziModel, FedorovModel, FreshFeatureField
from verify._analysis import KernelSpec

TOKENS, DIM = 4096, 16


@pytest.mark.parametrize("name", ["fedorov", "agazzi-fresh-m64"])
def test_layer_4096_tokens(benchmark, name):
    model = (
        FedorovModel(TOKENS, DIM, 1.0)
        if name == "fedorov"
        else AgazziModel(TOKENS, FreshFeatureField(KernelSpec("relu", DIM), 64), 1.0, 1.0)
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, TOKENS, DIM))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    dw = 0.1 * rng.standard_normal((1, *model.noise.shape))
    benchmark(model.layer, x, dw, 0.01)
    benchmark.extra_info["token_steps_per_s"] = TOKENS / benchmark.stats.stats.mean
