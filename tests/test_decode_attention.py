"""Attention of a decode pass over several tokens a row with the query heads packed by
key/value head (``decode_attention``), as transformers packs a pass of one token."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402

from pytest_lceval.models.decode_attention import (  # noqa: E402
    NAME,
    grouped_decode_attention,
    grouped_sdpa,
)


def _pass(tokens: int, keys: int = 40) -> tuple[torch.Tensor, ...]:
    """A pass of ``tokens`` tokens for 2 rows over ``keys`` positions, 6 query heads over 2
    key/value heads, a mask with holes (padding, drafts not kept) and causal at the end."""
    torch.manual_seed(0)
    query = torch.randn(2, 6, tokens, 16)
    key, value = torch.randn(2, 2, keys, 16), torch.randn(2, 2, keys, 16)
    mask = torch.ones(2, 1, tokens, keys, dtype=torch.bool)
    mask[1, :, :, :7] = False
    mask[0, :, :, 20:23] = False
    for token in range(tokens):
        mask[:, :, token, keys - tokens + token + 1:] = False
    return query, key, value, mask


def test_a_pass_of_several_tokens_attends_as_transformers_does_and_as_one_token_passes_do(
        ) -> None:
    module = SimpleNamespace(num_key_value_groups=3, is_causal=True, training=False)
    query, key, value, mask = _pass(5)
    grouped, _ = grouped_sdpa(module, query, key, value, mask, scaling=0.25)
    repeated, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.25)
    assert grouped.shape == repeated.shape == (2, 5, 6, 16)
    assert torch.allclose(grouped, repeated, atol=1e-6)
    for token in range(5):  # each token as a pass of its own (transformers packs that one)
        one, _ = sdpa_attention_forward(module, query[:, :, token:token + 1], key, value,
                                        mask[:, :, token:token + 1], scaling=0.25)
        assert torch.allclose(one[:, 0], grouped[:, token], atol=1e-6)


def test_only_a_model_on_sdpa_switches_and_only_while_it_lasts() -> None:
    sdpa = SimpleNamespace(config=SimpleNamespace(_attn_implementation="sdpa"))
    eager = SimpleNamespace(config=SimpleNamespace(_attn_implementation="eager"))
    with grouped_decode_attention(sdpa), grouped_decode_attention(eager):
        assert sdpa.config._attn_implementation == NAME
        assert eager.config._attn_implementation == "eager"
    assert sdpa.config._attn_implementation == "sdpa"
