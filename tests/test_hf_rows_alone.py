"""Generate batches answered one row at a time on a CPU (``HFBackend.rows_alone``, on with
``ROWS_ON_CPU``, off by default until it is shown faster): unpadded,
with prompt-lookup decoding, the same answers as the padded batch's ``model.generate`` (tiny
random models with the real SmolLM2 tokenizer, as in test_hf_backend)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_hf_backend import PREFIX, _one_thread, _raw_new_tokens, load, tiny_dirs  # noqa: E402

from pytest_lceval.models import hf  # noqa: E402
from pytest_lceval.models.hf import HFBackend  # noqa: E402
from pytest_lceval.results.records import GenerateRequest  # noqa: E402

__all__ = ["_one_thread", "load", "tiny_dirs"]  # fixtures from test_hf_backend


@pytest.fixture(autouse=True)
def _rows_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf, "ROWS_ON_CPU", True)


@pytest.mark.parametrize("stop", [(), ("e",), (" t", "\n")])
def test_rows_alone_give_what_the_padded_batch_gives(load: Callable[..., HFBackend],
                                                     stop: tuple[str, ...]) -> None:
    """Prompts of different lengths (the padded batch pads all but one), stop strings that end
    rows at different steps: the same texts either way, and the same token counts where no
    stop string ends a row (the padded batch counts the first padding after a row that a stop
    string ended as one token generated; a row alone has none)."""
    backend = load("llama", chat_template="off")
    assert backend.rows_alone
    prompts = [PREFIX + f" Item {n}: " + "word " * n for n in range(5)] + ["Alone here"]
    requests = [GenerateRequest(prompt, 16, stop) for prompt in prompts]
    alone = backend.generate(requests)
    backend.rows_alone = False
    padded = backend.generate(requests)
    assert [(a.text, a.prompt_tokens) for a in alone] == [(a.text, a.prompt_tokens)
                                                          for a in padded]
    counts = [a.output_tokens for a in alone]
    assert (len(set(counts)) > 1) == bool(stop)  # rows ended apart
    assert bool(stop) or counts == [a.output_tokens for a in padded]


def test_a_row_alone_is_its_unpadded_greedy_answer(load: Callable[..., HFBackend]) -> None:
    backend = load("llama", chat_template="off")
    ids = backend.prompt_ids(PREFIX)
    tokens = _raw_new_tokens(backend, ids, 24)
    [answer] = backend.generate([GenerateRequest(PREFIX, 24)])
    assert answer.text == backend.hf_tokenizer.decode(tokens, skip_special_tokens=True)
    assert answer.output_tokens == len(tokens)


def test_each_row_decodes_with_prompt_lookup(load: Callable[..., HFBackend],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row alone goes to ``generate`` unpadded with prompt lookup on (how many passes it
    saves depends on the answers copying: ``bench/bench_main_job.py`` measures it on the main
    job); the padded batch decodes one token a pass."""
    backend = load("llama", chat_template="off")
    seen: list[tuple[int, int | None]] = []
    generate = backend.model.generate

    def spy(**kwargs: object) -> object:
        config = kwargs["generation_config"]
        seen.append((kwargs["input_ids"].shape[0], config.prompt_lookup_num_tokens))
        return generate(**kwargs)

    monkeypatch.setattr(backend.model, "generate", spy)
    requests = [GenerateRequest(PREFIX, 8), GenerateRequest(PREFIX + " And then?", 8)]
    backend.generate(requests)
    assert seen == [(1, hf.PROMPT_LOOKUP_TOKENS)] * 2
    backend.rows_alone = False
    backend.generate(requests)
    assert seen[2:] == [(2, None)]


def test_sliding_window_models_and_gpus_keep_the_padded_batch(
        load: Callable[..., HFBackend], monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemma's sliding layers prefill in chunks (``PREFILL_CHUNK``), which a row alone with
    prompt lookup does not; off (the default), ``ROWS_ON_CPU`` leaves every model on the
    padded batch."""
    assert load("llama").rows_alone
    assert not load("gemma").rows_alone
    monkeypatch.setattr(hf, "ROWS_ON_CPU", False)
    assert not load("llama").rows_alone
