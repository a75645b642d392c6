"""Generate batches through ``hf_shared``: shared prefixes prefilled once, answers as
``model.generate`` gives them (tiny random models with the real SmolLM2 tokenizer, as in
test_hf_backend)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_hf_backend import PREFIX, _one_thread, _raw_new_tokens, load, tiny_dirs  # noqa: E402

from pytest_lceval.models import hf, hf_shared  # noqa: E402
from pytest_lceval.models.hf import HFBackend  # noqa: E402
from pytest_lceval.results.records import GenerateRequest  # noqa: E402

__all__ = ["_one_thread", "load", "tiny_dirs"]  # fixtures from test_hf_backend

SHARED = PREFIX * 3
"""A common start of well over MIN_SHARED tokens."""


@contextmanager
def forward_widths(backend: HFBackend) -> Iterator[list[int]]:
    """The tokens of each forward pass over more than one token: the prompts, not the decode
    steps (each prompt's own rest is longer than a token in these tests)."""
    widths: list[int] = []
    handle = backend.model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].shape[1])
        if kwargs["input_ids"].shape[1] > 1 else None, with_kwargs=True)
    try:
        yield widths
    finally:
        handle.remove()


def test_each_shared_prefix_is_prefilled_once_and_answers_equal_generate(
        load: Callable[..., HFBackend]) -> None:
    """Two prompts share SHARED + a middle, a third only SHARED, a fourth nothing: the prompt
    tokens run are each distinct prefix once and each prompt's own rest once, and every answer
    is its own unpadded ``model.generate``."""
    backend = load("llama", chat_template="off")
    backend.share_prefixes = True
    middle = " The boats came back at noon, and nobody spoke of the mill again that year."
    prompts = [SHARED + middle + " Question: who counted?", "One two three four five",
               SHARED + " Question: what rose?", SHARED + middle + " Question: when?"]
    ids = [backend.prompt_ids(prompt) for prompt in prompts]
    with forward_widths(backend) as widths:
        answers = backend.generate([GenerateRequest(prompt, 12) for prompt in prompts])
    assert hf_shared.MIN_SHARED <= hf_shared.common_start(ids[0], ids[2]) < \
        hf_shared.common_start(ids[0], ids[3])
    distinct_prefixes = {tuple(row[:end]) for row in ids for end in range(1, len(row) + 1)}
    assert sum(widths) == len(distinct_prefixes) < sum(len(row) for row in ids)
    for row, answer in zip(ids, answers, strict=True):
        tokens = _raw_new_tokens(backend, row, 12)
        assert answer.text == backend.hf_tokenizer.decode(tokens, skip_special_tokens=True)
        assert (answer.prompt_tokens, answer.output_tokens) == (len(row), len(tokens))


@pytest.mark.parametrize("stop", [(), ("e",), (" t", "\n")])
def test_stop_strings_and_finished_rows_give_what_generate_gives(
        load: Callable[..., HFBackend], stop: tuple[str, ...]) -> None:
    """The same batch through ``hf_shared`` and through ``model.generate``: the same texts and
    token counts, with stop strings that end rows at different steps (rows leave the batch)."""
    backend = load("llama", chat_template="off")
    prompts = [SHARED + f" Item {n}: " + "word " * n for n in range(6)] + ["Alone here"]
    requests = [GenerateRequest(prompt, 16, stop) for prompt in prompts]
    backend.share_prefixes = True
    shared = [(a.text, a.output_tokens) for a in backend.generate(requests)]
    backend.share_prefixes = False
    assert shared == [(a.text, a.output_tokens) for a in backend.generate(requests)]
    assert (len({count for _, count in shared}) > 1) == bool(stop)  # rows ended apart

def test_sliding_window_models_keep_generate(load: Callable[..., HFBackend],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemma's sliding layers prefill in chunks (``PREFILL_CHUNK``), which hf_shared does not."""
    monkeypatch.setattr(hf, "SHARE_PREFIXES", True)
    assert load("llama").share_prefixes
    assert not load("gemma").share_prefixes
