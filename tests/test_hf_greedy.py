"""Generate batches decoded by ``hf_greedy.greedy_batch`` on a CPU (``HFBackend.greedy_on_cpu``):
each prompt prefilled alone, from a shared start where it has one, the padded batch decoded over
a cache that grows in place with products that suit a few rows. Tiny random models with the real
SmolLM2 tokenizer, as in test_hf_backend."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_hf_backend import PREFIX, _one_thread, load, tiny_dirs  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402

from pytest_lceval.models import cpu_products, decoder_probe, hf, hf_greedy  # noqa: E402
from pytest_lceval.models.decoder_probe import Verdict  # noqa: E402
from pytest_lceval.models.hf import HFBackend  # noqa: E402
from pytest_lceval.models.hf_greedy import (  # noqa: E402
    GrowingLayer,
    Prefilled,
    Shortcuts,
    _Answer,
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


def test_a_batch_starts_where_the_last_batch_s_prompts_start_alike(
        load: Callable[..., HFBackend]) -> None:
    """The next cell's prompts begin as this cell's did: the second batch prefills only what
    follows the shared start (whole where the probe turned shared starts off), and answers as
    ``model.generate`` does."""
    backend = load("llama", chat_template="off")
    cells = [[GenerateRequest(PREFIX * 2 + f" Cell {cell}, item {n}:", 12, ()) for n in (1, 2)]
             for cell in (1, 2)]
    fed: list[int] = []
    hook = backend.model.register_forward_pre_hook(
        lambda _, args, kwargs: fed.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    backend.generate(cells[0])
    fed.clear()
    greedy = backend.generate(cells[1])
    hook.remove()
    assert backend.decoder_verdict is not None
    length = len(backend.prompt_ids(cells[1][0].prompt))
    if backend.decoder_verdict.shortcuts.shared_start:
        assert fed[0] <= length - hf_greedy.MIN_SHARED
    else:  # the probe found a split prefill rounds otherwise on this host: prefilled whole
        assert fed[0] == length
    backend.greedy_on_cpu = False
    assert [a.text for a in greedy] == [a.text for a in backend.generate(cells[1])]


def test_with_the_same_products_unpadded_rows_decode_as_model_generate_does(
        load: Callable[..., HFBackend], monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``F.linear``'s products and without padding, a long answer must come out token for
    token, drafts and all: a mistake in positions, masks, kept draft positions or the cache
    shows."""
    monkeypatch.setattr(cpu_products, "packing_available", lambda: False)
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


def test_a_prompt_prefilled_from_a_shared_start_reads_the_same_bits_where_the_probe_says_so(
        load: Callable[..., HFBackend]) -> None:
    """The probe's prompts, prefilled here over a copy of the first one's start and whole: the
    probe keeps shared starts exactly where every cache and next-token logit is the same, and
    the first prompt's cache is left as it was. Where the host rounds a split otherwise, the
    answers come from whole prefills and are ``model.generate``'s
    (``test_a_batch_starts_where_the_last_batch_s_prompts_start_alike``)."""
    backend = load("llama", chat_template="off")
    model, keyword = backend.model, backend._cache_keyword
    assert backend.decoder_verdict is not None
    shortcuts = backend.decoder_verdict.shortcuts
    first, *others = decoder_probe.shared_start_prompts(len(backend.hf_tokenizer))
    done = DynamicCache()
    same = []
    with torch.inference_mode(), cpu_products.cpu_products(model, shortcuts.packed,
                                                           shortcuts.stacked):
        model(input_ids=torch.tensor([first]), use_cache=True, **{keyword: done})
        before = [layer.keys.clone() for layer in done.layers]
        prefilled = Prefilled()
        prefilled.add(first, done)
        for second in others:
            cache, start = prefilled.start(second)
            assert hf_greedy.MIN_SHARED <= start <= len(second) - hf_greedy.MIN_REST
            shared = model(input_ids=torch.tensor([second[start:]]), use_cache=True,
                           logits_to_keep=1, **{keyword: cache}).logits
            whole_cache = DynamicCache()
            whole = model(input_ids=torch.tensor([second]), use_cache=True, logits_to_keep=1,
                          **{keyword: whole_cache}).logits
            same.append(torch.equal(shared, whole) and all(
                torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
                for a, b in zip(cache.layers, whole_cache.layers, strict=True)))
    assert shortcuts.shared_start == all(same)
    assert ("shared_start" in backend.decoder_verdict.why) != all(same)
    assert all(torch.equal(a, layer.keys) for a, layer in zip(before, done.layers, strict=True))


