"""HELMET's shared pipeline as the project applies it to every category
(benchmarks/helmet/pipeline.py): the answer prefix only in a raw prompt, the newline stop only
under ``--lceval-stop-newline=config``, HELMET's seeds, and its cut of an overflowing context. The
same rules against HELMET's own code: tests/conformance/test_helmet_*.py."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_lceval.benchmarks.helmet.pipeline import (
    first_distinct,
    key_seed,
    sample_keys,
    shuffled,
    truncate_context,
)
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.results.records import Case, Prompt
from pytest_lceval.tasks.base import BuildContext
from pytest_lceval.tasks.stops import with_stops

FIXTURES = Path(__file__).resolve().parent / "data" / "helmet"
WORDS = WordTokenizer()
RAW = Renderer(None, lambda text: len(WORDS.encode(text)))
TEMPLATED = Renderer(lambda user: f"<u>{user}</u><a>", RAW.count)


def test_a_raw_prompt_ends_with_the_cue_and_a_templated_one_opens_the_turn_empty() -> None:
    prompt = Prompt("Question: who?", cue="\nAnswer:")
    assert RAW.render(prompt) == "Question: who?\nAnswer:"
    assert TEMPLATED.render(prompt) == "<u>Question: who?</u><a>"
    # a prefill (a judge's JSON opening) is continued in either rendering
    begun = Prompt("Rate it.", answer_prefix='{"score": ')
    assert TEMPLATED.render(begun) == '<u>Rate it.</u><a>{"score": '


def test_answers_stop_at_a_newline_only_where_the_config_asks_and_the_run_chooses_it() -> None:
    case = Case(index=0, prompt="p", gold=("g",), prompt_tokens=1)
    rag, niah = builtin_task("kilt_nq"), builtin_task("niah_single_1")
    assert with_stops([case], rag, "released") == [case]
    assert with_stops([case], rag, "config")[0].stop == ("\n",)
    assert with_stops([case], niah, "config") == [case]  # recall's configs say false
    with pytest.raises(ValueError, match="released"):
        with_stops([case], rag, "always")


def test_seeds_are_helmets() -> None:
    """``random.seed`` then ``random.sample`` of the sorted keys; a key's SHA-256 modulo 2^31;
    ``datasets``' shuffle is numpy's default generator's permutation."""
    random.seed(42)
    assert sample_keys(["b", "a", "c", "a", "d"], 2, 42) == set(random.sample(["a", "b", "c", "d"],
                                                                               2))
    assert key_seed("q1") == 795493323  # int(sha256(b"q1").hexdigest(), 16) % 2**31
    assert shuffled(6, 3) == [2, 5, 4, 1, 3, 0]  # numpy.random.default_rng(3).permutation(6)
    assert first_distinct(["x", "y", "x", "z"], [2, 0, 1, 3], 2) == [2, 1]


def test_an_overflowing_context_loses_its_end_as_helmet_cuts_it() -> None:
    """Without a fast tokenizer's offsets, HELMET decodes the tokens it keeps."""
    context = " ".join(f"w{i}" for i in range(50))

    def prompt(text: str) -> str:
        return f"Read: {text}\nQuestion: q"

    cut = truncate_context(prompt, context, RAW.count, WORDS, 30)
    assert RAW.count(prompt(cut)) == 30 and context.startswith(cut)
    assert truncate_context(prompt, context, RAW.count, WORDS, 60) == context


def kilt_folder(tmp_path: Path, passages: int) -> Path:
    """HELMET's KILT layout with the fixture's rows, their passages made long, under the name of
    HELMET's 4k file."""
    folder = tmp_path / "kilt"
    folder.mkdir()
    rows = [json.loads(line) for line in
            (FIXTURES / "kilt" / "nq-dev-multikilt_1000_k8_dep6.jsonl").read_text().splitlines()]
    for row in rows:
        for ctx in row["ctxs"]:
            ctx["text"] = f"{ctx['text']} " + " ".join(["filler"] * passages)
    (folder / "nq-dev-multikilt_1000_k20_dep6.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows))
    demos = FIXTURES / "kilt" / "nq-train-multikilt_1000_k3_dep6.jsonl"
    (folder / demos.name).write_text(demos.read_text())
    return tmp_path


@pytest.mark.parametrize(("words", "truncated"), [(10, False), (800, True)])
def test_a_cell_at_helmets_length_asks_the_row_of_helmets_file_for_it(
        tmp_path: Path, words: int, truncated: bool) -> None:
    context = BuildContext(WORDS, RAW, DataSource(kilt_folder(tmp_path, words)), 42)
    cases = builtin_task("kilt_nq").build(Cell("rag", "kilt_nq", 4096, 40.0, 2), context)
    for case in cases:
        assert case.meta["file"] == "nq-dev-multikilt_1000_k20_dep6.jsonl"
        assert case.meta["row"] == 2 and case.depth == pytest.approx(100 * 3 / 7, abs=1e-3)
        assert case.meta["truncated"] is truncated
        assert case.total_tokens <= 4096 and (case.total_tokens == 4096) is truncated
        assert case.prompt.endswith(f"\n\nQuestion: {case.meta['question']}\nAnswer:")
