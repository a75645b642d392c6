"""One verdict, told the same everywhere (issue #33, items 1, 2, 4 and 5).

Real runs (pytester, the mock model, the toy suite) through each outcome a run can have: all
passed; a cell failed; only a suite gate failed, for each built-in suite gate; interrupted by
SIGINT; SIGTERM to the controller of ``-n 2``; every cell skipped. For each, every output that
tells the verdict is read back and must tell the same one: the exit status, the terminal's last
lceval line, the badge's colour and text, the JUnit XML's failure count and gate test cases,
summary.md's headline and gates, the HTML report's headline and Gates section, and where
``reports/latest`` points. Then the baseline (item 4) and a gate asked for a suite without cells
(item 5): one line, the exit status, the baseline file unchanged.
"""

from __future__ import annotations

import json
import re
import signal
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from toy_suite import SUITE, TOY_TASK

from pytest_lceval.report.badge import FAIL_COLOUR, INCOMPLETE_COLOUR, PASS_COLOUR
from pytest_lceval.results.cells import CellResult, Judgement
from pytest_lceval.verdicts.verdict import GateResult, decide

GRID = ["--lengths", "256", "--depths", "0,50", "--samples", "2", "-p", "no:cacheprovider"]
"""Two cells of the toy task; mock:grep answers both, mock:grep?miss=40-60 fails the 50 % one."""
GOOD, MIDDLE_BLIND = "mock:grep", "mock:grep?miss=40-60"
EXIT = {"passed": pytest.ExitCode.OK, "failed": pytest.ExitCode.TESTS_FAILED,
        "incomplete": pytest.ExitCode.INTERRUPTED}
COLOUR = {"passed": PASS_COLOUR, "failed": FAIL_COLOUR, "incomplete": INCOMPLETE_COLOUR}
MARK = {"passed": "✅", "failed": "❌", "incomplete": "⚠️"}


@pytest.fixture
def toy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def outputs(run: str) -> list[str]:
    """What a release job reads: JUnit XML, the HTML report, the run folder under reports/."""
    return ["--lceval-run", run, f"--junitxml={run}.xml", f"--html={run}.html"]


# -- reading every output back ----------------------------------------------------------------


@dataclass(frozen=True)
class Told:
    """The verdict as each output tells it."""

    exit_status: int
    terminal: str
    """The terminal's last lceval line, without 'lceval: '."""
    markdown: str
    """summary.md's headline, without '### ' and its mark."""
    mark: str
    html: str
    """The HTML report's headline."""
    badge: tuple[str, str]
    """The run badge's text and colour."""
    junit_failures: int
    junit_gates: dict[tuple[str, str], str]
    """(suite, gate) -> 'passed', 'failure' or 'skipped', from the JUnit test cases."""
    html_gates: dict[tuple[str, str], str]
    """(suite, gate) -> the Gates section's verdict."""
    markdown_gates: dict[tuple[str, str], str]
    latest_is_this_run: bool
    json_outcome: str
    """summary.json's outcome; its headline is summary.md's (checked in ``told``)."""
    pytest_line: str
    """pytest's own last line ('4 passed, 1 gate failed in 3.21s')."""


