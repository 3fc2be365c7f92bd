"""A layer from a model library (Hugging Face ``transformers``) as a one-argument block for ``torch_layer_map``.

Library decoder layers do not map tokens to tokens: they take positions and a mask beside the hidden states
(``LlamaDecoderLayer`` needs ``position_embeddings`` from the model's rotary embedding and raises a ``TypeError``
from deep inside without them), and some return a tuple. ``wrap_library_layer(layer, rotary, causal)`` supplies
what the model around them would: positions 0..n-1, the rotary embedding's (cos, sin) at those positions, an
additive causal mask (the dtype's lowest number above the diagonal, as ``transformers`` builds it; eager attention
needs it, ``config._attn_implementation = "eager"``), and unwraps a tuple's first element.

torch (and ``transformers`` for its layers) is needed only when a block is built: ``pip install -e ".[hf]"``.
"""

from __future__ import annotations

from functools import cache


@cache
def _block_class():
    import torch

    class LibraryBlock(torch.nn.Module):
        """x (batch, n, d) -> (batch, n, d) through a library layer (module docstring)."""

        def __init__(self, layer: torch.nn.Module, rotary: torch.nn.Module | None, causal: bool) -> None:
            super().__init__()
            self.layer, self.rotary, self.causal = layer, rotary, causal

        def forward(self, x):
            n = x.shape[-2]
            options = {}
            if self.causal:
                above = torch.ones(n, n, dtype=torch.bool).triu(1)
                options["attention_mask"] = torch.zeros(n, n, dtype=x.dtype).masked_fill(
                    above, torch.finfo(x.dtype).min
                )[None, None]
            if self.rotary is not None:
                positions = torch.arange(n)[None]
                options["position_ids"] = positions
                options["position_embeddings"] = self.rotary(x, positions)
            out = self.layer(x, **options)
            return out[0] if isinstance(out, tuple) else out

    return LibraryBlock


def wrap_library_layer(layer, rotary=None, causal: bool = True):
    """``layer`` (a ``torch.nn.Module`` such as ``transformers``' ``LlamaDecoderLayer`` or ``GPT2Block``) as a block
    mapping tokens (batch, n, d) to tokens: ``rotary`` the model's rotary embedding module (called as
    ``rotary(x, position_ids)``, e.g. ``LlamaRotaryEmbedding(config)``; None for a model without one), ``causal``
    whether each token attends only to itself and earlier ones. The layer's parameters are named ``layer.<name>``
    (what ``torch_layer_map``'s ``noise_parameters`` refer to)."""
    import torch

    if not isinstance(layer, torch.nn.Module):
        raise TypeError(f"layer must be a torch.nn.Module, got {type(layer).__name__}")
    if rotary is not None and not isinstance(rotary, torch.nn.Module):
        raise TypeError(f"rotary must be a torch.nn.Module or None, got {type(rotary).__name__}")
    return _block_class()(layer, rotary, bool(causal))
