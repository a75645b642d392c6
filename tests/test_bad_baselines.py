"""Bad baselines and comparisons (issue #50, items 3, 11, 14 and the baseline part of 15): a
task that collapsed while the others gained, a good baseline replaced by a run that measured
less, a store path that names a baseline, a baseline that cannot be read or holds scores its
metric cannot have. Each test reproduces what a user did and checks the one line (or the
verdict) they get, the exit status, and that the store keeps every answer it had.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_bad_inputs import store_rows
from test_bad_inputs_third import one_line
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


# -- item 11: a baseline replaced by a run that measured less ----------------------------------


TOY = ["--model", "mock:grep", "--lengths", "256,512", "--depths", "0,50", "--samples", "2",
       "-p", "no:randomly", "-p", "no:cacheprovider", *STORE]
"""Four cells of the toy task; mock:grep answers them all."""
SIGTERM_AFTER_FIRST = """
import os
import signal


def pytest_runtest_logfinish(nodeid, location):
    if nodeid.endswith("[toy-256-0]"):
        os.kill(os.getpid(), signal.SIGTERM)  # a cancelled CI job
"""


@pytest.fixture
def keep(pytester: pytest.Pytester) -> Path:
    """The toy suite, and a good baseline 'keep' of its four cells."""
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    pytester.runpytest(*TOY, "--lceval-run", "good", "--lceval-save",
                       "keep").assert_outcomes(passed=4)
    return pytester.path / "reports" / "baselines" / "keep.json"


def refused_at_finish(outcome: pytest.RunResult, *fragments: str) -> str:
    """The save's one line at the end of the run, holding every fragment."""
    said = [line for line in outcome.outlines if "baseline 'keep'" in line]
    assert len(said) == 1 and said[0].startswith("lceval: baseline 'keep' not saved: "), said
    for fragment in fragments:
        assert fragment in said[0], (fragment, said[0])
    return said[0]


@pytest.mark.bad_input("save-over-a-baseline-from-a-run-that-skipped-every-cell",
                       "save-a-new-baseline-from-a-run-that-skipped-every-cell")
def test_a_run_that_measured_nothing_saves_nothing(pytester: pytest.Pytester,
                                                   keep: Path) -> None:
    """Every cell beyond the window: the good baseline is refused at start-up (the plan knows
    nothing can be measured); a new name is not saved either, said at the end."""
    before, stored = keep.read_bytes(), store_rows(pytester.path / "s.sqlite")
    over = pytester.runpytest(*TOY, "--lengths", "16k,32k", "--lceval-save", "keep")
    assert over.ret == pytest.ExitCode.USAGE_ERROR
    one_line(over, "--lceval-save keep: it would replace baseline 'keep' (4 measured cells, "
                   "saved at ", ") with the 0 cells this run can measure; save under another "
                   f"name (e.g. --lceval-save keep-2), or remove {keep} to replace it")
    fresh = pytester.runpytest(*TOY, "--lengths", "16k,32k", "--lceval-save", "fresh")
    fresh.assert_outcomes(skipped=4)
    fresh.stdout.fnmatch_lines(["lceval: baseline 'fresh' not saved: none of this run's 4 "
                                "cells was measured (cell length 16384 tokens exceeds*"])
    assert not (keep.parent / "fresh.json").exists()
    assert keep.read_bytes() == before
    assert_kept(pytester, stored)


@pytest.mark.bad_input("save-over-a-baseline-from-a-run-that-skipped-some-cells")
def test_a_run_that_skipped_cells_replaces_no_baseline(pytester: pytest.Pytester,
                                                       keep: Path) -> None:
    """Four cells measured, four beyond the window: as many as the baseline, but a baseline
    is replaced only by a run that measured every cell; a new name keeps the measured ones."""
    before, stored = keep.read_bytes(), store_rows(pytester.path / "s.sqlite")
    wide = [*TOY, "--lengths", "256,512,16k,32k"]
    outcome = pytester.runpytest(*wide, "--lceval-save", "keep")
    outcome.assert_outcomes(passed=4, skipped=4)
    refused_at_finish(outcome, "it would replace baseline 'keep' (4 measured cells) with a run "
                               "that left 4 of its 8 cells unmeasured; save under another name")
    assert keep.read_bytes() == before
    other = pytester.runpytest(*wide, "--lceval-save", "wide")
    other.stdout.fnmatch_lines(["lceval: saved baseline 'wide' (4 cells; 4 not measured, left "
                                "out) to *wide.json"])
    assert len(json.loads((keep.parent / "wide.json").read_text())["cells"]) == 4
    assert_kept(pytester, stored)


@pytest.mark.bad_input("save-over-a-baseline-from-fewer-cells")
def test_a_run_of_fewer_cells_is_refused_before_it_starts(pytester: pytest.Pytester,
                                                          keep: Path) -> None:
    before = keep.read_bytes()
    outcome = pytester.runpytest(*TOY, "-k", "256", "--lceval-save", "keep")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    one_line(outcome, "--lceval-save keep: it would replace baseline 'keep' (4 measured cells",
             "with the 2 cells this run can measure; save under another name")
    assert keep.read_bytes() == before
    pytester.runpytest(*TOY, "-k", "256", "--lceval-save", "keep-2").assert_outcomes(passed=2)
    assert (keep.parent / "keep-2.json").is_file()


