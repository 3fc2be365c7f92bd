"""Hugging Face decoder layers (``examples/hf_blocks.py``: Llama and GPT-2 from small configs, no download) as layer
maps: a bare library layer is refused at construction with the fix named, float32 internals are detected and warned
about, and the local check passes each layer's limit derived by automatic differentiation and rejects its drift
x 1.05. Needs the torch and hf extras (CI installs them): skipped, never passed, without them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import convergence as cv  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hf_blocks.py"
spec = importlib.util.spec_from_file_location("hf_blocks", EXAMPLE)
hf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hf)


def test_a_bare_library_layer_is_refused_when_the_map_is_built_naming_the_wrapper():
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    with pytest.raises(RuntimeError, match=r"bare: the block's forward pass raised .*wrap_library_layer"):
        cv.torch_layer_map(lambda: LlamaDecoderLayer(hf.LLAMA, layer_idx=0), hf.N, hf.D,
                           {"self_attn.o_proj.weight": 0.5}, name="bare")


def test_float32_internals_are_detected_and_warned_about():
    assert set(hf.LLAMA_LAYER.internal_dtypes) == {"float32"}  # RMSNorm, softmax, rotary embedding
    assert hf.GPT2_LAYER.internal_dtypes == {}  # GPT-2's eager attention and LayerNorm stay in float64
    messages = [str(w.message) for w in hf.FLOAT32_NOTICES]
    assert len(messages) == 1 and messages[0].startswith("Llama layer: the block computes in float32")


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_the_local_check_passes_the_derived_limit_and_rejects_its_drift_x_1_05(name):
    layer = hf.LAYERS[name]
    assert hf.check(layer).verdict == "pass", hf.check(layer).table()
    assert hf.check(layer, 1.05).verdict == "fail"
