"""Bad baselines and comparisons (issue #50): a task that collapsed while the others gained.
Each test reproduces what a user did and checks the verdict they get, the exit status, and that
the store keeps every answer it had.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_bad_inputs import store_rows
from toy_suite import SUITE, TOY_TASK

from pytest_lceval.report.badge import FAIL_COLOUR, PASS_COLOUR, write_badges
from pytest_lceval.report.summary import comparison_headline, summarize
from pytest_lceval.results.cells import CellResult, Judgement
from pytest_lceval.verdicts.baseline.pooled import SUITE_GATE, TASK_GATE
from pytest_lceval.verdicts.verdict import GateResult, decide

STORE = ["--lceval-store", "s.sqlite"]
FOUR_TASKS = TOY_TASK + '''

import dataclasses


@dataclass(frozen=True)
class Placed(ToyNeedle):
    """The toy needle at one place of every prompt, ``at`` percent: mock:grep?miss=0-10
    forgets the early ones, mock:grep?miss=40-60 the middle ones."""

    at: float = 0.0
    uses_depth: bool = False

    def build(self, cell, context):
        return super().build(dataclasses.replace(cell, depth=self.at), context)


def pytest_lceval_suites(config):
    return [GenerationSuite("four", [Placed("early_a", at=2), Placed("early_b", at=2),
                                     Placed("middle_a", at=50), Placed("middle_b", at=50)])]
'''
FOUR_SUITE = SUITE.replace('suite="toy"', 'suite="four"')
TEN_CASES = ["--lengths", "256", "--samples", "10", "-p", "no:randomly", "-p",
             "no:cacheprovider", "--lceval-threshold", "0", *STORE]
"""Four cells of ten cases; threshold 0, so only the comparison can fail the run."""
MIDDLE_BLIND, EARLY_BLIND = "mock:grep?miss=40-60", "mock:grep?miss=0-10"


def assert_kept(pytester: pytest.Pytester, stored: dict[str, int]) -> None:
    """The store holds at least every row it held before (a later run may add its own)."""
    now = store_rows(pytester.path / "s.sqlite")
    assert all(now.get(table, 0) >= count for table, count in stored.items()), (stored, now)


# -- item 3: a task that collapsed while the others gained -------------------------------------


@pytest.mark.bad_input("compare-one-half-lost-one-half-gained")
def test_tasks_that_collapsed_while_the_others_gained_fail_the_run_everywhere(
        pytester: pytest.Pytester) -> None:
    """The baseline answers the early tasks and none of the middle ones; the candidate the
    reverse: 20 cases worse, 20 better, the suite's pooled test p = 1. Two tasks fell 1.0 ->
    0.0 (p = 0.002 each): the task gate fails the run, and every output says so and names
    them."""
    pytester.makeconftest(FOUR_TASKS)
    pytester.makepyfile(test_four=FOUR_SUITE)
    pytester.runpytest(*TEN_CASES, "--model", MIDDLE_BLIND, "--lceval-run", "base",
                       "--lceval-save", "base").assert_outcomes(passed=4)
    stored = store_rows(pytester.path / "s.sqlite")
    outcome = pytester.runpytest(*TEN_CASES, "--model", EARLY_BLIND, "--lceval-run", "cmp",
                                 "--lceval-compare", "base", "--junitxml=cmp.xml",
                                 "--html=cmp.html")
    outcome.assert_outcomes(passed=4)  # the cells' own rows are evidence
    assert outcome.ret == pytest.ExitCode.TESTS_FAILED
    outcome.stdout.fnmatch_lines([
        "lceval: compared with baseline 'base', four can detect (power 0.8) a drop of 0.42 "
        "over its 40 paired cases (alpha 0.025); each task (alpha 0.0063, 4 tasks): none; "
        "per cell: 0.79; power at --lceval-min-drop 0.05: suite 0.00, a task 0.00",
        "lceval: suite gate PASSED baseline_suite: four pooled over 4 compared cells: 0.500 "
        "vs 0.500 in baseline 'base', difference +0.000 *p=1 (20 worse, 20 better), N=40: "
        "inconclusive*",
        "lceval: suite gate FAILED baseline_tasks: four per task (Holm over the suite and its "
        "4 tasks at alpha 0.05: the suite from 0.025, each task from 0.0063): 2 regressed by "
        "at least --lceval-min-drop 0.05: early_a 1.000 -> 0.000 (-1.000, N=10, p=0.00195, "
        "Holm p=0.0156), early_b 1.000 -> 0.000 (-1.000, N=10, p=0.00195, Holm p=0.0156)"])
    verdict = ("2 regressed against base (four: early_a, early_b); 1 suite gate failed: "
               "baseline_tasks (four): pass rate 100% (4/4), 0 skipped")
    ours = [line for line in outcome.stdout.lines if line.startswith("lceval: ")]
    assert ours[-1] == f"lceval: pytest-lceval {verdict}"
    run = pytester.path / "reports" / "cmp"
    summary = (run / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith(f"### pytest-lceval ❌ {verdict.replace('base', '`base`', 1)}")
    data = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert (data["outcome"], data["ok"]) == ("failed", False)
    [tasks] = [gate for gate in data["gates"] if gate["criterion"] == TASK_GATE]
    assert (tasks["status"], tasks["properties"]["regressed"]) == ("FAILED",
                                                                   ["early_a", "early_b"])
    cases = {case.get("name"): case for case in ET.parse(pytester.path / "cmp.xml").iter(
        "testcase") if case.get("classname") == "lceval-gates.four"}
    failure = cases[TASK_GATE].find("failure")
    assert failure is not None and "early_a 1.000 -> 0.000" in (failure.get("message") or "")
    assert cases[SUITE_GATE].find("failure") is None
    page = (pytester.path / "cmp.html").read_text(encoding="utf-8")
    assert f"<b>pytest-lceval {verdict}</b>" in page
    assert re.search(r"<td>baseline_tasks</td><td>four</td><td>[^<]*</td><td>[^<]*early_a "
                     r"1\.000 -&gt; 0\.000[^<]*</td><td>FAILED</td>", page)
    assert badge(run) == ("1 gate failed, 2 regressed, 100% (4/4)", FAIL_COLOUR)
    assert_kept(pytester, stored)


def _compared_cell(status: str) -> CellResult:
    result = CellResult("t.py::test[a-1k]", "s", "a", 1024, None, {}, "m", "fp", 1, "fixtures",
                        n=10, score=0.4, scores=[0.4] * 10)
    result.judgements = [Judgement("baseline", True, "", {
        "baseline": "base", "baseline_status": status, "baseline_score": 1.0,
        "baseline_diff": -0.6, "baseline_p": 0.03, "baseline_n": 10})]
    return result


def badge(run_dir: Path) -> tuple[str, str]:
    """The run badge's text and colour."""
    svg = (run_dir / "badge.svg").read_text(encoding="utf-8")
    return re.findall(r">([^<]+)</text>", svg)[-1], re.findall(r'<path fill="(#\w+)"', svg)[1]


