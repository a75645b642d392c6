"""HELMET's many-shot ICL suite: loaders on tiny fixtures in each release format, HELMET's
prompt, balanced rounds, test selection, parsing and exact budgets, and one suite run."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.icl import balanced, parse_label, select_tests
from pytest_lceval.benchmarks.helmet.icl_data import (
    BANKING77,
    CLINC150,
    NLU,
    TREC_COARSE,
    TREC_FINE,
    Example,
    load,
)
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataError, DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.results.records import Case
from pytest_lceval.run.generation_suite import NeedsData
from pytest_lceval.tasks.base import BuildContext, CellDoesNotFit
from pytest_lceval.tasks.fitting import Frame, fit

FIXTURES = Path(__file__).resolve().parent / "data" / "helmet" / "icl"
TASKS = ["icl_trec_coarse", "icl_trec_fine", "icl_nlu", "icl_banking77", "icl_clinic150"]
needs_shared = pytest.mark.skipif(not (SHARED_DATA / "trec").is_dir(),
                                  reason=f"no shared data at {SHARED_DATA}")


def word_context(root: Path | None, seed: int = 0) -> BuildContext:
    tokenizer = WordTokenizer()
    return BuildContext(tokenizer, Renderer(None, lambda text: len(tokenizer.encode(text))),
                        DataSource(root), seed)


def build(task: str, length: int, context: BuildContext, samples: int = 1) -> list[Case]:
    return builtin_task(task).build(Cell("icl", task, length, None, samples), context)


def test_prompt_is_helmets_template() -> None:
    [case] = build("icl_trec_coarse", 100, word_context(FIXTURES))
    assert case.prompt == (
        'Use the provided mapping from the text to label to assign a label to the text. Only '
        'output "label: {label}" and nothing else. \n\n'
        "How far is it to Aspen ?\nlabel: 4\n\n"
        "Where is the sister city ?\nlabel: 1\n\n"
        "What city is the capital ?\nlabel: 1\n\n"
        "When was it built ?\nlabel: 4\n\n"
        "How far is it to Aspen ?\nlabel: 4\n\n"
        "Where is the sister city ?\nlabel: 1\n\n"
        "Which city hosts it ?\nlabel:")
    # the label map shuffles HELMET's six TREC classes, though the fixture has two; LOC is
    # the hub's class 4 (ABBR, ENTY, DESC, HUM, LOC, NUM), shown as 1
    assert case.gold == ("1",) and case.stop == () and case.max_new_tokens == 20
    assert case.depth is None and case.chat is None
    assert case.meta == {"source": "data:trec", "shots": 6, "whole_rounds": 3, "classes": 2,
                         "chance": 0.5, "label_name": "LOC", "context_tokens": 49,
                         "output_prefix": "label:"}  # eval.py scores "label:" + the output
    assert builtin_task("icl_trec_coarse").use_chat_template is False  # type: ignore[attr-defined]


def test_chat_template_starts_the_answer_empty() -> None:
    tokenizer = WordTokenizer()
    renderer = Renderer(lambda user: f"<u>{user}</u>", lambda text: len(tokenizer.encode(text)))
    context = BuildContext(tokenizer, renderer, DataSource(FIXTURES), 0)
    [case] = build("icl_trec_coarse", 100, context)
    assert case.prompt.endswith("Which city hosts it ?</u>")
    assert case.chat is not None and case.chat.answer_prefix == ""
    assert case.meta["output_prefix"] == ""
    assert builtin_task("icl_trec_coarse").score(" 1", case) == 1.0


def test_loaders_read_each_release_format() -> None:
    data = DataSource(FIXTURES)
    coarse, fine = load(data, TREC_COARSE, "t"), load(data, TREC_FINE, "t")
    # ids are places in the hub's ClassLabel, whichever classes the files hold
    assert coarse.classes == ("ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM")
    assert len(fine.classes) == 50 and fine.train_classes == 4
    assert coarse.train[3] == Example("Where is the sister city ?", 4)  # 0xF0 byte -> space
    assert fine.test[0] == Example("How long is the river ?", fine.classes.index("NUM:dist"))
    banking = load(data, BANKING77, "t")
    assert banking.train[1].text == "what is the rate, today?"
    assert banking.source == "data:banking77"
    clinc = load(data, CLINC150, "t")
    assert [clinc.classes[e.label] for e in clinc.train] == ["translate", "timer", "oos"]
    assert clinc.classes.index("oos") == 42  # oos kept, the hub's class 42
    assert [e.text for e in clinc.test] == ["timer for ten minutes", "sing a song"]
    assert len(clinc.train) == 3
    nlu = load(data, NLU, "t")
    assert len(nlu.classes) == 68 and nlu.train_classes == 2  # the hub's 68 intents
    assert nlu.train[0] == Example("wake me up at five am", 2) and len(nlu.test) == 1


def test_missing_folder_names_it() -> None:
    with pytest.raises(DataError, match=r"icl_nlu needs the folder nlu/ .*--lceval-data"):
        build("icl_nlu", 1000, word_context(None))
    with pytest.raises(DataError, match="clinc150/"):
        build("icl_clinic150", 1000, word_context(FIXTURES / "trec"))
    task = builtin_task("icl_nlu")
    assert isinstance(task, NeedsData)
    assert task.missing_data(DataSource(None)) == \
        "nlu/ (KFold_1/trainset/*.csv, KFold_1/testset/csv/*.csv) in --lceval-data"
    assert task.missing_data(DataSource(FIXTURES)) is None


def test_balanced_rounds_hold_one_example_per_class() -> None:
    pool = [Example(f"t{i}", i % 3) for i in range(30)] + [Example("rare", 3)]
    shots = balanced(pool, 10, seed=5)
    assert len(shots) == 10
    for start in (0, 4):
        assert sorted(e.label for e in shots[start:start + 4]) == [0, 1, 2, 3]
    assert shots[:9] == balanced(pool, 9, seed=5)  # 9 and 10 shots: the same 3 rounds, cut
    assert Counter(e.text for e in balanced(pool, 12, seed=5))["rare"] == 3  # it repeats
    assert balanced(pool, 10, seed=6) != shots


def test_test_inputs_are_balanced_and_fixed_per_seed() -> None:
    data = load(DataSource(FIXTURES), CLINC150, "t")
    assert select_tests(data, 5, seed=1) == data.test  # no more than asked: all, in order
    trec = load(DataSource(FIXTURES), TREC_COARSE, "t")
    one = select_tests(trec, 1, seed=1)
    assert len(one) == 1 and one == select_tests(trec, 1, seed=1)


@pytest.mark.parametrize(("output", "score"), [
    (" 1", 1.0), ("1", 1.0), (" label: 1", 1.0), ("1.", 1.0),
    # eval.py scores "label:" + the output: one repeated prefix is dropped, not two, and the
    # first line wins over a later label
    ("Label: 1", 1.0), ("Label: label: 1", 0.0),
    (" 1 \nlabel: 0", 1.0), (" 0 \nlabel: 1", 0.0), ("\nlabel: 1", 0.0),
    ("11", 0.0), ("", 0.0), (" the label is 1", 0.0), (" 0", 0.0),
])
def test_score_is_exact_match_of_the_parsed_label(output: str, score: float) -> None:
    [case] = build("icl_trec_coarse", 100, word_context(FIXTURES))
    assert builtin_task("icl_trec_coarse").score(output, case) == score


def test_parse_label_follows_helmet() -> None:
    assert parse_label("I think\nlabel: 42 \nmore") == "42"
    assert parse_label("  7\nlabel") == "7"


@needs_shared
@pytest.mark.parametrize("task", TASKS)
def test_exact_budget_and_paired_inputs_on_shared_data(task: str) -> None:
    context = word_context(SHARED_DATA, seed=3)
    short, long = build(task, 1000, context, 2), build(task, 4000, context, 2)
    for cases, length in ((short, 1000), (long, 4000)):
        assert all(c.total_tokens <= length for c in cases)
        assert all(c.total_tokens >= 0.95 * length for c in cases)
    assert [c.meta["label_name"] for c in short] == [c.meta["label_name"] for c in long]
    assert [c.prompt.rsplit("\n\n", 1)[1] for c in short] == \
        [c.prompt.rsplit("\n\n", 1)[1] for c in long]
    assert all(s.gold == lo.gold for s, lo in zip(short, long, strict=True))
    assert all(s.meta["shots"] < lo.meta["shots"] for s, lo in zip(short, long, strict=True))
    assert short == build(task, 1000, word_context(SHARED_DATA, seed=3), 2)


def test_a_length_too_small_for_one_demo_does_not_fit() -> None:
    with pytest.raises(CellDoesNotFit, match="generation budget 20"):
        build("icl_trec_coarse", 40, word_context(FIXTURES))


SUITE_FILE = (Path(__file__).resolve().parents[1] / "suites" / "test_icl.py").read_text()


@needs_shared
def test_suite_runs_every_task_and_records_source(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_icl=SUITE_FILE)
    # One argument: a bare path argument would make pytest root the run in the data folder.
    outcome = pytester.runpytest("--model", "mock:constant?text=1",
                                 f"--lceval-data={SHARED_DATA}", "--lengths", "1k",
                                 "--samples", "2", "--lceval-run", "f", "--lceval-threshold", "0",
                                 "-p", "no:randomly")
    outcome.assert_outcomes(passed=5)
    rows = [json.loads(line) for line in
            (pytester.path / "reports" / "f" / "results.jsonl").read_text().splitlines()]
    assert sorted(row["task"] for row in rows) == sorted(TASKS)
    for row in rows:
        assert row["n"] == 2 and row["source"] == f"data:{_folder(row['task'])}"
        assert 0 < row["metrics"]["chance"] <= 0.5 and row["metrics"]["chat_template"] == "off"


def _folder(task: str) -> str:
    name = task.removeprefix("icl_")
    return {"trec_coarse": "trec", "trec_fine": "trec", "clinic150": "clinc150"}.get(name, name)


def test_a_builder_with_nothing_more_to_add_under_its_budget_is_accepted() -> None:
    """HELMET's next ICL round draws other demonstrations, so the shots that fit can stop short
    of the 99 % window by more than one demonstration; the builder's exact, saturated answer is
    the fit (it used to fail the cell)."""
    tokenizer = WordTokenizer()
    renderer = Renderer(None, lambda text: len(tokenizer.encode(text)))

    @dataclasses.dataclass(frozen=True)
    class Words:
        text: str
        tokens: int

    def build(budget: int) -> Words:  # whole blocks of 50 words, exactly predicted
        blocks = min(budget // 50, 17)
        return Words(" w" * (50 * blocks), 50 * blocks)

    fitted = fit(Frame("Count:", "\nQ?", " A:"), build, renderer, 1024, 20, 50, "words")
    assert fitted.context.tokens == 850 and fitted.prompt_tokens + 20 < 1014
