"""The suite architecture through pytester: a suite of one's own from one conftest, judging that
never reaches the model, and suite-level gates that set the exit status and reach summary.md."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from run_outputs import read_results
from toy_suite import SUITE, TOY_TASK

from pytest_lceval.models.stored import StoredModel
from pytest_lceval.verdicts.criteria import CellJudge

EXAMPLE = Path(__file__).parent.parent / "docs" / "examples" / "row_lookup"
FAST = ["-p", "no:randomly", "-p", "no:cacheprovider"]
TOY = ["--lengths", "256,512,1k", "--depths", "0,50,100", "--samples", "4",
       "--longscore-base-lengths", "256", *FAST]


def test_the_documented_example_suite_runs_with_its_own_axis_and_criterion(
        pytester: pytest.Pytester) -> None:
    for path in EXAMPLE.glob("*.py"):
        shutil.copy(path, pytester.path / path.name)
    lines = sum(len(p.read_text().splitlines()) for p in EXAMPLE.glob("*.py"))
    assert lines <= 85, f"the example suite grew to {lines} lines"
    collected = pytester.runpytest("--model", "mock:grep", "--collect-only", "-q", *FAST)
    collected.stdout.fnmatch_lines(["*test_row_lookup[[]lookup-20rows-0[]]",
                                    "*test_row_lookup[[]lookup-200rows-100[]]"])
    pytester.runpytest("--model", "mock:grep", "--samples", "5", "--lceval-run", "ok",
                       *FAST).assert_outcomes(passed=12)
    rows = read_results(pytester, "ok")
    assert {row["metrics"]["chance"] for row in rows} == {0.1}
    assert all(j["criterion"] == "above_chance" for row in rows for j in row["judgements"])
    # a model that forgets the middle of the prompt fails the middle depths, by its criterion
    outcome = pytester.runpytest("--model", "mock:grep?miss=20-80", "--samples", "5",
                                 "--depths", "0,50", *FAST)
    outcome.assert_outcomes(passed=2, failed=2)
    outcome.stdout.fnmatch_lines(["*lookup: score 0.00 (95% CI from 0.00) <= chance 0.10*"])


def _arm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the model refuse every call while criteria judge, in this process (the inner runs
    are in-process); the outer test's monkeypatch restores both when it ends, however the inner
    run ended."""
    armed: list[bool] = []
    assess = CellJudge.assess

    def armed_assess(*args: Any, **kwargs: Any) -> Any:
        armed.append(True)
        try:
            return assess(*args, **kwargs)
        finally:
            armed.clear()

    for name in ("generate", "rank"):
        original = getattr(StoredModel, name)

        def refusing(self: StoredModel, *args: Any, _name: str = name,
                     _original: Any = original, **kwargs: Any) -> Any:
            if armed:
                raise RuntimeError(f"a criterion called the model ({_name}) while judging")
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(StoredModel, name, refusing)
    monkeypatch.setattr(CellJudge, "assess", armed_assess)


