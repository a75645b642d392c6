"""Attention for a decode pass that feeds a few tokens a row, without copying the KV cache.

With grouped-query attention (SmolLM2: 9 query heads share 3 key/value heads) and a mask,
transformers' SDPA path packs the query heads of one key/value head together only for a pass
of one token; a pass of several (the next token and its lookup draft) has the keys and values
repeated for every query head, a copy of the whole cache per layer and pass: on SmolLM2 over
2k tokens that doubled a pass of 2 x 2 tokens (90 -> 190 ms). Here the several tokens' query
heads are packed the same way, each row of the mask repeated for its heads, so the kernel reads
the cache where it lies. Whether it rounds a query row so packed as it rounds it in
transformers' path depends on the host's kernels: ``decoder_probe`` checks it where it runs,
and where it differs transformers' path stays.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

NAME = "lceval_grouped_sdpa"
"""The attention implementation's name in transformers' registries."""


def grouped_sdpa(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, scaling: float | None = None,
                 **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, with a masked pass of several tokens' query heads packed
    by key/value head ([batch, kv heads, groups x tokens, size]) rather than the cache repeated."""
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, tokens, size = query.shape
    if (groups == 1 or tokens == 1 or attention_mask is None
            or attention_mask.dtype != torch.bool or kwargs.get("dropout", 0.0)):
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      scaling=scaling, **kwargs)
    packed = query.reshape(batch, heads // groups, groups * tokens, size)
    mask = attention_mask.repeat(1, 1, groups, 1)
    output = torch.nn.functional.scaled_dot_product_attention(packed, key, value, attn_mask=mask,
                                                              scale=scaling)
    return output.reshape(batch, heads, tokens, size).transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, grouped_sdpa)
AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


@contextmanager
def grouped_decode_attention(model: Any) -> Iterator[None]:
    """A model that attends with SDPA uses ``grouped_sdpa`` while this lasts."""
    config = model.config
    if config._attn_implementation != "sdpa":
        yield
        return
    config._attn_implementation = NAME
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"
