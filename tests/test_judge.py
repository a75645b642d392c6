"""The judge: reading replies, the rubrics' arithmetic, kappa against hand-computed values, one
retry per unreadable reply, and through pytester a judged suite whose rerun asks the judge
nothing, whose judge is recorded in results and baselines, and whose bad options fail at
start-up in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_outputs import read_results
from test_report import html_tests
from toy_suite import JUDGED_SUITE, JUDGED_TASK

from pytest_lceval.benchmarks.helmet import rubrics as helmet
from pytest_lceval.benchmarks.longbench100 import rubrics as longbench100
from pytest_lceval.judge.agreement import kappa, rank_correlation
from pytest_lceval.judge.panel import Judge, JudgePanel, JudgeSpec, judge_outputs
from pytest_lceval.judge.replies import Unparsed, parse_scores
from pytest_lceval.judge.rubrics import RUBRICS, declare
from pytest_lceval.models.registry import LoadOptions, ModelSpec, load_backend
from pytest_lceval.results.records import Case
from pytest_lceval.store.database import Store
from pytest_lceval.tasks.judged import Field

FAST = ["-p", "no:randomly", "-p", "no:cacheprovider"]
QA = (Field("fluency", 0, 1), Field("correctness", 0, 3))


# -- replies -------------------------------------------------------------------------------


@pytest.mark.parametrize("reply, scores", [
    ('Reasoning... {"fluency": 1, "correctness": 2}', {"fluency": 1, "correctness": 2}),
    ('{"fluency": 0, "correctness": 0} then {"fluency": 1, "correctness": 3}',
     {"fluency": 1, "correctness": 3}),
    ('```json\n{"fluency": "1", "correctness": 2.0}\n```', {"fluency": 1, "correctness": 2}),
    ('{"fluency": 1, "correctness": 3} but a later {"note": "x"}',
     {"fluency": 1, "correctness": 3}),
])
def test_the_last_object_with_every_field_is_read(reply: str, scores: dict[str, int]) -> None:
    assert parse_scores(reply, QA) == scores


@pytest.mark.parametrize("reply, problem", [
    ("I cannot grade this.", "no JSON object"),
    ('{"fluency": 1}', 'no field "correctness"'),
    ('{"fluency": 1, "correctness": 5}', "outside 0..3"),
    ('{"fluency": 1, "correctness": 1.5}', "not a whole number"),
    ('{"fluency": true, "correctness": 1}', "not a whole number"),
])
def test_an_unusable_reply_says_why(reply: str, problem: str) -> None:
    with pytest.raises(Unparsed, match=problem):
        parse_scores(reply, QA)


def test_supported_sentences_cannot_exceed_the_sentences() -> None:
    fields = (Field("precision", 0, None, at_most="sentence_count"), Field("sentence_count"))
    with pytest.raises(Unparsed, match="exceeds"):
        parse_scores('{"precision": 4, "sentence_count": 3}', fields)


# -- rubrics --------------------------------------------------------------------------------


def case(gold: tuple[str, ...], **meta: object) -> Case:
    return Case(0, "prompt", gold, 10, None, 10, (), None, meta=dict(meta))


def test_helmet_reads_the_answer_after_its_prefix() -> None:
    assert helmet.helmet_answer("Let me think.\nAnswer: answer: Skye") == "Skye"
    assert helmet.helmet_answer("Skye\nis the place") == "Skye is the place"


def test_the_rubrics_arithmetic() -> None:
    qa = helmet.QA
    assert qa.score([{"fluency": 1, "correctness": 2}], case(("x",)), []) == pytest.approx(2 / 3)
    assert qa.score([{"fluency": 0, "correctness": 3}], case(("x",)), []) == 0
    summary = helmet.SUMMARY_LEGAL
    # recall 2 of 4 key points = 0.5, precision 3 of 4 sentences = 0.75: F1 0.6
    ratings = [{"fluency": 1}, {"recall": 2}, {"precision": 3, "sentence_count": 4}]
    assert summary.score(ratings, case(("ref",)), ["a", "b", "c", "d"]) == pytest.approx(0.6)
    assert summary.score([{"fluency": 0}, *ratings[1:]], case(("ref",)), ["a"] * 4) == 0
    longbench = longbench100.QA
    assert longbench.score([{"fluency": 2, "correctness": 1}, {"fluency": 1, "correctness": 3}],
                           case(("a", "b")), []) == pytest.approx(3 / 6)
    assert longbench.missing == 0.0 and qa.missing is None
    summ = longbench100.SUMMARY
    assert summ.score([{"fluency": 1}, {"precision": 1, "sentence_count": 4},
                       {"precision": 3, "sentence_count": 4}], case(("r1", "r2")),
                      []) == pytest.approx(0.75)


def test_each_family_declares_its_rubrics_by_the_name_its_results_record() -> None:
    assert {name: RUBRICS[name].metric.name for name in (
        "helmet_qa", "helmet_summary_legal", "helmet_summary_book", "helmet_summary_document",
        "longbench_qa", "longbench_summary")} == {
        "helmet_qa": "judge:helmet_qa", "helmet_summary_legal": "judge:helmet_summary_legal",
        "helmet_summary_book": "judge:helmet_summary_book",
        "helmet_summary_document": "judge:helmet_summary_document",
        "longbench_qa": "judge:longbench_qa", "longbench_summary": "judge:longbench_summary"}
    assert RUBRICS["helmet_qa"] is helmet.QA
    declare(helmet.HelmetQA())  # the same rubric again (its module imported anew) replaces it
    assert RUBRICS["helmet_qa"] is not helmet.QA
    declare(helmet.QA)
    with pytest.raises(ValueError, match="'helmet_qa' is declared twice: HelmetQA and Clash"):
        declare(type("Clash", (longbench100.LongBenchQA,), {"name": "helmet_qa"})())
    assert RUBRICS["helmet_qa"] is helmet.QA


def test_longbench_asks_once_per_correct_answer_about_the_first_line() -> None:
    asks = longbench100.QA.asks("Paris\nand more text", case(("Paris", "paris, France"),
                                                                     question="Where?"), [])
    assert len(asks) == 2
    assert all(ask.prompt.endswith("Answer: Paris\n") for ask in asks)
    assert "Correct answers: paris, France" in asks[1].prompt


# -- agreement ------------------------------------------------------------------------------


def test_kappa_matches_hand_computed_values() -> None:
    # Binary: observed agreement 4/6; marginals (3/6, 3/6) and (3/6, 3/6) -> chance 1/2;
    # kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    assert kappa([1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 1], Field("f", 0, 1)) == pytest.approx(
        1 / 3, abs=1e-4)
    # Quadratic weights on 0..3 for a=(0,1,2,3), b=(0,2,2,3): kappa = 1 - observed/expected
    # squared disagreement. Observed: (0+1+0+0)/4 = 0.25. Expected, over all 16 pairs
    # (a_i, b_j): a=0 -> 0+4+4+9, a=1 -> 1+1+1+4, a=2 -> 4+0+0+1, a=3 -> 9+1+1+0; 40/16 = 2.5.
    assert kappa([0, 1, 2, 3], [0, 2, 2, 3], Field("c", 0, 3)) == pytest.approx(
        1 - 0.25 / 2.5, abs=1e-4)
    assert kappa([1, 1], [1, 1], Field("f", 0, 1)) is None  # 0/0: both judges constant
    assert kappa([], [], Field("f", 0, 1)) is None


def test_rank_correlation_needs_three_varying_pairs() -> None:
    assert rank_correlation([0.1, 0.5, 0.9], [0.0, 0.2, 1.0]) == 1.0
    assert rank_correlation([0.1, 0.5], [0.0, 0.2]) is None
    assert rank_correlation([0.5, 0.5, 0.5], [0.0, 0.2, 1.0]) is None


# -- the panel ------------------------------------------------------------------------------


class ToyQA:
    name, suite, uses_depth, rule_metric = "toyqa", "toy", False, "subem"
    rubric = helmet.QA

    def score(self, output: str, case: Case) -> float:
        return float(case.gold[0].lower() in output.lower())


def judge(store: Store, spec: str, option: str = "--lceval-judge") -> Judge:
    return Judge(JudgeSpec(ModelSpec(spec), option),
                 lambda s: load_backend(s.spec, LoadOptions()), store)


CASES = [case((gold,), question="Where?") for gold in ("Skye", "Paris", "the moon", "Rome")]
OUTPUTS = ["Answer: Skye", "Answer: to Paris, France", "Answer: the sun", "Rome"]


def test_one_retry_then_unparsed_cases_leave_helmets_mean(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite")
    retried = judge_outputs(judge(store, "mock:judge?mode=retry"), ToyQA.rubric, OUTPUTS, CASES)
    assert retried.scores == [1.0, 1.0, 0.0, 1.0]
    assert retried.retried == 4 and retried.requests == 8 and not any(retried.unparsed)
    garbage = judge_outputs(judge(store, "mock:judge?mode=garbage"), ToyQA.rubric, OUTPUTS,
                            CASES)
    assert garbage.scores == [None] * 4 and all(garbage.unparsed) and garbage.retried == 4
    zero = judge_outputs(judge(store, "mock:judge?mode=garbage"), longbench100.QA,
                         OUTPUTS, CASES)
    assert zero.scores == [0.0] * 4  # 100-LongBench scores an unreadable reply 0


def test_a_prefilled_judge_continues_its_json(tmp_path: Path) -> None:
    """A judge that only continues what it is given: with the reply begun at its first field and
    ended at the object's close it scores; without, its reply holds no object."""
    store = Store(tmp_path / "store.sqlite")
    spec = 'mock:constant?text=1, "correctness": 2'

    def judging(prefill: bool) -> Judge:
        return Judge(JudgeSpec(ModelSpec(spec), "--lceval-judge", prefill=prefill),
                     lambda s: load_backend(s.spec, LoadOptions()), store)

    plain = judge_outputs(judging(False), ToyQA.rubric, OUTPUTS[:1], CASES[:1])
    assert plain.unparsed == [True]
    begun = judge_outputs(judging(True), ToyQA.rubric, OUTPUTS[:1], CASES[:1])
    assert begun.scores == [pytest.approx(2 / 3)] and begun.ratings[0][0].ratings == {
        "fluency": 1, "correctness": 2}


