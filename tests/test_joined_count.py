"""A prompt counted from its parts' counts is the tokenizer's own count of it, or no answer.

Checked against tokenising the whole prompt, on SmolLM2's byte-level BPE (GPT-2's split) and on
a BPE trained here with Llama-3's split, whose punctuation takes the line breaks after it (the
seams the counter must measure). Recall cases built with the joined count are the cases built
by tokenising every prompt whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_lceval.benchmarks.ruler.filler_text import Piece
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models import joined_count
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.hf_text import LONG_PROMPT, HFText
from pytest_lceval.models.joined_count import LINE_BREAK_PATTERNS, cut_rule, rule_of
from pytest_lceval.tasks.base import BuildContext, CellDoesNotFit

ESSAYS = Path(__file__).resolve().parents[1] / "pytest_lceval" / "fixtures" / "essays"


def trained(split_pattern: str) -> HFText:
    """A small byte-level BPE with ``split_pattern`` as its pre-tokenizer, trained on the
    offline essays (a real tokenizer of that kind, built without a download)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split_pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=["<s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([path.read_text() for path in sorted(ESSAYS.glob("*.txt"))],
                                  trainer)
    return HFText(PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>"), "off")


@pytest.fixture(scope="module")
def llama3_split() -> HFText:
    return trained(LINE_BREAK_PATTERNS[0])


@pytest.fixture(scope="module")
def metaspace_bpe() -> HFText:
    return metaspace_trained()


def metaspace_trained() -> HFText:
    """Gemma 3's kind: spaces become "\u2581" and BPE merges across the whole text; trained
    here, it learns tokens that span spaces ("e\u2581t"), which a cut must avoid."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Replace(" ", "\u2581")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=["<s>", "<unk>"],
                                  initial_alphabet=list("\u2581\n"))
    lines = [line for path in sorted(ESSAYS.glob("*.txt"))
             for line in path.read_text().splitlines() if line]
    tokenizer.train_from_iterator(lines, trainer)
    return HFText(PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>"), "off")



def tokenizer_json(text: HFText) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(text.hf.backend_tokenizer.to_str())
    return loaded


def test_rules_of_known_splits(smollm2: HFText, llama3_split: HFText,
                               metaspace_bpe: HFText) -> None:
    gpt2 = cut_rule(tokenizer_json(smollm2))
    llama3 = cut_rule(tokenizer_json(llama3_split))
    metaspace = cut_rule(tokenizer_json(metaspace_bpe))
    assert metaspace is not None and metaspace.merging
    assert all(not metaspace.safe(before, after) for before, after in metaspace.merging)
    assert rule_of(metaspace_bpe.hf.backend_tokenizer) == metaspace
    assert gpt2 is not None and gpt2.line_break_after_punctuation
    assert llama3 is not None and not llama3.line_break_after_punctuation
    assert gpt2.safe(".", "\n") and not llama3.safe(".", "\n") and llama3.safe("a", "\n")
    assert llama3.safe(".", " ") and not llama3.safe(" ", " ") and not llama3.safe("a", "b")


@pytest.mark.parametrize("change", ["normalizer", "pattern", "added", "stripping",
                                    "sentencepiece", "prepend"])
def test_unknown_tokenizers_are_counted_whole(smollm2: HFText, change: str) -> None:
    """Anything the argument for exactness does not cover gets no rule (the prompt is then
    tokenised whole)."""
    data = tokenizer_json(smollm2)
    if change == "normalizer":
        data["normalizer"] = {"type": "Lowercase"}
    elif change == "pattern":
        data["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": r"\s+|\S+"},
                                 "behavior": "Isolated", "invert": False}
    elif change == "added":
        data["added_tokens"].append({"content": "<sep>\n", "single_word": False, "lstrip": False,
                                     "rstrip": False, "normalized": False, "special": False})
    elif change == "stripping":  # takes the spaces before it, across any cut
        data["added_tokens"].append({"content": "<mask>", "single_word": False, "lstrip": True,
                                     "rstrip": False, "normalized": False, "special": True})
    elif change == "sentencepiece":
        data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                                 "prepend_scheme": "first", "split": False}
    else:  # Llama-2's: a "\u2581" before the whole text, which a part would get again
        data["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        data["pre_tokenizer"] = None
    assert cut_rule(data) is None


@pytest.mark.parametrize("model", [{"unk_token": None}, {"byte_fallback": True}])
def test_a_metaspace_bpe_that_drops_characters_gets_no_rule(metaspace_bpe: HFText,
                                                          model: dict[str, Any]) -> None:
    """A character with no token of its own (no unknown token, or byte fallback without the
    byte tokens) vanishes, and its neighbours may then merge across a cut."""
    data = tokenizer_json(metaspace_bpe)
    assert cut_rule(data) is not None
    data["model"].update(model)
    assert cut_rule(data) is None


PART_TEXT = st.lists(st.sampled_from([*"ab Z9.,!\"'\n\t é—\u2581", "\n\n", " .", " word", "ing",
                                      "e t", "12345", "  "]), min_size=1, max_size=8).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.text(alphabet="ab .\n<s>", max_size=10), texts=st.lists(PART_TEXT, max_size=8),
       after=st.text(alphabet="ab .\n?", max_size=10), trim=st.tuples(
           st.integers(0, 3), st.integers(0, 3)),
       which=st.sampled_from(["gpt2", "llama3", "metaspace"]))
def test_joined_count_is_the_whole_count_or_nothing(
        smollm2: HFText, llama3_split: HFText, metaspace_bpe: HFText, before: str,
        texts: list[str], after: str, trim: tuple[int, int], which: str) -> None:
    text = {"gpt2": smollm2, "llama3": llama3_split, "metaspace": metaspace_bpe}[which]
    assert text.joined is not None
    parts = [Piece(part, len(text.encode(part))) for part in texts]
    joined = "".join(texts)
    context = joined[trim[0]:len(joined) - trim[1]]
    if len(context) != len(joined) - sum(trim):
        return
    rendered = before + context + after
    counted = text.joined.count(rendered, context, parts, trim)
    if counted is not None:
        assert counted == text.count(rendered)


def test_a_context_without_its_parts_is_counted_whole(smollm2: HFText) -> None:
    assert smollm2.joined is not None
    assert smollm2.joined.count("x a b c y", "a b c", [], (0, 0)) is None
    assert smollm2.joined.count("x a b c y", "a b c", [Piece("a b", 2)], (0, 0)) is None


@pytest.mark.parametrize("task", ["niah_single_1", "niah_single_2", "niah_multikey_2", "json_kv",
                                  "vt", "cwe", "fwe"])
def test_cases_are_those_counted_whole(smollm2: HFText, llama3_split: HFText,
                                       metaspace_bpe: HFText, task: str) -> None:
    """The joined count builds exactly the cases that whole-prompt counting builds, and its
    counts are the tokenizer's, for both splits (noise lines and needles meet at a line break
    after a full stop: a seam for Llama-3's split)."""
    for text in (smollm2, llama3_split, metaspace_bpe):
        whole = Renderer(text.renderer.template, text.count)
        joined, measured = text.renderer, []
        assert joined.count_joined is not None
        for length, depth in ((2048, 0.0), (4096, 50.0), (8192, 100.0)):
            cell = Cell("recall", task, length, depth if builtin_task(task).uses_depth else None, 2)
            fast, slow = (built(task, cell, BuildContext(text, renderer, DataSource(None), 5))
                          for renderer in (joined, whole))
            assert fast == slow  # the same prompts and counts, or the same refusal
            if isinstance(fast, list):
                measured += [text.count(prompt) == tokens for prompt, tokens in fast]
        assert measured and all(measured)


def built(task: str, cell: Cell, context: BuildContext) -> list[tuple[str, int]] | str:
    """The (prompt, count) of a cell's cases, or why it does not fit (the 800-token vocabulary
    spells cwe's words in many tokens)."""
    try:
        cases = builtin_task(task).build(cell, context)
        return [(case.prompt, case.prompt_tokens) for case in cases]
    except CellDoesNotFit as refusal:
        return str(refusal)


PARAGRAPHS = st.lists(PART_TEXT, min_size=1, max_size=8).map("\n\n".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(PARAGRAPHS, min_size=1, max_size=4).map("\n\n".join),
       which=st.sampled_from(["gpt2", "llama3", "metaspace"]))
def test_a_prompt_counted_by_paragraphs_is_counted_exactly(
        smollm2: HFText, llama3_split: HFText, metaspace_bpe: HFText, texts: str,
        which: str) -> None:
    text = {"gpt2": smollm2, "llama3": llama3_split, "metaspace": metaspace_bpe}[which]
    assert text.joined is not None
    counted = text.joined.count_paragraphs(texts)
    if counted is not None:
        assert counted == len(text.prompt_ids(texts))


def test_a_long_prompt_counts_only_its_new_paragraphs(smollm2: HFText,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Fitting drops a passage and counts again: the second count tokenises nothing it has
    seen, and both are the tokenizer's own counts."""
    passages = [f"Document [{i}](Title: T{i}): " + "Some words of a passage. " * 40
                for i in range(60)]
    first, second = "\n\n".join(passages), "\n\n".join(passages[:30] + passages[31:])
    assert len(first) >= LONG_PROMPT
    assert smollm2.joined is not None
    seen: list[str] = []
    counting = smollm2.joined.count_many
    assert counting is not None

    def count_many(texts: list[str]) -> list[int]:
        seen.extend(texts)
        return counting(texts)

    monkeypatch.setattr(smollm2.joined, "count_many", count_many)
    assert smollm2.count(first) == len(smollm2.prompt_ids(first))
    assert len(seen) >= 60
    seen.clear()
    assert smollm2.joined.count_paragraphs(second) == len(smollm2.prompt_ids(second))
    assert seen == []


def test_kept_paragraphs_stay_within_their_character_budget(
        smollm2: HFText, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(joined_count, "PARAGRAPH_CHARS_KEPT", 20_000)
    joined = smollm2.joined
    assert joined is not None
    for round_ in range(10):  # 10 x 20 paragraphs of ~170 characters: some are let go
        text = "\n\n".join(f"Paragraph {round_}.{i}: " + "word " * 30 for i in range(20))
        assert joined.count_paragraphs(text) == len(smollm2.prompt_ids(text))
        assert joined._kept_chars == sum(map(len, joined._paragraphs)) <= 20_000
    assert joined._kept_chars > 15_000
    long_one = "x" * 50 + "\n\n" + "y " * 150
    assert joined.count_paragraphs(long_one) == len(smollm2.prompt_ids(long_one))
    assert "\n\n" + "y " * 150 not in joined._paragraphs  # over a hundredth of the budget
