"""Three small Hugging Face decoder layers as layer maps: Llama, GPT-2 and GPT-NeoX, built from small configs (no
weights downloaded; eager attention), for the examples and the calibration study.

Each layer is wrapped with ``wrap_library_layer`` (positions 0..n-1, the rotary embedding for Llama and NeoX, a causal
mask) and turned into a layer map (``torch_layer_map``) with two weights drawn fresh at every layer with entry variance
sigma^2 h: the attention's output weights (Llama ``o_proj``, GPT-2 ``c_proj``, NeoX ``attention.dense``) and the MLP's
first weights (``gate_proj``, ``c_fc``, ``dense_h_to_4h``), so that the activation's curvature (SiLU, GELU) makes a
drift (with output weights alone the branches are linear in the noise and the drift is 0). GPT-NeoX is the third
structure: a parallel residual x + attn(LN_1 x) + mlp(LN_2 x) (one sum, not two steps), LayerNorm with biases and a
rotary embedding on half the head; its ``nn.Linear`` layers come with random biases, which move the state by O(1) per
layer, so it is built with ``zero_biases=True``. All three are pre-norm: the residual stream lives in R^d.

Hugging Face computes RMSNorm, softmax and the rotary embedding in float32 although the block runs in float64:
``torch_layer_map`` warns, naming the first such operation (Llama and NeoX). Needs the torch and hf extras.
"""

from __future__ import annotations

from collections.abc import Callable

from .library_block import wrap_library_layer
from .torch_block import torch_layer_map

TOKENS, DIM, WIDTH, SIGMA = 3, 4, 8, 0.5
# the weights drawn fresh at every layer (entry standard deviation SIGMA sqrt(h)), per layer family
NOISY_WEIGHTS = {
    "llama": ("layer.self_attn.o_proj.weight", "layer.mlp.gate_proj.weight"),
    "gpt2": ("layer.attn.c_proj.weight", "layer.mlp.c_fc.weight"),
    "neox": ("layer.attention.dense.weight", "layer.mlp.dense_h_to_4h.weight"),
}
NAMES = {"llama": "Llama layer", "gpt2": "GPT-2 block", "neox": "GPT-NeoX layer"}


def hugging_face_configs() -> dict:
    """The three small configs (d = ``DIM``, MLP width ``WIDTH``, one head, one layer, no dropout), built anew at each
    call (a config is mutable)."""
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig

    common = {"vocab_size": 8, "attn_implementation": "eager"}
    return {
        "llama": LlamaConfig(
            hidden_size=DIM,
            intermediate_size=WIDTH,
            num_attention_heads=1,
            num_key_value_heads=1,
            num_hidden_layers=1,
            **common,
        ),
        "gpt2": GPT2Config(
            n_embd=DIM,
            n_inner=WIDTH,
            n_head=1,
            n_layer=1,
            bos_token_id=0,
            eos_token_id=0,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **common,
        ),
        "neox": GPTNeoXConfig(
            hidden_size=DIM,
            intermediate_size=WIDTH,
            num_attention_heads=1,
            num_hidden_layers=1,
            use_parallel_residual=True,
            rotary_pct=0.5,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            **common,
        ),
    }


def llama_block():
    """Llama's decoder layer (RMSNorm, rotary attention, SiLU-gated MLP), wrapped."""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    config = hugging_face_configs()["llama"]
    return wrap_library_layer(LlamaDecoderLayer(config, layer_idx=0), rotary=LlamaRotaryEmbedding(config))


def gpt2_block():
    """GPT-2's block (LayerNorm, attention, GELU MLP), wrapped."""
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    return wrap_library_layer(GPT2Block(hugging_face_configs()["gpt2"], layer_idx=0))


def neox_block():
    """GPT-NeoX's layer (parallel residual, rotary embedding on half the head), wrapped."""
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXLayer, GPTNeoXRotaryEmbedding

    config = hugging_face_configs()["neox"]
    return wrap_library_layer(GPTNeoXLayer(config, layer_idx=0), rotary=GPTNeoXRotaryEmbedding(config))


def hugging_face_blocks() -> dict[str, Callable]:
    """For each family, the function building its wrapped layer (a fresh ``nn.Module`` at each call; module-level, so
    a layer map pickles to worker processes)."""
    return {"llama": llama_block, "gpt2": gpt2_block, "neox": neox_block}


def hugging_face_layers(sigma: float = SIGMA) -> dict:
    """The three layer maps (n = ``TOKENS`` tokens in R^``DIM``), keyed "llama", "gpt2", "neox" (module docstring);
    ``torch_layer_map`` warns about Llama's and NeoX's float32 internals."""
    return {
        family: torch_layer_map(
            build,
            TOKENS,
            DIM,
            dict.fromkeys(NOISY_WEIGHTS[family], sigma),
            name=NAMES[family],
            zero_biases=family == "neox",
        )
        for family, build in hugging_face_blocks().items()
    }