def test_judging_never_reaches_the_model(pytester: pytest.Pytester,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Every criterion (threshold, LongScore with its base ability, the saved-run comparison,
    Task Haystack's t-test) judges with the model refusing every call: what they need was
    measured before."""
    pytester.makeconftest(TOY_TASK)
    _arm(monkeypatch)
    pytester.makepyfile(test_suite=SUITE)
    pytester.makepyfile(test_task_haystack=(
        Path(__file__).parent.parent / "pytest_lceval" / "suites" / "test_task_haystack.py"
    ).read_text())
    args = ["--model", "mock:grep?miss=40-60", *TOY, "--longscore-min", "-20"]
    first = pytester.runpytest(*args, "--lceval-save", "base", "--lceval-run", "a")
    first.assert_outcomes(passed=16, failed=3)  # the middle depth of 9 toy cells fails
    rows = read_results(pytester, "a")
    judged = {j["criterion"] for row in rows for j in row["judgements"]}
    assert judged == {"longscore", "threshold", "task_haystack"}
    second = pytester.runpytest(*args, "--lceval-compare", "base", "--lceval-run", "b")
    again = read_results(pytester, "b")
    assert {j["criterion"] for row in again for j in row["judgements"]} == judged | {"baseline"}
    assert [row["outcome"] for row in again] == [row["outcome"] for row in rows]
    second.stdout.no_fnmatch_line("*called the model*")


def _toy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_failed_suite_gate_fails_a_run_whose_cells_all_passed(
        pytester: pytest.Pytester) -> None:
    outcome = _toy(pytester).runpytest("--model", "mock:grep?miss=40-60", *TOY,
                                       "--lceval-threshold", "0", "--longscore-mean-min", "10",
                                       "--lceval-run", "g")
    outcome.assert_outcomes(passed=9)
    assert outcome.ret == pytest.ExitCode.TESTS_FAILED
    outcome.stdout.fnmatch_lines(["*suite gate FAILED longscore_mean: toy: mean LongScore "
                                  "+0.0% over 6 of 6 long cells < --longscore-mean-min +10%*"])
    summary = (pytester.path / "reports" / "g" / "summary.md").read_text()
    assert "1 suite gate failed" in summary and "**Suite gates**" in summary
    assert "| longscore_mean | toy | the mean LongScore of the suite's long cells is at least " \
        "+10% (--longscore-mean-min) | ❌ toy: mean LongScore" in summary


def test_pass_rate_gate_counts_judged_cells_and_checks_suite_names(
        pytester: pytest.Pytester) -> None:
    _toy(pytester)
    args = ["--model", "mock:grep?miss=40-60", *TOY]
    passing = pytester.runpytest(*args, "--lceval-min-pass-rate", "toy=0.5")
    passing.stdout.fnmatch_lines(["*suite gate PASSED pass_rate: toy: 6 of 9 judged cells "
                                  "passed (66.7%) >= --lceval-min-pass-rate 50%*"])
    assert passing.ret == pytest.ExitCode.TESTS_FAILED  # the three failed cells still fail
    strict = pytester.runpytest(*args, "--lceval-min-pass-rate", "0.9")
    strict.stdout.fnmatch_lines(["*suite gate FAILED pass_rate: toy: 6 of 9*< *90%*"])
    typo = pytester.runpytest(*args, "--lceval-min-pass-rate", "tyo=0.9")
    assert typo.ret == pytest.ExitCode.USAGE_ERROR
    typo.stderr.fnmatch_lines(["*--lceval-min-pass-rate names unknown suite(s) tyo; known:*"])


NEEDS_DATA = '''
from dataclasses import dataclass

@dataclass(frozen=True)
class HubOnly(ToyNeedle):
    name: str = "hub_only"

    def missing_data(self, data):
        return None if data.folder("hub_only") else "hub_only/ in --lceval-data"


TASKS = [*TASKS, HubOnly()]
'''


def test_a_task_whose_data_is_absent_has_no_cells_and_says_why(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TOY_TASK + NEEDS_DATA)
    pytester.makepyfile(test_suite=SUITE)
    args = ["--model", "mock:grep", "--lengths", "256", "--depths", "50", *FAST]
    ran = pytester.runpytest(*args, "-v")  # -v: one line per task with what it needs
    ran.assert_outcomes(passed=1)  # the toy task runs; hub_only has no cells
    ran.stdout.no_fnmatch_line("*hub_only*PASSED*")
    ran.stdout.fnmatch_lines(["lceval: toy: no cells for hub_only: it needs hub_only/ in "
                              "--lceval-data"])
    alone = pytester.runpytest(*args, "--lceval-tasks", "hub_only")
    alone.assert_outcomes(errors=1)
    alone.stdout.fnmatch_lines(["*no cells to run*"])
    (pytester.path / "data" / "hub_only").mkdir(parents=True)
    pytester.runpytest(*args, "--lceval-data", "data", "-v").assert_outcomes(passed=2)


def test_an_empty_suite_says_which_data_it_lacks(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TOY_TASK.replace("TASKS = [ToyNeedle()]", "TASKS = []") + NEEDS_DATA)
    pytester.makepyfile(test_suite=SUITE)
    # In-process: the tasks other tests' inner runs declared are gone with their sessions.
    outcome = pytester.runpytest("--model", "mock:grep", "--lengths", "256", *FAST)
    outcome.assert_outcomes(errors=1)
    outcome.stdout.fnmatch_lines(["*suite 'toy' has no cells: hub_only needs "
                                  "hub_only/ in --lceval-data*"])


MORE_RECALL = '''
from pytest_lceval.run.suite import MoreTasks


def pytest_lceval_suites(config):
    return [MoreTasks("recall", (ToyNeedle(name="my_needle"),))]
'''


def test_a_plugin_adds_a_task_to_a_built_in_suite_for_its_session_only(
        pytester: pytest.Pytester) -> None:
    """A task of one's own in the built-in recall suite comes through the suites hook; the next
    session in the same process, without that conftest, does not know it."""
    task = TOY_TASK.split("\nTASKS = ")[0]  # the task class, without the toy suite
    pytester.makeconftest(task + MORE_RECALL)
    pytester.makepyfile(test_recall=SUITE.replace('suite="toy"', 'suite="recall"'))
    args = ["--model", "mock:grep", "--lengths", "256", "--depths", "50", *FAST]
    pytester.runpytest(*args, "--lceval-tasks", "my_needle").assert_outcomes(passed=1)
    (pytester.path / "conftest.py").unlink()
    gone = pytester.runpytest(*args, "--lceval-tasks", "my_needle")
    assert gone.ret == pytest.ExitCode.USAGE_ERROR
    gone.stderr.fnmatch_lines(["*--lceval-tasks: unknown task(s) 'my_needle'*"])


def test_tasks_added_to_an_undeclared_suite_are_a_usage_error(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TOY_TASK.split("\nTASKS = ")[0]
                          + MORE_RECALL.replace('"recall"', '"recal"'))
    pytester.makepyfile(test_recall=SUITE.replace('suite="toy"', 'suite="recall"'))
    outcome = pytester.runpytest("--model", "mock:grep", *FAST)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*tasks my_needle are added to suite 'recal', which no "
                                  "plugin declares*"])