def test_a_barely_shared_prompt_starts_from_nothing_and_a_repeated_one_near_its_end() -> None:
    prompt = list(range(200))
    done = DynamicCache()
    done.update(torch.zeros(1, 1, 200, 4), torch.zeros(1, 1, 200, 4), 0)
    barely = list(range(hf_greedy.MIN_SHARED - 1)) + [-1] * 50
    prefilled = Prefilled()
    assert prefilled.start(prompt)[1] == 0
    prefilled.add(prompt, done)
    assert prefilled.start(barely)[1] == 0
    cache, start = prefilled.start(prompt)  # all of it: the rest still prefills
    assert start == cache.get_seq_length() == 200 - hf_greedy.MIN_REST


def test_the_last_batch_s_prompts_are_kept_for_the_next_up_to_a_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_greedy, "MAX_KEPT", 250)
    prefilled = Prefilled()
    for length in (300, 100, 100, 100):
        prefilled.add(list(range(length)), DynamicCache())
    prefilled.keep_latest(3)  # the newest two fit in 250 tokens
    assert [len(ids) for ids in prefilled.prompts] == [100, 100]
    assert len(prefilled.caches) == 2
    prefilled.keep_latest(0)
    assert prefilled.prompts == prefilled.caches == []


def test_greedy_batch_checks_drafts_and_keeps_what_greedy_decoding_chooses(
        load: Callable[..., HFBackend], monkeypatch: pytest.MonkeyPatch) -> None:
    """Drafts that are right (row 0) and right only up to their third token (row 1): fewer
    passes than tokens, and the tokens of decoding without drafts, to the budget and short of
    it. A random model's answers do not repeat, so the drafts come from that plain decoding."""
    backend = load("llama", chat_template="off")
    ids = [backend.prompt_ids(PREFIX * 3), backend.prompt_ids("Alone here " + PREFIX)]
    passes: list[int] = []

    def count(_: Any, args: Any, kwargs: dict[str, Any]) -> None:
        passes.append(kwargs["input_ids"].shape[1])

    def decode(budget: int) -> list[list[int]]:
        passes.clear()
        return hf_greedy.greedy_batch(backend.model, ids, budget, backend._eos, backend._pad,
                                      [], None, backend._cache_keyword)

    def guess(tokens: list[int], size: int) -> list[int]:
        row = next(row for row, prompt in enumerate(ids) if tokens[:len(prompt)] == prompt)
        draft = list(plain[row][len(tokens) - len(ids[row]):][:size])
        if row == 1 and len(draft) > 2:
            draft[2] += 1
        return draft

    hook = backend.model.register_forward_pre_hook(count, with_kwargs=True)
    monkeypatch.setattr(hf_greedy, "DRAFT_TOKENS", 0)
    plain = decode(48)
    assert set(passes[len(ids):]) == {1} and len(passes) - len(ids) == 47
    monkeypatch.setattr(hf_greedy, "DRAFT_TOKENS", 7)
    monkeypatch.setattr(hf_greedy, "lookup_draft", guess)
    drafted = decode(48)
    hook.remove()
    assert drafted == plain
    assert max(passes[len(ids):]) == 8 and len(passes) - len(ids) <= 47 // 3 + 1
    assert decode(5) == [row[:5] for row in plain]