def told(pytester: pytest.Pytester, run: str, exit_status: int, stdout: str) -> Told:
    folder = pytester.path / "reports" / run
    ours = [line for line in stdout.splitlines() if line.startswith("lceval: pytest-lceval ")]
    last = [line for line in stdout.splitlines() if line.startswith("lceval: ")][-1]
    assert ours and last == ours[-1], "the verdict is the terminal's last lceval line"
    first = (folder / "summary.md").read_text(encoding="utf-8").splitlines()[0]
    mark, _, markdown = first.removeprefix("### pytest-lceval ").partition(" ")
    page = (pytester.path / f"{run}.html").read_text(encoding="utf-8")
    svg = (folder / "badge.svg").read_text(encoding="utf-8")
    root = ET.parse(pytester.path / f"{run}.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    gates = {}
    for case in root.iter("testcase"):
        classname = case.get("classname") or ""
        if classname.startswith("lceval-gates."):
            kind = "failure" if case.find("failure") is not None else \
                "skipped" if case.find("skipped") is not None else "passed"
            gates[(classname.removeprefix("lceval-gates."), case.get("name") or "")] = kind
    section = page.partition('<div class="lceval gates">')[2].partition("</table>")[0]
    html_gates = {(suite_, name): status for name, suite_, status in re.findall(
        r"<tr class=\"\w+\"><td>([^<]*)</td><td>([^<]*)</td><td>[^<]*</td><td>[^<]*</td>"
        r"<td>([^<]*)</td></tr>", section)}
    markdown_gates = {}
    for line in (folder / "summary.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.split(" | ")]
        found = re.match(r"(✅|❌)( not applied:)?", cells[-1])
        if len(cells) == 4 and found:
            markdown_gates[(cells[1], cells[0].removeprefix("| "))] = found.group(0)
    latest = pytester.path / "reports" / "latest"
    data = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert f"### {data['headline']}" == first
    return Told(
        exit_status, last.removeprefix("lceval: "),
        markdown.removeprefix("pytest-lceval ").replace("`", ""),  # names quoted as code
        mark, re.findall(r"<p class='\w+'><b>([^<]*)</b></p>", page)[0],
        (re.findall(r">([^<]+)</text>", svg)[-1], re.findall(r'<path fill="(#\w+)"', svg)[1]),
        int(suite.get("failures") or 0), gates, html_gates, markdown_gates,
        latest.is_symlink() and latest.resolve() == folder.resolve(), data["outcome"],
        stdout.strip().splitlines()[-1])


def agree(said: Told, outcome: str, verdict: str, failed_cells: int = 0,
          gates: dict[tuple[str, str], str] | None = None) -> None:
    """Every output tells ``outcome``, with the words ``verdict`` (the headline's verdict part,
    before ': pass rate'), ``failed_cells`` and each gate's status ('passed', 'FAILED',
    'not applied, FAILED' ...)."""
    gates = gates or {}
    assert said.exit_status == EXIT[outcome]
    headline = said.terminal.removeprefix("pytest-lceval ")
    assert headline.startswith(f"{verdict}: pass rate "), headline
    assert said.markdown == headline and said.html == said.terminal
    assert said.mark == MARK[outcome]
    text, colour = said.badge
    assert colour == COLOUR[outcome]
    failed_gates = sum("FAILED" in status for status in gates.values())
    assert text.startswith("incomplete, ") == (outcome == "incomplete")
    assert (f"{failed_gates} gate" in text) == bool(failed_gates)
    assert said.junit_failures == failed_cells + failed_gates + (outcome == "incomplete")
    counted = re.search(r"(\d+) gates? failed", said.pytest_line)
    assert int(counted.group(1) if counted else 0) == failed_gates, said.pytest_line
    assert ("not run" in said.pytest_line) == (outcome == "incomplete"), said.pytest_line
    junit = {"passed": "passed", "FAILED": "failure", "not applied": "skipped",
             "not applied, FAILED": "failure"}
    assert said.junit_gates == {key: junit[status] for key, status in gates.items()}
    assert said.html_gates == gates
    assert {key: ("❌" if "FAILED" in status else "✅") + (" not applied:" if "not applied"
                                                          in status else "")
            for key, status in gates.items()} == said.markdown_gates
    assert said.latest_is_this_run == (outcome != "incomplete")
    assert said.json_outcome == outcome


def run(toy: pytest.Pytester, name: str, *args: str) -> Told:
    outcome = toy.runpytest(*GRID, *outputs(name), *args)
    return told(toy, name, outcome.ret, outcome.stdout.str())


# -- the outcomes -------------------------------------------------------------------------------


def test_all_passed(toy: pytest.Pytester) -> None:
    said = run(toy, "all", "--model", GOOD, "--lceval-min-pass-rate", "0.5")
    agree(said, "passed", "passed", gates={("toy", "pass_rate"): "passed"})
    assert said.badge[0] == "100% (2/2)"


def test_a_cell_failed(toy: pytest.Pytester) -> None:
    said = run(toy, "cell", "--model", MIDDLE_BLIND)
    agree(said, "failed", "1 of 2 cells failed", failed_cells=1)
    assert said.badge[0] == "50% (1/2)"


def test_only_the_pass_rate_gate_failed_it_named_a_suite_without_cells(
        toy: pytest.Pytester) -> None:
    said = run(toy, "rate", "--model", GOOD, "--lceval-min-pass-rate", "longqa=0.9")
    agree(said, "failed", "1 suite gate failed: pass_rate (longqa)",
          gates={("longqa", "pass_rate"): "not applied, FAILED"})
    assert said.badge[0] == "1 gate failed, 100% (2/2)"
    summary = (toy.path / "reports" / "rate" / "summary.md").read_text()
    assert "not applied: --lceval-min-pass-rate longqa=0.9 names it, but no cell of longqa " \
           "was selected in this run" in summary


def test_only_the_pass_rate_gate_failed_on_failed_cells(toy: pytest.Pytester) -> None:
    """The pass-rate gate beside the cells it counts: the cell and the gate both fail it."""
    said = run(toy, "rate2", "--model", MIDDLE_BLIND, "--lceval-min-pass-rate", "0.9")
    agree(said, "failed", "1 of 2 cells failed; 1 suite gate failed: pass_rate (toy)",
          failed_cells=1, gates={("toy", "pass_rate"): "FAILED"})


def test_only_the_longscore_mean_gate_failed(toy: pytest.Pytester) -> None:
    said = run(toy, "lc", "--model", MIDDLE_BLIND, "--lengths", "256,512",
               "--longscore-base-lengths", "256", "--lceval-threshold", "0",
               "--longscore-mean-min", "10")
    agree(said, "failed", "1 suite gate failed: longscore_mean (toy)",
          gates={("toy", "longscore_mean"): "FAILED"})


def save_base(toy: pytest.Pytester, *args: str) -> Path:
    outcome = toy.runpytest(*GRID, "--model", GOOD, "--lceval-run", "base", "--lceval-save",
                            "base", *args)
    assert outcome.ret == pytest.ExitCode.OK
    return toy.path / "reports" / "baselines" / "base.json"


def test_only_the_compare_coverage_gate_failed(toy: pytest.Pytester) -> None:
    save_base(toy, "--depths", "0")
    said = run(toy, "cover", "--model", GOOD, "--lceval-compare", "base")
    failed = {key: status for key, status in said.html_gates.items() if "FAILED" in status}
    assert failed == {("toy", "baseline_coverage"): "FAILED"}
    agree(said, "failed", "0 regressed against base; 1 suite gate failed: "
          "baseline_coverage (toy)", gates=said.html_gates)
    assert said.terminal.startswith("pytest-lceval 0 regressed against base; 1 suite gate")
    page = (toy.path / "cover.html").read_text(encoding="utf-8")
    assert "pass rate 100%; suite gate failed: baseline_coverage</p>" in page  # toy's section


def test_only_the_effective_length_gate_failed(toy: pytest.Pytester) -> None:
    """At 2 cases a cell no drop is significant, so every cell passes; the effective length
    still fell (the 50 % cells lost every case), and its gate fails the run alone."""
    save_base(toy, "--lengths", "256,512")
    said = run(toy, "eff", "--model", MIDDLE_BLIND, "--lengths", "256,512",
               "--lceval-threshold", "0", "--lceval-compare", "base",
               "--lceval-effective-gate", "suite")
    failed = {key: status for key, status in said.html_gates.items() if "FAILED" in status}
    assert failed == {("toy", "effective_length"): "FAILED"}
    agree(said, "failed", "0 regressed against base; 1 suite gate failed: "
          "effective_length (toy)", gates=said.html_gates)


def test_every_cell_skipped_fails_the_judged_cells_gate(toy: pytest.Pytester) -> None:
    said = run(toy, "skip", "--model", GOOD, "--lengths", "16k,32k")
    agree(said, "failed", "1 suite gate failed: judged_cells (toy)",
          gates={("toy", "judged_cells"): "FAILED"})
    assert said.badge[0] == "1 gate failed, no cells judged"


SIGINT_AFTER_FIRST = """
import os
import signal


def pytest_runtest_logfinish(nodeid, location):
    if nodeid.endswith("[toy-256-0]"):
        os.kill(os.getpid(), signal.SIGINT)
"""


def test_interrupted_by_sigint(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TOY_TASK + SIGINT_AFTER_FIRST)
    pytester.makepyfile(test_suite=SUITE)
    outcome = pytester.runpytest(*GRID, *outputs("int"), "--model", GOOD, "--depths",
                                 "0,25,50,75", no_reraise_ctrlc=True)
    said = told(pytester, "int", outcome.ret, outcome.stdout.str())
    agree(said, "incomplete", "incomplete, 3 of 4 selected tests not run (interrupted: Ctrl-C "
          "(SIGINT))")
    assert said.badge[0] == "incomplete, 100% (1/1)"


SIGTERM_FROM_A_WORKER = """
import os
import signal
import time


def pytest_runtest_call(item):
    time.sleep(0.5)  # cells long enough for the signal to find some not run


def pytest_runtest_logfinish(nodeid, location):
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw0" and not os.path.exists("signalled"):
        open("signalled", "w").close()
        os.kill(os.getppid(), signal.SIGTERM)  # the worker's parent: the xdist controller
"""


def test_sigterm_to_the_controller_of_n_2(pytester: pytest.Pytester) -> None:
    """SIGTERM (a cancelled CI job) to the controller: one line, the workers stop, no teardown
    noise, and the run is incomplete everywhere."""
    pytester.makeconftest(TOY_TASK + SIGTERM_FROM_A_WORKER)
    pytester.makepyfile(test_suite=SUITE)
    outcome = pytester.runpytest_subprocess(
        *GRID, *outputs("term"), "--model", GOOD, "--lengths", "256,512",
        "--depths", "0,20,40,60,80,100", "-n", "2", timeout=300)
    text = outcome.stdout.str() + outcome.stderr.str()
    said = told(pytester, "term", outcome.ret, outcome.stdout.str())
    assert text.count("SIGTERM received") == 1
    for noise in ("PluggyTeardownRaisedWarning", "OSError", "cannot send", "crashed"):
        assert noise not in text
    assert re.search(r"incomplete, \d+ of 12 selected tests not run \(interrupted: SIGTERM\)",
                     said.terminal)
    verdict = said.terminal.removeprefix("pytest-lceval ").partition(": pass rate")[0]
    agree(said, "incomplete", verdict)


def test_the_verdicts_outcome_reasons_and_exit_status() -> None:
    """The rules every output renders, without a run: a gate that failed fails a run whose
    cells all passed; cells not run make it incomplete whatever else happened (its exit status
    2, whatever pytest's below it); pytest's own higher status stands."""
    def cell(outcome: str) -> CellResult:
        return CellResult("t", "toy", "toy", 256, None, {}, "m", "f", 42, "fixtures",
                          outcome=outcome)

    gate = GateResult("toy", Judgement("pass_rate", False, "toy: 0 of 1", rule="r"))
    ok = pytest.ExitCode.OK
    assert decide([cell("passed")], []).exit_status(ok) == ok
    failed = decide([cell("passed")], [gate])
    assert (failed.outcome, failed.reasons()) == ("failed", ["1 suite gate failed: pass_rate "
                                                             "(toy)"])
    assert failed.exit_status(ok) == pytest.ExitCode.TESTS_FAILED
    stopped = decide([cell("failed")], [], selected=4, not_run=3,
                     stopped="stopping after 1 failures")
    assert stopped.outcome == "incomplete" and stopped.reasons() == [
        "incomplete, 3 of 4 selected tests not run (stopping after 1 failures)",
        "1 of 1 cells failed"]
    # -x ends pytest's run with 1; incomplete exits 2 whatever pytest said
    assert stopped.exit_status(pytest.ExitCode.TESTS_FAILED) == pytest.ExitCode.INTERRUPTED
    assert stopped.exit_status(pytest.ExitCode.INTERNAL_ERROR) == \
        pytest.ExitCode.INTERNAL_ERROR
    assert decide([cell("passed")], [], selected=2, not_run=1).exit_status(ok) == \
        pytest.ExitCode.INTERRUPTED
    last = decide([cell("failed")], [], selected=1, not_run=0, stopped="stopping after 1 "
                  "failures")  # -x on the last cell: every cell ran
    assert last.outcome == "failed"


# -- item 4: the baseline is never lost or misread ----------------------------------------------


def one_error_line(outcome: pytest.RunResult) -> str:
    """The one line a start-up error prints (no traceback), and that no cell ran."""
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in outcome.stderr.lines if "pytest-lceval" in line]
    assert len(lines) == 1 and "Traceback" not in outcome.stderr.str()
    assert "test_suite.py" not in outcome.stdout.str()
    return lines[0]


def test_saving_over_the_baseline_compared_with_is_refused(toy: pytest.Pytester) -> None:
    path = save_base(toy)
    before = path.read_bytes()
    line = one_error_line(toy.runpytest(*GRID, "--model", MIDDLE_BLIND, "--lceval-save", "base",
                                        "--lceval-compare", "base"))
    assert "--lceval-save base would replace the baseline this run is compared with" in line
    assert "--lceval-save base-next" in line
    assert path.read_bytes() == before
    line = one_error_line(toy.runpytest(*GRID, "--model", MIDDLE_BLIND, "--lceval-save",
                                        str(path), "--lceval-compare", "base"))
    assert "would replace the baseline" in line and path.read_bytes() == before


def test_two_saves_are_refused_at_start_up(toy: pytest.Pytester) -> None:
    line = one_error_line(toy.runpytest(*GRID, "--model", GOOD, "--lceval-save", "a",
                                        "--lceval-save", "b"))
    assert "--lceval-save is given 2 times (a, b); a run saves one baseline" in line
    assert not (toy.path / "reports" / "baselines").exists()


CELL = "test_suite.py::test_cell[toy-256-0]"


@pytest.mark.parametrize(("edit", "said"), [
    (lambda run, cell: cell.pop("scores"), f"cell '{CELL}': field 'scores' is missing"),
    (lambda run, cell: cell.pop("case_keys"), f"cell '{CELL}': field 'case_keys' is missing"),
    (lambda run, cell: run.pop("seed"), "field 'seed' is missing"),
    (lambda run, cell: cell["scores"].__setitem__(1, "NaN"),
     f"cell '{CELL}': field 'scores' holds 'NaN' at case 1, not a finite number"),
    (lambda run, cell: cell["scores"].__setitem__(0, "oops"),
     f"cell '{CELL}': field 'scores' holds 'oops' at case 0, not a finite number"),
    (lambda run, cell: cell["scores"].__setitem__(0, float("nan")),
     f"cell '{CELL}': field 'scores' holds nan at case 0, not a finite number"),
    (lambda run, cell: cell.__setitem__("n", "2"), f"cell '{CELL}': field 'n' is '2', not a "
                                                   f"whole number"),
], ids=["no-scores", "no-case-keys", "no-seed", "nan-string", "oops", "nan", "n-string"])
def test_a_hand_edited_baseline_is_refused_naming_file_cell_and_field(
        toy: pytest.Pytester, edit: object, said: str) -> None:
    path = save_base(toy)
    data = json.loads(path.read_text())
    edit(data, data["cells"][CELL])  # type: ignore[operator]
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    line = one_error_line(toy.runpytest(*GRID, "--model", GOOD, "--lceval-compare", "base"))
    assert f"{path}: {said}; save the baseline again with --lceval-save" in line
    assert path.read_bytes() == before


# -- item 5: a gate asked for and never applied ---------------------------------------------------


def test_a_gate_for_a_suite_without_cells_is_said_and_fails_only_when_named(
        toy: pytest.Pytester) -> None:
    named = toy.runpytest(*GRID, "--model", GOOD, "--lceval-min-pass-rate", "longqa=0.9",
                          "--lceval-run", "named")
    assert named.ret == pytest.ExitCode.TESTS_FAILED
    named.stdout.fnmatch_lines(["lceval: suite gate NOT APPLIED, FAILED pass_rate: longqa: not "
                                "applied: --lceval-min-pass-rate longqa=0.9 names it, but no "
                                "cell of longqa was selected in this run*"])
    every = toy.runpytest(*GRID, "--model", GOOD, "--lceval-min-pass-rate", "0.9",
                          "--lceval-run", "every")
    assert every.ret == pytest.ExitCode.OK  # the default rate asks for the suites that ran
    assert "NOT APPLIED" not in every.stdout.str()
    lc = toy.runpytest(*GRID, "--model", GOOD, "--longscore-mean-min", "10",
                       "--lceval-run", "lc")
    assert lc.ret == pytest.ExitCode.OK  # no long cell: LongScore's gate is not applied
    lc.stdout.fnmatch_lines(["lceval: suite gate NOT APPLIED longscore_mean: toy: not applied: "
                             "the suite has no long cells LongScore judges"])
    summary = (toy.path / "reports" / "lc" / "summary.md").read_text()
    assert "| longscore_mean | toy |" in summary and "✅ not applied: toy: not applied" in summary


def test_sigint_and_sigterm_handlers_are_left_as_found(toy: pytest.Pytester) -> None:
    """The SIGTERM handler lives for the session only: an in-process run leaves Python's own."""
    before = signal.getsignal(signal.SIGTERM)
    toy.runpytest(*GRID, "--model", GOOD)
    assert signal.getsignal(signal.SIGTERM) == before
