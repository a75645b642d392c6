"""The CPU decoder's probe (``decoder_probe``): each shortcut of ``hf_greedy.greedy_batch``
checked on the loaded model, split against whole, bit for bit. Which shortcuts a host keeps
depends on its processor; each check must see a difference where there is one, which these
tests make by rounding one side of one check a step otherwise, on every host alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import AttentionInterface  # noqa: E402

from pytest_lceval.models import cpu_products, decoder_probe  # noqa: E402
from pytest_lceval.models.decode_attention import NAME, grouped_sdpa  # noqa: E402
from pytest_lceval.models.decoder_probe import Verdict, probe  # noqa: E402
from pytest_lceval.models.hf import cache_keyword  # noqa: E402
from pytest_lceval.models.hf_greedy import Prefilled, Shortcuts  # noqa: E402


@pytest.fixture
def model() -> Any:
    """A tiny Llama with grouped-query attention, on one thread (tiny products gain nothing
    from threads, and lose much when cores are shared)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    config = transformers.LlamaConfig(
        vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        initializer_range=0.5)
    torch.manual_seed(0)
    yield transformers.LlamaForCausalLM(config).eval()
    torch.set_num_threads(threads)


def _up(tensor: torch.Tensor) -> torch.Tensor:
    """Every value one step of rounding up."""
    return torch.nextafter(tensor, torch.full_like(tensor, float("inf")))


def _nudge_prefilled_starts(monkeypatch: pytest.MonkeyPatch, model: Any) -> None:
    class Nudged(Prefilled):
        def start(self, ids: list[int]) -> Any:
            cache, start = super().start(ids)
            if start:
                cache.layers[0].keys = _up(cache.layers[0].keys)
            return cache, start

    monkeypatch.setattr(decoder_probe, "Prefilled", Nudged)


def _nudge_stacked_products(monkeypatch: pytest.MonkeyPatch, model: Any) -> None:
    product = cpu_products._Group.product

    def nudged(group: Any, rows: torch.Tensor, packed: bool) -> torch.Tensor:
        result = product(group, rows, packed)
        return _up(result) if len(group.members) > 1 else result

    monkeypatch.setattr(cpu_products._Group, "product", nudged)


def _nudge_packed_rows(monkeypatch: pytest.MonkeyPatch, model: Any) -> None:
    linear = cpu_products.packed_linear

    def nudged(rows: torch.Tensor, packed: torch.Tensor, bias: Any) -> torch.Tensor:
        result = linear(rows, packed, bias)
        return _up(result) if rows.shape[0] > 1 else result

    monkeypatch.setattr(cpu_products, "packed_linear", nudged)
    monkeypatch.setattr(decoder_probe, "packed_linear", nudged)


def _nudge_grouped_attention(monkeypatch: pytest.MonkeyPatch, model: Any) -> None:
    def nudged(*args: Any, **kwargs: Any) -> Any:
        output, weights = grouped_sdpa(*args, **kwargs)
        return _up(output), weights

    monkeypatch.setitem(AttentionInterface._global_mapping, NAME, nudged)


def _nudge_decode_logits(when: Callable[[torch.Tensor], bool]) -> Callable[..., None]:
    """A nudge: a decode pass's logits a step up where ``when(its input ids)``."""
    def nudge(monkeypatch: pytest.MonkeyPatch, model: Any) -> None:
        def hook(module: Any, args: Any, kwargs: dict[str, Any], output: Any) -> None:
            products = getattr(module, "_lceval_products", None)
            if products is not None and products.decoding and when(kwargs["input_ids"]):
                output.logits = _up(output.logits)

        model.register_forward_hook(hook, with_kwargs=True)  # the model is this test's own
    return nudge


NUDGES = {
    "shared_start": _nudge_prefilled_starts,
    "stacked": _nudge_stacked_products,
    "packed": _nudge_packed_rows,
    "grouped": _nudge_grouped_attention,
    "drafts": _nudge_decode_logits(lambda ids: ids.shape[1] > 1),
    "leaving": _nudge_decode_logits(lambda ids: ids.shape[0] > 1),
}
"""By shortcut: what rounds its split side a step otherwise than its whole side."""


@pytest.mark.parametrize("name", list(NUDGES))
def test_a_shortcut_whose_split_rounds_otherwise_is_off_with_what_differed(
        model: Any, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    if name in ("stacked", "packed", "grouped") and not cpu_products.packing_available():
        pytest.skip("no oneDNN packed linear")
    NUDGES[name](monkeypatch, model)
    verdict = probe(model, cache_keyword(model))
    assert not getattr(verdict.shortcuts, name)
    assert verdict.why[name]
    assert f"{decoder_probe.PARTS[name]} ({verdict.why[name]})" in verdict.line()


def test_the_probe_leaves_the_products_as_its_verdict_says(
        model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stacked products and packed weights found to round otherwise: every linear is then its
    own product, and no packed copy of a weight is kept."""
    if not cpu_products.packing_available():
        pytest.skip("no oneDNN packed linear")
    _nudge_stacked_products(monkeypatch, model)
    _nudge_packed_rows(monkeypatch, model)
    verdict = probe(model, cache_keyword(model))
    assert not verdict.shortcuts.stacked and not verdict.shortcuts.packed
    products = model._lceval_products
    assert not products.stacking and not products.packing
    assert products.groups and all(len(group.members) == 1 and group.packed is None
                                   for group in products.groups.values())


def test_the_line_names_each_shortcut_off_and_why_and_the_probe_s_time() -> None:
    off = Verdict(Shortcuts(shared_start=False, drafts=False),
                  {"shared_start": "layer 1's keys differ", "drafts": "a pass rounds otherwise"},
                  1.25)
    assert off.line() == (
        "lceval: CPU decoder: off on this host: shared-start prefill (layer 1's keys differ); "
        "drafts (a pass rounds otherwise); exact: stacked products, packed weights, grouped "
        "decode attention, rows leaving the batch (probe 1.2 s)")
    assert Verdict(Shortcuts(), {}, 0.5).line() == (
        "lceval: CPU decoder: every shortcut exact on this host: shared-start prefill, stacked "
        "products, packed weights, grouped decode attention, drafts, rows leaving the batch "
        "(probe 0.5 s)")