def test_a_second_judge_gives_kappa_and_the_score_difference(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite")
    panel = JudgePanel(judge(store, "mock:judge"),
                       judge(store, "mock:judge?mode=strict", "--lceval-judge2"))
    scored = panel.score(ToyQA(), OUTPUTS, CASES)
    assert scored.scores == [1.0, 1.0, 0.0, 1.0]
    metrics = scored.metrics
    # strict: only the exact answers "Skye" and "Rome" are correct: correctness (3,3,0,3) vs
    # (3,0,0,3); scores differ by -1/4 on average.
    assert metrics["judge2_score"] == 0.5 and metrics["judge_score_diff"] == -0.25
    assert metrics["judge_kappa_correctness"] == pytest.approx(0.5)
    assert metrics["subem"] == 0.75 and metrics["judge_rule_spearman"] == 1.0
    assert scored.judge.startswith("mock:judge@") and metrics["judge_unparsed"] == 0


def test_key_points_are_written_once_and_read_back_from_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite")
    summary = case(("The firm was sued in 2019. The suit was about wages. They settled.",))
    first = judge_outputs(judge(store, "mock:judge"), helmet.SUMMARY_LEGAL,
                          ["The firm was sued in 2019 over wages."], [summary])
    assert first.requests == 4  # key points, fluency, recall, precision
    given = case(summary.gold, keypoints=["The firm was sued.", "It settled."])
    again = judge_outputs(judge(store, "mock:judge"), helmet.SUMMARY_LEGAL,
                          ["The firm was sued in 2019 over wages."] * 2, [summary, given])
    # No key points written: the first case's are stored, the second's come from its data;
    # only the recall ask is new (fluency and precision ask what was asked before).
    assert again.requests == 1
    assert again.scores[0] == first.scores[0]


# -- through pytest -------------------------------------------------------------------------

GRID = ["--model", "mock:grep", "--lengths", "256,512", "--samples", "3",
        "--lceval-threshold", "0.5", *FAST]


@pytest.fixture
def judged(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(JUDGED_TASK)
    pytester.makepyfile(test_judged=JUDGED_SUITE)
    return pytester


def test_a_judged_suite_records_its_judge_and_a_rerun_asks_it_nothing(
        judged: pytest.Pytester) -> None:
    first = judged.runpytest("--lceval-judge", "mock:judge", "--lceval-run", "one",
                             "--lceval-save", "base", "--junitxml", "one.xml",
                             "-o", "junit_family=xunit1", *GRID)
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["lceval: judge --lceval-judge=mock:judge *"])
    rows = read_results(judged, "one")
    assert {row["score"] for row in rows} == {1.0}
    assert all(row["judge"].startswith("mock:judge@") for row in rows)
    # The judge reads question, answers and output: the 512 cell asks what the 256 cell asked.
    assert [row["metrics"]["judge_requests"] for row in rows] == [3, 0]
    assert 'name="judge_unparsed" value="0"' in (judged.path / "one.xml").read_text()
    again = judged.runpytest("--lceval-judge", "mock:judge", "--lceval-run", "two",
                             "--lceval-compare", "base", *GRID)
    again.assert_outcomes(passed=2)
    assert all(row["metrics"]["judge_requests"] == 0 for row in read_results(judged, "two"))


def test_two_workers_judge_as_one_process_does(judged: pytest.Pytester) -> None:
    judged.runpytest("--lceval-judge", "mock:judge?mode=strict", "--lceval-run", "one",
                     *GRID).assert_outcomes(passed=2)
    judged.runpytest("--lceval-judge", "mock:judge?mode=strict", "--lceval-run", "two",
                     "--lceval-store", "other.sqlite", "-n", "2", *GRID).assert_outcomes(passed=2)
    one, two = read_results(judged, "one"), read_results(judged, "two")
    assert [(r["nodeid"], r["scores"], r["judge"]) for r in one] == \
        [(r["nodeid"], r["scores"], r["judge"]) for r in two]


def test_unreadable_replies_are_counted_and_a_wholly_unreadable_cell_fails(
        judged: pytest.Pytester) -> None:
    outcome = judged.runpytest("--lceval-judge", "mock:judge?mode=garbage", "--lceval-run",
                               "bad", f"--html={judged.path / 'report.html'}", *GRID)
    outcome.assert_outcomes(failed=2)
    outcome.stdout.fnmatch_lines(["*the judge's replies to all 3 cases could not be read*"])
    assert all(row["metrics"]["judge_unparsed"] == 3 for row in read_results(judged, "bad"))
    # A refused cell takes the same steps as a measured one: its report extras are there.
    for [entry] in html_tests(judged.path / "report.html").values():
        [extra] = [e for e in entry["extras"] if e["format_type"] == "html"]
        assert "could not be read" in extra["content"]
    summary = (judged.path / "reports" / "bad" / "summary.md").read_text()
    assert "| judged · toyjudged | mock:judge?mode=garbage@" in summary
    assert "| 0 | 6 | 6 | subem 1.000 |" in summary  # scored, unparsed, retried, rule metric


def test_another_judge_cannot_be_compared_with_a_saved_run_unless_forced(
        judged: pytest.Pytester) -> None:
    judged.runpytest("--lceval-judge", "mock:judge", "--lceval-save", "base",
                     *GRID).assert_outcomes(passed=2)
    refused = judged.runpytest("--lceval-judge", "mock:judge?mode=strict", "--lceval-compare",
                               "base", *GRID)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*baseline 'base' was judged by --lceval-judge=mock:judge "
                                  "and this run names mock:judge?mode=strict*"])
    forced = judged.runpytest("--lceval-judge", "mock:judge?mode=strict", "--lceval-compare",
                              "base", "--lceval-compare-any-judge", *GRID)
    forced.assert_outcomes(passed=2)