def test_a_row_that_ended_leaves_the_batch_and_the_others_decode_as_before(
        load: Callable[..., HFBackend]) -> None:
    """Row 0 ends at an EOS token (its 4th token made one), the batch goes on with row 1 alone:
    row 1's tokens are those it had beside row 0, and row 0 is padded as ``model.generate``
    pads it."""
    backend = load("llama", chat_template="off")
    ids = [backend.prompt_ids(PREFIX), backend.prompt_ids("Alone here " + PREFIX)]
    keyword, pad = backend._cache_keyword, backend._pad
    both = hf_greedy.greedy_batch(backend.model, ids, 30, [], pad, [], None, keyword)
    end = both[0][3]
    assert end not in both[1] and end not in both[0][:3]
    ended = hf_greedy.greedy_batch(backend.model, ids, 30, [end], pad, [], None, keyword)
    assert ended == [both[0][:4] + [pad] * 26, both[1]]


def test_an_answer_keeps_its_draft_up_to_the_first_token_greedy_decoding_did_not_choose(
        ) -> None:
    answer = _Answer([1, 2, 3], budget=10, eos={0}, stop=None)
    assert answer.accept([4, 5, 9, 7], [4, 5, 6]) == 3  # fed 3, 4, 5 kept; 6 was not chosen
    assert answer.ids == [1, 2, 3, 4, 5, 9] and not answer.ended
    assert answer.accept([7, 8], [7]) == 2  # the whole draft and the pass's own next token
    assert answer.accept([0, 1, 1], [0, 1]) == 1  # an EOS token ends it at once
    assert answer.ended and answer.ids[-1] == 0 and answer.draft(7) == []
    full = _Answer([1, 2, 1, 2], budget=3, eos=set(), stop=None)
    full.emit(1)
    assert full.draft(7) == [2]  # no guess past the budget
    assert full.accept([2, 1], [2]) == 2 and full.ended and full.new == 3


def test_a_growing_cache_moves_to_a_larger_buffer_when_drafts_fill_it() -> None:
    layer = GrowingLayer(torch.zeros(1, 2, 1, 4), rows=1, capacity=3)
    first = torch.randn(1, 2, 3, 4)
    layer.update(first, first + 1)
    keys, values = layer.update(torch.ones(1, 2, 5, 4), torch.ones(1, 2, 5, 4))
    assert layer.get_seq_length() == 8 and keys.shape[2] == 8
    assert torch.equal(keys[:, :, :3], first) and torch.equal(values[:, :, :3], first + 1)


SHORTCUTS = [part.name for part in dataclasses.fields(Shortcuts)]


@pytest.mark.parametrize("off", [[name] for name in SHORTCUTS] + [SHORTCUTS],
                         ids=[*SHORTCUTS, "all"])