@pytest.mark.bad_input("save-from-a-run-stopped-by-x")
def test_a_run_stopped_by_x_saves_nothing(pytester: pytest.Pytester, keep: Path) -> None:
    """mock:grep?miss=40-60 fails toy-256-50, the second cell: -x stops there."""
    before, stored = keep.read_bytes(), store_rows(pytester.path / "s.sqlite")
    outcome = pytester.runpytest(*TOY, "--model", "mock:grep?miss=40-60", "-x",
                                 "--lceval-save", "keep")
    outcome.assert_outcomes(passed=1, failed=1)
    refused_at_finish(outcome, "this run is incomplete, 2 of 4 selected tests not run "
                               "(stopping after 1 failures); a baseline is saved only from a "
                               f"complete run: run it to its end ({keep} is kept as it was)")
    assert keep.read_bytes() == before
    assert_kept(pytester, stored)


@pytest.mark.bad_input("save-from-a-run-cancelled-by-sigterm")
def test_a_run_cancelled_by_sigterm_saves_nothing(pytester: pytest.Pytester, keep: Path) -> None:
    before, stored = keep.read_bytes(), store_rows(pytester.path / "s.sqlite")
    pytester.makeconftest(TOY_TASK + SIGTERM_AFTER_FIRST)
    outcome = pytester.runpytest_subprocess(*TOY, "--lceval-save", "keep", timeout=300)
    assert outcome.ret == pytest.ExitCode.INTERRUPTED
    refused_at_finish(outcome, "this run is incomplete, 3 of 4 selected tests not run "
                               "(interrupted: SIGTERM); a baseline is saved only from a complete "
                               "run")
    assert keep.read_bytes() == before
    assert_kept(pytester, stored)


@pytest.mark.bad_input("save-over-a-file-that-is-not-a-baseline")
def test_a_save_over_a_file_that_is_not_a_baseline_is_refused(pytester: pytest.Pytester,
                                                              keep: Path) -> None:
    notes = pytester.path / "notes.json"
    notes.write_text('{"my": "notes"}')
    outcome = pytester.runpytest(*TOY, "--lceval-save", str(notes))
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    one_line(outcome, f"--lceval-save notes: {notes} holds something other than a readable "
                      f"baseline ({notes} is not a pytest-lceval saved run); save under another "
                      f"name")
    assert notes.read_text() == '{"my": "notes"}'


# -- item 14: a store path that names a baseline; a baseline that is not text ------------------


@pytest.mark.bad_input("store-path-names-a-baseline", "store-path-names-a-text-file")
def test_a_store_path_naming_a_baseline_or_text_is_refused_and_left_as_it_is(
        pytester: pytest.Pytester, keep: Path) -> None:
    """The two options mixed up: the baseline was renamed away as a damaged store, and a
    SQLite file written in its place."""
    before, stored = keep.read_bytes(), store_rows(pytester.path / "s.sqlite")
    notes = pytester.path / "notes.txt"
    notes.write_text("remember the milk\n")
    for path, holds in ((keep, "holds JSON (pytest-lceval-baseline)"),
                        (notes, "is a text file")):
        outcome = pytester.runpytest(*TOY, "--lceval-store", str(path))
        assert outcome.ret == pytest.ExitCode.USAGE_ERROR
        one_line(outcome, f"--lceval-store {path} {holds}, not a pytest-lceval store; give "
                          f"--lceval-store the store's own file, or a new file path")
        assert not list(path.parent.glob(f"{path.name}.damaged-*"))
    assert keep.read_bytes() == before and notes.read_text() == "remember the milk\n"
    pytester.runpytest(*TOY, "--lceval-compare", "keep").assert_outcomes(passed=4)
    assert_kept(pytester, stored)


@pytest.mark.bad_input("compare-with-a-store-file", "compare-with-latin-1-json")
def test_a_baseline_that_is_not_text_is_refused_naming_the_file(pytester: pytest.Pytester,
                                                                keep: Path) -> None:
    stored = store_rows(pytester.path / "s.sqlite")
    store_there = keep.with_name("b12.json")
    store_there.write_bytes((pytester.path / "s.sqlite").read_bytes())
    latin = keep.with_name("latin.json")
    latin.write_bytes(keep.read_text().replace('"name": "keep"', '"name": "k\u00f8"').encode(
        "latin-1"))
    for name, holds in (("b12", "is a SQLite database (a store, as --lceval-store writes), "
                                "not a saved run"),
                        ("latin", "is not a text file (byte 0xf8 at ")):
        outcome = pytester.runpytest(*TOY, "--lceval-compare", name)
        assert outcome.ret == pytest.ExitCode.USAGE_ERROR
        said = one_line(outcome, f"bad value '{name}' for --lceval-compare",
                        f"{keep.with_name(name + '.json')} {holds}")
        assert "codec" not in said
    assert_kept(pytester, stored)


# -- item 15: a baseline score its metric cannot have ------------------------------------------


@pytest.mark.bad_input("baseline-score-above-its-metric")
def test_a_baseline_score_outside_its_metric_is_refused_with_its_cell(
        pytester: pytest.Pytester, keep: Path) -> None:
    stored = store_rows(pytester.path / "s.sqlite")
    saved = json.loads(keep.read_text())
    cell = "test_suite.py::test_cell[toy-512-50]"
    saved["cells"][cell]["scores"][1] = 1.5
    keep.write_text(json.dumps(saved))
    outcome = pytester.runpytest(*TOY, "--lceval-compare", "keep")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    one_line(outcome, f"--lceval-compare: {keep}: cell '{cell}': field 'scores' holds 1.5 at "
                      f"case 1, outside the range 0–1 of its metric string_match_all; save the "
                      f"baseline again with --lceval-save")
    runs = {path.parent.name for path in (pytester.path / "reports").glob("*/results.jsonl")}
    assert runs == {"good", "latest"}  # stopped before its first cell
    assert_kept(pytester, stored)