def test_without_a_judge_judged_tasks_have_no_cells(judged: pytest.Pytester) -> None:
    outcome = judged.runpytest(*GRID)
    outcome.assert_outcomes(errors=1)
    outcome.stdout.fnmatch_lines(["*suite 'judged' has no cells: toyjudged needs a judge "
                                  "model (--lceval-judge=SPEC)*"])


@pytest.mark.parametrize("options, line", [
    (["--lceval-judge", "gpt-4o"], "*--lceval-judge: unknown model spec 'gpt-4o'*"),
    (["--lceval-judge", "mock:judge", "--lceval-judge-max-tokens", "0"],
     "*bad value '0' for --lceval-judge-max-tokens*must be at least 1*"),
    (["--lceval-judge2", "mock:judge"], "*--lceval-judge2 needs --lceval-judge*"),
    (["--lceval-judge-base-url", "http://x/v1"], "*--lceval-judge-base-url is set but*"),
])
def test_bad_judge_options_fail_at_start_up_in_one_line(
        judged: pytest.Pytester, options: list[str], line: str) -> None:
    outcome = judged.runpytest(*options, *GRID)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines([line])


def test_helmet_judge_prompts_are_read_from_helmets_scripts_or_refused(tmp_path: Path) -> None:
    from pytest_lceval.benchmarks.helmet.judge_prompts import SCRIPTS, read_helmet_prompts

    scripts = tmp_path / "scripts"
    scripts.mkdir()
    with pytest.raises(ValueError, match="cannot read .*eval_gpt4_longqa.py"):
        read_helmet_prompts(tmp_path)
    (scripts / "eval_gpt4_longqa.py").write_text('judge_prompt = """Q: {question}"""\n'
                                                 'def f():\n    judge_prompt = 1\n')
    (scripts / "eval_gpt4_summ.py").write_text('fluency_prompt = "F: {text}"\n')
    with pytest.raises(ValueError, match="defines no fluency_prompt_book, recall_prompt"):
        read_helmet_prompts(tmp_path)
    (scripts / "eval_gpt4_summ.py").write_text(
        "".join(f'{name} = "{name}: {{text}}"\n' for name in SCRIPTS["eval_gpt4_summ.py"]))
    texts = read_helmet_prompts(scripts)  # the scripts folder itself will do
    assert texts["judge_prompt"] == "Q: {question}" and len(texts) == 7