@pytest.mark.bad_input("compare-a-cell-row-regressed-the-gates-passed")
def test_a_cell_row_that_regressed_under_passing_gates_leaves_the_verdict_green(
        tmp_path: Path) -> None:
    """A cell's own test is evidence at alpha: a run whose comparison gates passed is green on
    its badge and in its headline, whatever one cell's row says (a red "1 regressed" badge
    over an exit 0 told two stories)."""
    passed = [GateResult("s", Judgement(SUITE_GATE, True, "", {})),
              GateResult("s", Judgement(TASK_GATE, True, "", {"regressed": []}))]
    results = [_compared_cell("regressed")]
    verdict = decide(results, passed)
    assert verdict.ok
    assert comparison_headline(summarize("r", results, verdict=verdict)) == \
        "0 regressed against `base`"
    write_badges(tmp_path, results, verdict)
    assert badge(tmp_path) == ("0 regressed, 100% (1/1)", PASS_COLOUR)

    failed = [passed[0], GateResult("s", Judgement(TASK_GATE, False, "", {"regressed": ["a"]}))]
    results = [_compared_cell("inconclusive")]
    verdict = decide(results, failed)
    assert comparison_headline(summarize("r", results, verdict=verdict)) == \
        "1 regressed against `base` (s: a)"
    write_badges(tmp_path, results, verdict)
    assert badge(tmp_path) == ("1 gate failed, 1 regressed, 100% (1/1)", FAIL_COLOUR)
