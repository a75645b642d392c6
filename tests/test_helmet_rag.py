"""HELMET's RAG suite: the prompt pinned to HELMET's ``load_qa`` template for a fixed seed, the
KILT loader on self-made files in HELMET's format (tests/data/helmet/kilt), SubEM with HELMET's
parsed answer, the NQ-oracle substitute's screening and pairing, and one suite run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.passages import Doc
from pytest_lceval.benchmarks.helmet.rag import kilt_questions, parse_answer, sub_em
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataError, DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.run.generation_suite import NeedsData
from pytest_lceval.tasks.base import BuildContext
from pytest_lceval.tasks.metrics import normalize_answer

FIXTURES = Path(__file__).resolve().parent / "data" / "helmet"
KILT_NQ = FIXTURES / "kilt" / "nq-dev-multikilt_1000_k8_dep6.jsonl"
needs_shared = pytest.mark.skipif(not (SHARED_DATA / "nq_oracle").is_dir(),
                                  reason="shared data (nq_oracle) absent")

PINNED = (
    "Use the given documents to write a concise and short answer to the question. Write your "
    "answer in the following format:\nAnswer: [answer]\n\n"
    "Document (Title: Sky): The sky is blue.\n\n"
    "Document (Title: D1 0): Filler passage number 0 about d1 and nothing else.\n\n"
    "Document (Title: D1 1): Filler passage number 1 about d1 and nothing else.\n\n"
    "Question: what colour is the sky\nAnswer: blue\n\n"
    "Document (Title: D3 0): Filler passage number 0 about d3 and nothing else.\n\n"
    "Document (Title: D3 1): Filler passage number 1 about d3 and nothing else.\n\n"
    "Document (Title: Ice): Frozen water is ice.\n\n"
    "Question: what is frozen water\nAnswer: ice\n\n"
    "Document (Title: Q1 0): Filler passage number 0 about q1 and nothing else.\n\n"
    "Document (Title: Q1 1): Filler passage number 1 about q1 and nothing else.\n\n"
    "Document (Title: Blue Door): The blue door was painted by Ada Lovelace in 1843.\n\n"
    "Document (Title: Q1 2): Filler passage number 2 about q1 and nothing else.\n\n"
    "Document (Title: Q1 3): Filler passage number 3 about q1 and nothing else.\n\n"
    "Question: who painted the blue door\nAnswer:")


def word_context(data: Path | None, seed: int = 42) -> BuildContext:
    tokenizer = WordTokenizer()
    return BuildContext(tokenizer, Renderer(None, lambda text: len(tokenizer.encode(text))),
                        DataSource(data), seed)


def test_prompt_is_helmets_template_with_two_demos_and_the_gold_at_the_depth() -> None:
    case = builtin_task("kilt_nq").build(Cell("rag", "kilt_nq", 200, 50.0, 1),
                                     word_context(FIXTURES))[0]
    assert case.prompt == PINNED
    assert case.total_tokens <= 200 and case.prompt_tokens == len(WordTokenizer().encode(PINNED))
    assert case.depth == 50.0 and case.meta["passages"] == 5
    assert case.meta["source"] == "data:kilt" and case.stop == ()
    assert case.gold == ("Ada Lovelace", "Lovelace") and case.max_new_tokens == 20
    assert case.meta["output_prefix"] == "Answer:"  # eval.py scores "Answer:" + the output


def test_kilt_loader_tells_the_gold_from_how_it_moves_between_a_questions_rows() -> None:
    first, second = kilt_questions(KILT_NQ, two_golds=False)
    assert first.golds == (Doc("Blue Door", "The blue door was painted by Ada Lovelace in 1843."),)
    assert [doc.title for doc in first.distractors] == [f"Q1 {i}" for i in range(7)]
    assert second.answers == ("Oslo",) and len(second.permutations) == 6
    hotpot = kilt_questions(FIXTURES / "kilt" / "hotpotqa-dev-multikilt_1000_k10_dep3.jsonl",
                            two_golds=True)[0]
    assert [doc.title for doc in hotpot.golds] == ["River Pen", "Quill"]
    assert hotpot.permutations == ((0.0, 1.0), (4 / 9, 5 / 9), (1.0, 0.0))


def test_hotpotqa_places_its_two_golds_as_the_files_permutation() -> None:
    task = builtin_task("kilt_hotpotqa")
    assert not task.uses_depth
    case = task.build(Cell("rag", "kilt_hotpotqa", 400, None, 1), word_context(FIXTURES))[0]
    assert case.depth is None and case.meta["gold_depths"] == [0.0, 100.0]


@pytest.mark.parametrize("depth, expected", [(0.0, 0.0), (100.0, 100.0), (40.0, 42.857)])
def test_depth_is_the_gold_passages_position_among_the_k(depth: float, expected: float) -> None:
    case = builtin_task("kilt_nq").build(Cell("rag", "kilt_nq", 1000, depth, 2),
                                     word_context(FIXTURES))[1]
    assert case.meta["passages"] == 8 and case.depth == expected  # index 3 of 0..7 at 40 %


def test_a_missing_kilt_file_is_named_in_one_line(tmp_path: Path) -> None:
    trivia, nq = builtin_task("kilt_triviaqa"), builtin_task("kilt_nq")
    assert isinstance(trivia, NeedsData) and isinstance(nq, NeedsData)
    assert trivia.missing_data(DataSource(tmp_path)) == (
        "HELMET's file kilt/triviaqa-dev-multikilt_1000_k*_dep6.jsonl (princeton-nlp/HELMET "
        "data.tar.gz, data/kilt/) in --lceval-data")
    assert nq.missing_data(DataSource(FIXTURES)) is None
    with pytest.raises(DataError, match=r"kilt_triviaqa needs HELMET's file "
                                        r"kilt/triviaqa-dev-multikilt_1000_k\*_dep6.jsonl"):
        builtin_task("kilt_triviaqa").build(Cell("rag", "kilt_triviaqa", 1000, 50.0, 1),
                                        word_context(tmp_path))
    with pytest.raises(DataError, match="nq needs nq_oracle/nq-open-oracle.jsonl.gz"):
        builtin_task("nq").build(Cell("rag", "nq", 1000, 50.0, 1), word_context(None))


def test_a_file_whose_passages_do_not_move_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "kilt"
    folder.mkdir()
    row = json.loads(KILT_NQ.read_text().splitlines()[0])
    (folder / "nq-dev-multikilt_1000_k8_dep6.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError, match="0 passages move"):
        kilt_questions(folder / "nq-dev-multikilt_1000_k8_dep6.jsonl", two_golds=False)


@pytest.mark.parametrize("output, score", [
    (" Ada Lovelace", 1.0), ("answer: the LOVELACE.", 1.0), ("Charles Babbage", 0.0),
    ("", 0.0), ("I think it was Lovelace", 1.0)])
def test_sub_em(output: str, score: float) -> None:
    assert sub_em(output, ["Ada Lovelace", "Lovelace"]) == score


def test_parse_answer_is_helmets() -> None:
    assert parse_answer("blah\nAnswer: Paris\nmore") == "Paris"
    assert parse_answer(" Paris \nLondon") == "Paris"
    assert parse_answer("Answer: Answer: Rome") == "Rome"


@needs_shared
def test_substitute_screens_distractors_and_pairs_lengths() -> None:
    task = builtin_task("nq")
    context = word_context(SHARED_DATA, seed=7)
    short = task.build(Cell("rag", "nq", 2048, 0.0, 2), context)
    long = task.build(Cell("rag", "nq", 4096, 100.0, 2), context)
    assert [c.meta["question"] for c in short] == [c.meta["question"] for c in long]
    assert [c.meta["demos"] for c in short] == [c.meta["demos"] for c in long]
    for cases, length in ((short, 2048), (long, 4096)):
        assert all(case.meta["source"] == "substitute:nq_oracle" for case in cases)
        assert all(case.meta["question"] not in case.meta["demos"] for case in cases)
        assert all(length - 200 < case.total_tokens <= length for case in cases)
    assert [c.depth for c in short] == [0.0, 0.0] and [c.depth for c in long] == [100.0, 100.0]
    question = task.material(context.data, 7, 1).questions[0]
    answers = [normalize_answer(answer) for answer in question.answers]
    assert not any(answer in normalize_answer(f"{doc.title} {doc.text}")
                   for doc in question.distractors for answer in answers)
    assert any(answer in normalize_answer(question.golds[0].text) for answer in answers)


SUITE_FILE = "import pytest\npytestmark = pytest.mark.lceval(suite='rag')\n\n" \
             "def test_rag(lc_cell, lc_eval):\n    lc_eval.check(lc_eval.run(lc_cell))\n"


@needs_shared
def test_the_suite_runs_nq_and_kilt_tasks_without_their_file_have_no_cells(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_rag=SUITE_FILE)
    outcome = pytester.runpytest("--model", "mock:grep", f"--lceval-data={SHARED_DATA}",
                                 "--lengths", "1k", "--depths", "0,100", "--samples", "2",
                                 "--lceval-run", "f", "--lceval-threshold", "0",
                                 "--lceval-stop-newline", "config", "-p", "no:randomly")
    outcome.assert_outcomes(passed=2)
    outcome.stdout.fnmatch_lines(["lceval: rag: no cells for kilt_nq, kilt_triviaqa, kilt_popqa, "
                                  "kilt_hotpotqa: their data is not in --lceval-data (-v says "
                                  "what each needs)"])
    lines = [json.loads(line) for line in
             (pytester.path / "reports" / "f" / "results.jsonl").read_text().splitlines()]
    nq = [line for line in lines if line["task"] == "nq"]
    assert len(nq) == 2 and {line["source"] for line in nq} == {"substitute:nq_oracle"}
    assert all(line["n"] == 2 for line in nq)
    assert {line["metrics"]["stop_newline"] for line in nq} == {"config"}
    assert sorted(line["depths_achieved"][0] for line in nq) == [0.0, 100.0]
    assert not [line for line in lines if line["task"].startswith("kilt_")]