def test_a_shortcut_the_probe_turned_off_takes_its_exact_path_and_answers_as_model_generate(
        load: Callable[..., HFBackend], off: list[str]) -> None:
    """The probe's outcome forced, whatever this host's arithmetic: two batches whose prompts
    share a start, rows ended early by a stop string. Each shortcut off shows in how the model
    was run, and the answers are ``model.generate``'s."""
    backend = load("llama", chat_template="off")
    model = backend.model  # loaded and probed
    backend.decoder_verdict = Verdict(Shortcuts(**{name: False for name in off}),
                                      {name: "forced" for name in off})
    products = model._lceval_products
    passes: list[tuple[int, int, str, bool, bool]] = []  # rows, width, attention, packing,
    # and whether a decode pass's

    def seen(_: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids = kwargs["input_ids"]
        passes.append((ids.shape[0], ids.shape[1], model.config._attn_implementation,
                       products.packing, products.decoding))

    cells = [[GenerateRequest(PREFIX * 2 + f" Cell {cell}, item {n}:" + " word" * n, 16, ("e",))
              for n in (1, 2, 3)] for cell in (1, 2)]
    hook = model.register_forward_pre_hook(seen, with_kwargs=True)
    greedy = [backend.generate(cell) for cell in cells]
    hook.remove()
    backend.greedy_on_cpu = False
    padded = [backend.generate(cell) for cell in cells]
    answers = [[(a.text, a.prompt_tokens, a.output_tokens) for a in cell] for cell in greedy]
    assert answers == [[(a.text, a.prompt_tokens, a.output_tokens) for a in cell]
                       for cell in padded]
    assert any(a.output_tokens < 16 for cell in greedy for a in cell)  # a row ended early
    decode = [one for one in passes if one[4]]
    if "shared_start" in off:
        assert sorted(width for _, width, _, _, decoding in passes if not decoding) == sorted(
            len(backend.prompt_ids(request.prompt)) for cell in cells for request in cell)
    if "stacked" in off:
        assert all(len(group.members) == 1 for group in products.groups.values())
    if "packed" in off:
        assert not any(packing for *_, packing, _ in decode)
        assert all(group.packed is None for group in products.groups.values())
    if "grouped" in off:
        assert {attention for _, _, attention, *_ in decode} == {"sdpa"}
    if "drafts" in off:
        assert {width for _, width, *_ in decode} == {1}
    if "leaving" in off:
        assert {rows for rows, *_ in decode} == {3}


def test_the_probe_runs_once_as_the_weights_load_and_its_line_is_noted(
        load: Callable[..., HFBackend], monkeypatch: pytest.MonkeyPatch) -> None:
    """Before anything else runs on the weights (a hook set on the loaded model never sees
    the probe's passes); not again for later batches; not for a model off the CPU decoder's
    path (Gemma's sliding layers)."""
    probes: list[Any] = []
    real = hf.probe

    def counted(model: Any, keyword: str) -> Verdict:
        probes.append(model)
        return real(model, keyword)

    monkeypatch.setattr(hf, "probe", counted)
    backend = load("llama", chat_template="off")
    assert not probes and not backend.notes  # the weights load at the first request
    for _ in range(2):
        backend.generate([GenerateRequest(PREFIX, 4)])
    assert probes == [backend.model]
    assert backend.decoder_verdict is not None
    assert backend.notes == [backend.decoder_verdict.line()]
    gemma = load("gemma", chat_template="off")
    gemma.generate([GenerateRequest(PREFIX, 4)])
    assert len(probes) == 1 and gemma.decoder_verdict is None and not gemma.notes


SAME_BITS_OR_PLAIN_ANSWERS = ("reads_the_same_bits_where_the_probe_says_so or "
                              "starts_where_the_last_batch or gives_what_model_generate_gives")
"""The tests of what the decoder promises whatever the probe finds on the host they run on."""


def test_under_mkl_s_compatible_rounding_the_decoder_keeps_what_it_promises(
        tmp_path: Any) -> None:
    """Real arithmetic changed under the decoder: ``MKL_CBWR=COMPATIBLE`` (read as MKL starts,
    so in a process of its own) sends MKL down other code paths, which round otherwise and
    turn some of the probe's checks (on AVX2 hosts, grouped decode attention's) the other way.
    There too, what the probe keeps reads the same bits and the answers are
    ``model.generate``'s."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:randomly", "-p",
         "no:cacheprovider", "--basetemp", str(tmp_path / "inner"), "-k",
         SAME_BITS_OR_PLAIN_ANSWERS],
        env={**os.environ, "MKL_CBWR": "COMPATIBLE"}, capture_output=True, text=True,
        timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "\n5 passed" in run.stdout


def test_sliding_window_models_and_the_switch_keep_model_generate(
        load: Callable[..., HFBackend], monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemma's sliding layers prefill in chunks (``PREFILL_CHUNK``) into window caches, which
    ``greedy_batch`` does not build; ``GREEDY_ON_CPU`` off leaves every model on
    ``model.generate``."""
    assert load("llama").greedy_on_cpu
    assert not load("gemma").greedy_on_cpu
    monkeypatch.setattr(hf, "GREEDY_ON_CPU", False)
    assert not load("llama").greedy_on_cpu
