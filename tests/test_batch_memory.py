"""The HF backend's batch budget: the GPU row cost against what a forward pass really keeps,
and what it allows on an H100 where the CPU rule ran 32k prompts one at a time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_lceval.models.batch_memory import CPU_BATCH_TOKENS, GPU_HEADROOM, BatchMemory, RowCost
from pytest_lceval.models.hf import cache_of

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LLAMA_31_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                   num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                   max_position_embeddings=131072)
"""Llama-3.1-8B's published config (the numbers that size its memory)."""
GB = 10**9


def _tiny(name: str) -> tuple[object, object]:
    if name == "llama":
        config = transformers.LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
        return config, transformers.LlamaForCausalLM(config).eval()
    config = transformers.Gemma3TextConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        max_position_embeddings=256)
    return config, transformers.Gemma3ForCausalLM(config).eval()


@pytest.mark.parametrize("name", ["llama", "gemma"])
@pytest.mark.parametrize("length", [3, 8, 40])
def test_the_kv_estimate_bounds_the_cache_a_forward_pass_keeps(name: str, length: int) -> None:
    """The KV part of a row's cost is the cache's real size, or at most one token more per
    sliding layer (HF keeps window - 1 tokens there after a prefill)."""
    config, model = _tiny(name)
    cost = RowCost.of(config, 4, None)  # float32
    assert cost is not None
    with torch.inference_mode():
        cache = cache_of(model(input_ids=torch.randint(0, 64, (1, length)), use_cache=True))
    kept = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    estimate = cost(length) - length * (cost.activations_per_token + length * 5)  # the mask
    assert kept <= estimate <= kept + sum(size for _, size in cost.sliding)


def test_an_h100_holds_several_32k_rows_of_an_8b_model() -> None:
    """bf16 Llama-3.1-8B: 128 KiB of KV cache a token (32 layers x 2 x 8 heads x 128 x 2 bytes);
    with its 16 GB of weights on an 80 GB card, a 32k prompt no longer runs alone (the CPU
    rule's 32,768 padded tokens), and 4k prompts fill a batch of dozens."""
    cost = RowCost.of(transformers.LlamaConfig(**LLAMA_31_8B), 2, None)
    assert cost is not None and cost.kv_per_token == 32 * 2 * 8 * 128 * 2 and not cost.sliding
    assert cost.activations_per_token == (3 * 14336 + 6 * 4096) * 2 and cost.mask_per_entry == 3
    memory = BatchMemory.for_gpu(cost, free=64 * GB, total=80 * GB, share=0.9, in_use=16 * GB)
    assert memory.budget == pytest.approx(GPU_HEADROOM * (0.9 * 80 - 16) * GB)
    rows = {length: max(n for n in range(1, 200) if memory.fits(n, length))
            for length in (4096 + 50, 16384 + 50, 32768 + 50)}
    assert rows == {4146: 43, 16434: 9, 32818: 4}
    assert not BatchMemory.for_cpu().fits(2, 32818)


def test_sharing_a_card_and_its_free_memory_bound_the_budget() -> None:
    cost = RowCost(kv_per_token=1000)
    assert BatchMemory.for_gpu(cost, 80 * GB, 80 * GB, 0.45, 16 * GB).budget == pytest.approx(
        GPU_HEADROOM * 20 * GB)  # two workers on one card: 0.9 / 2 of it, less the weights
    assert BatchMemory.for_gpu(cost, 5 * GB, 80 * GB, 0.9, 16 * GB).budget == pytest.approx(
        GPU_HEADROOM * 5 * GB)  # someone else holds the rest
    assert BatchMemory.for_gpu(cost, 5 * GB, 80 * GB, 0.1, 16 * GB).budget == 0
    assert BatchMemory.for_gpu(cost, 5 * GB, 80 * GB, 0.1, 16 * GB).fits(1, 10**6)


def test_sliding_layers_and_prefill_chunks_cap_what_grows_with_length() -> None:
    _, model = _tiny("gemma")
    whole = RowCost.of(model.config, 2, None)
    chunked = RowCost.of(model.config, 2, 16)
    assert whole is not None and chunked is not None
    assert [window for window, _ in whole.sliding] == [8, 8]
    long = 10_000
    assert whole(long) - chunked(long) == (long - 16) * (whole.activations_per_token + long * 3)


def test_a_config_without_the_sizes_gets_the_cpu_rule() -> None:
    assert RowCost.of(SimpleNamespace(num_hidden_layers=4, hidden_size=64), 2, None) is None
    assert BatchMemory.for_cpu().budget == CPU_BATCH_TOKENS


def test_running_out_of_memory_halves_what_fits_from_then_on() -> None:
    memory = BatchMemory(budget=16_000)  # in tokens, as on a CPU
    assert memory.fits(16, 1000) and not memory.fits(17, 1000)
    assert memory.shrink(16, 1000)
    assert memory.fits(8, 1000) and not memory.fits(9, 1000)
    assert memory.fits(16, 500) and not memory.fits(17, 500)  # every length is scaled alike
    assert not memory.shrink(1, 1000)
    assert memory.fits(1, 10**12)
