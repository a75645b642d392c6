"""Generate batches decoded by ``hf_greedy.greedy_batch`` on a CPU (``HFBackend.greedy_on_cpu``):
each prompt prefilled alone, from a shared start where it has one, the padded batch decoded over
a cache that grows in place with products that suit a few rows. Tiny random models with the real
SmolLM2 tokenizer, as in test_hf_backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_hf_backend import PREFIX, _one_thread, load, tiny_dirs  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402

from pytest_lceval.models import hf, hf_greedy  # noqa: E402
from pytest_lceval.models.hf import HFBackend  # noqa: E402
from pytest_lceval.models.hf_greedy import (  # noqa: E402
    GrowingLayer,
    _shared_start,
    narrow_products,
    padded_cache,
)
from pytest_lceval.results.records import GenerateRequest  # noqa: E402

__all__ = ["_one_thread", "load", "tiny_dirs"]  # fixtures from test_hf_backend


@pytest.mark.parametrize("stop", [(), ("e",), (" t", "\n")])
def test_greedy_batch_gives_what_model_generate_gives(load: Callable[..., HFBackend],
                                                      stop: tuple[str, ...]) -> None:
    """Prompts of different lengths (all but the longest padded), stop strings: the same texts
    and token counts as ``model.generate`` on the padded batch (a row that a stop string ended
    is padded alike, so the counts agree too)."""
    backend = load("llama", chat_template="off")
    assert backend.greedy_on_cpu
    prompts = [PREFIX + f" Item {n}: " + "word " * n for n in range(5)] + ["Alone here"]
    requests = [GenerateRequest(prompt, 16, stop) for prompt in prompts]
    greedy = backend.generate(requests)
    backend.greedy_on_cpu = False
    padded = backend.generate(requests)
    assert [(a.text, a.prompt_tokens, a.output_tokens) for a in greedy] == [
        (a.text, a.prompt_tokens, a.output_tokens) for a in padded]


def test_with_the_same_products_unpadded_rows_decode_as_model_generate_does(
        load: Callable[..., HFBackend], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the narrow products and without padding nothing rounds differently, so a long
    answer must come out token for token: a mistake in positions, masks or the cache shows."""
    monkeypatch.setattr(hf_greedy, "NARROW_ROWS", 0)
    backend = load("llama", chat_template="off")
    prompts = [PREFIX, PREFIX.replace("river", "creek")]
    ids = [backend.prompt_ids(prompt) for prompt in prompts]
    assert len(ids[0]) == len(ids[1])
    tokens = hf_greedy.greedy_batch(backend.model, ids, 40, backend._eos, backend._pad, [],
                                    None, backend._cache_keyword)
    with torch.inference_mode():
        output = backend.model.generate(torch.tensor(ids), do_sample=False, max_new_tokens=40,
                                        eos_token_id=backend._eos, pad_token_id=backend._pad)
    assert tokens == output[:, len(ids[0]):].tolist()
    assert len(tokens[0]) == 40


def _decode_logits(model: Any, keyword: str, cache: Any, steps: int) -> Any:
    """Logits of ``steps`` one-token decode steps over ``cache`` (a prompt already in it)."""
    rows = []
    with torch.inference_mode():
        for step in range(steps):
            token = torch.tensor([[11 + step]])
            rows.append(model(input_ids=token, use_cache=True, **{keyword: cache}).logits)
    return torch.cat(rows)


def test_a_growing_cache_holds_the_bits_of_a_concatenated_one(
        load: Callable[..., HFBackend]) -> None:
    backend = load("llama", chat_template="off")
    ids = torch.tensor([backend.prompt_ids(PREFIX)])
    keyword = backend._cache_keyword
    dynamic = DynamicCache()
    with torch.inference_mode():
        backend.model(input_ids=ids, use_cache=True, **{keyword: dynamic})
    growing = padded_cache([dynamic], ids.shape[1] + 8)
    assert all(isinstance(layer, GrowingLayer) for layer in growing.layers)
    grown = _decode_logits(backend.model, keyword, growing, 8)
    concatenated = _decode_logits(backend.model, keyword, dynamic, 8)
    assert torch.equal(grown, concatenated)
    assert growing.get_seq_length() == dynamic.get_seq_length() == ids.shape[1] + 8


def test_a_prompt_prefilled_from_a_shared_start_reads_the_same_bits(
        load: Callable[..., HFBackend]) -> None:
    """The second prompt shares the first's start: prefilled over a copy of those keys and
    values, its cache and next-token logits equal its whole prefill's; the first's cache is
    left as it was."""
    backend = load("llama", chat_template="off")
    model, keyword = backend.model, backend._cache_keyword
    first = backend.prompt_ids(PREFIX * 2)
    second = backend.prompt_ids(PREFIX * 2 + " And what of the mill, then, and the miller?")
    done = DynamicCache()
    with torch.inference_mode():
        model(input_ids=torch.tensor([first]), use_cache=True, **{keyword: done})
        before = [layer.keys.clone() for layer in done.layers]
        cache, start = _shared_start([done], [first], second)
        assert hf_greedy.MIN_SHARED <= start <= len(first)
        shared = model(input_ids=torch.tensor([second[start:]]), use_cache=True,
                       logits_to_keep=1, **{keyword: cache}).logits
        whole_cache = DynamicCache()
        whole = model(input_ids=torch.tensor([second]), use_cache=True, logits_to_keep=1,
                      **{keyword: whole_cache}).logits
    assert torch.equal(shared, whole)
    assert all(torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
               for a, b in zip(cache.layers, whole_cache.layers, strict=True))
    assert all(torch.equal(a, layer.keys) for a, layer in zip(before, done.layers, strict=True))


def test_a_barely_shared_prompt_starts_from_nothing_and_a_repeated_one_near_its_end() -> None:
    prompt = list(range(200))
    done = DynamicCache()
    done.update(torch.zeros(1, 1, 200, 4), torch.zeros(1, 1, 200, 4), 0)
    barely = list(range(hf_greedy.MIN_SHARED - 1)) + [-1] * 50
    assert _shared_start([done], [prompt], barely)[1] == 0
    assert _shared_start([], [], prompt)[1] == 0
    cache, start = _shared_start([done], [prompt], prompt)  # all of it: the rest still prefills
    assert start == cache.get_seq_length() == 200 - hf_greedy.MIN_REST


def test_narrow_products_change_only_few_rows_and_only_while_they_last() -> None:
    linear = torch.nn.Linear(64, 48)
    few, many = torch.randn(2, 64), torch.randn(hf_greedy.NARROW_ROWS + 1, 64)
    plain = torch.nn.functional.linear
    with torch.inference_mode(), narrow_products(torch.nn.Sequential(linear)):
        assert "forward" in vars(linear)
        assert torch.allclose(linear(few), plain(few, linear.weight, linear.bias), atol=1e-5)
        assert linear(few).is_contiguous()
        assert torch.equal(linear(many), plain(many, linear.weight, linear.bias))
    assert "forward" not in vars(linear)


class _SharedInput(torch.nn.Module):
    """A layer's shape in small: three products of one input (q, k and v), the first's weight
    tied to another module's (as an LM head's to the embeddings)."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = torch.nn.Linear(64, 48, bias=False), torch.nn.Linear(64, 16)
        self.third, self.other = torch.nn.Linear(64, 64, bias=False), torch.nn.Linear(64, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.first(x), self.second(x), self.third(x), self.other(x * 2)], -1)


def _misaligned(weight: torch.Tensor, offset: int) -> torch.nn.Parameter:
    """``weight``'s values starting ``offset`` bytes past a cache line, as a loaded checkpoint's
    weights can (SmolLM2's GGUF-loaded weights start 40 bytes past one)."""
    buffer = torch.empty(weight.numel() + 16)
    start = ((offset - buffer.data_ptr()) % 64) // 4
    moved = buffer[start:start + weight.numel()].view_as(weight)
    moved.copy_(weight)
    return torch.nn.Parameter(moved, requires_grad=False)


def test_products_of_one_input_are_stacked_with_the_same_bits() -> None:
    """Linears that read one input one after another compute in one product once the first
    step has shown it, tied weights left out: the weights then view one buffer that starts where
    each weight did modulo a cache line (MKL's bits depend on it), and every output keeps its
    bits."""
    torch.manual_seed(0)
    model = _SharedInput()
    for name in ("first", "second", "third"):
        linear = getattr(model, name)
        linear.weight = _misaligned(linear.weight.detach(), 40)
    model.other.weight = model.first.weight
    steps = [torch.randn(2, 1, 64) for _ in range(4)]
    with torch.inference_mode():
        expected = [torch.mm(model.second.weight, x.reshape(2, 64).t()).t() + model.second.bias
                    for x in steps]
        model._lceval_products = hf_greedy.StackedProducts(set())
        model._lceval_products.seen = None  # never stacks: each product alone
        with narrow_products(model):
            alone = [model(x) for x in steps]
        del model._lceval_products
        with narrow_products(model):
            stacked = [model(x) for x in steps]
            seconds = [model.second(x).reshape(2, 16) for x in steps]
    groups = [group for _, group in model._lceval_products.stacks.values()]
    assert groups == [[model.second, model.third]]
    assert model.second.weight.data_ptr() % 64 == model.third.weight.data_ptr() % 64 == 40
    assert model.second.weight.untyped_storage().data_ptr() == \
        model.third.weight.untyped_storage().data_ptr()
    assert all(torch.equal(a, b) for a, b in zip(alone, stacked, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(expected, seconds, strict=True))


def test_sliding_window_models_and_the_switch_keep_model_generate(
        load: Callable[..., HFBackend], monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemma's sliding layers prefill in chunks (``PREFILL_CHUNK``) into window caches, which
    ``greedy_batch`` does not build; ``GREEDY_ON_CPU`` off leaves every model on
    ``model.generate``."""
    assert load("llama").greedy_on_cpu
    assert not load("gemma").greedy_on_cpu
    monkeypatch.setattr(hf, "GREEDY_ON_CPU", False)
    assert not load("llama").greedy_on_cpu
