"""The bad-input sweep's runs that did not measure everything (issue #50, items 1, 2, 10 and 12):
cells whose test raised (a served model answering HTTP 500, a store on a disk that takes no more
bytes), an xdist worker killed under a cell, ``-x`` after a failing cell, and Ctrl-C or SIGTERM
at each moment of a run besides its cells (there, test_one_verdict's). Each reads every output
that tells the verdict back (the exit status, the terminal's last lceval line,
``summary.md``/``summary.json``, both badges, the JUnit XML, the HTML report,
``reports/latest``), checks they tell one verdict, and that the answers stored before stay in
the store.

Signals are sent by the inner run to itself at a hook (the moment is a concrete point of the
run, not a delay), and every inner run is bounded by a timeout.
"""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeServer, Reply, Seen, byte_encoding, default_answer, models
from run_outputs import read_results
from test_one_verdict import COLOUR, MARK, Told, agree, outputs, told
from toy_suite import SUITE, TOY_TASK

GRID = ["--model", "mock:grep", "--lengths", "256", "--depths", "0,50,100", "--samples", "2",
        "-p", "no:cacheprovider"]
"""Three cells of the toy task, which mock:grep answers."""
SUBPROCESS_TIMEOUT = 300


def answers(store: Path) -> int:
    with sqlite3.connect(store) as db:
        return int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])


def junit_cases(path: Path) -> dict[str, ET.Element]:
    """The JUnit XML's test cases by name."""
    return {case.get("name") or "": case for case in ET.parse(path).getroot().iter("testcase")}


def properties(case: ET.Element) -> dict[str, str]:
    return {prop.get("name") or "": prop.get("value") or "" for prop in case.iter("property")}


@pytest.fixture
def toy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def run_outside(pytester: pytest.Pytester, *args: str,
                file_size: int | None = None) -> subprocess.CompletedProcess[str]:
    """The inner run as its own process (a signal or a rlimit of its own), at most
    SUBPROCESS_TIMEOUT seconds; ``file_size`` caps every file it writes (``ulimit -f``)."""
    def cap() -> None:
        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", *args], cwd=pytester.path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=cap,
        timeout=SUBPROCESS_TIMEOUT, check=False)


def stored_first(toy: pytest.Pytester) -> int:
    """A good run of the first cell: the answers every bad run below must leave in the store."""
    toy.runpytest(*GRID, "--depths", "0", "--lceval-store", "s.sqlite",
                  "--lceval-run", "first").assert_outcomes(passed=1)
    return answers(toy.path / "s.sqlite")


# -- item 10: a cell that errored is a failed cell ---------------------------------------------


@pytest.fixture
def failing_server() -> Iterator[FakeServer]:
    """A served model that answers four generation requests, then HTTP 500 forever."""
    answered = []

    def answer(request: Seen) -> Reply:
        if request.path.endswith("/models"):
            return models({"id": "served", "max_model_len": 8192})
        answered.append(request)
        if len(answered) > 4:
            return Reply(500, {"error": {"message": "the engine died"}})
        return default_answer(request)

    with FakeServer(answer).running() as server:
        yield server


@pytest.mark.bad_input("server-http-500-mid-run")
def test_cells_a_server_failed_are_failed_cells_everywhere(
        toy: pytest.Pytester, failing_server: FakeServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Four cells answered, then HTTP 500 after a retry: the five cells that raised are failed
    cells in every output, each named with its error; the four answers stay stored."""
    tiktoken = pytest.importorskip("tiktoken")
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: byte_encoding())
    outcome = toy.runpytest(
        *GRID, "--samples", "1", "--lengths", "256,512,1k", "--model", "openai:served",
        f"--lceval-base-url={failing_server.url}", "--lceval-tokenizer=tiktoken:bytes_test",
        "--lceval-retries", "1", "--lceval-lookahead", "0", "--lceval-threshold", "0",
        "--lceval-store", "s.sqlite", *outputs("served"))
    outcome.assert_outcomes(passed=4, failed=5)
    said = told(toy, "served", outcome.ret, outcome.stdout.str())
    agree(said, "failed", "5 of 9 cells failed", failed_cells=5)
    assert said.badge[0] == "44% (4/9)"
    cells = json.loads((toy.path / "reports" / "served" / "summary.json").read_text())["cells"]
    errored = [cell for cell in cells if cell["reason"].startswith("errored: ")]
    assert len(errored) == 5 and all(cell["outcome"] == "failed" for cell in errored)
    assert all("HTTP 500" in cell["reason"] and "the engine died" in cell["reason"]
               for cell in errored), errored
    summary = (toy.path / "reports" / "served" / "summary.md").read_text(encoding="utf-8")
    worst = [line for line in summary.splitlines() if "| FAIL: errored: " in line]
    assert len(worst) == 5 and all(line.endswith("| not measured |") for line in worst), summary
    rows = {row["nodeid"]: row for row in read_results(toy, "served")}
    assert len(rows) == 9 and sum(row["outcome"] == "failed" for row in rows.values()) == 5
    for name, case in junit_cases(toy.path / "served.xml").items():
        if name.startswith("test_cell["):
            failed = case.find("failure") is not None
            assert properties(case)["lceval_outcome"] == ("failed" if failed else "passed")
    assert answers(toy.path / "s.sqlite") == 4


@pytest.mark.bad_input("store-disk-takes-no-more-bytes")
def test_cells_the_store_could_not_keep_are_failed_cells(toy: pytest.Pytester) -> None:
    """``ulimit -f``: the store's files may not grow past 96 KiB, so SQLite fails each later
    write with a disk I/O error; those cells are failed cells, the run fails, and what was
    stored before stays."""
    before = stored_first(toy)
    done = run_outside(toy, *GRID, "--lengths", "256,512,1k", "--lceval-lookahead", "0",
                       "--lceval-store", "s.sqlite", "--lceval-run", "full",
                       "--junitxml=full.xml", file_size=96 * 1024)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout
    last = [line for line in done.stdout.splitlines() if line.startswith("lceval: ")][-1]
    tests = done.stdout.strip().splitlines()[-1]  # pytest's own: '7 failed, 2 passed in 9s'
    failed, passed = (int(tests.split(f" {word}")[0].split()[-1]) for word in ("failed",
                                                                              "passed"))
    assert failed >= 1 and passed >= 1, tests
    assert last.startswith(f"lceval: pytest-lceval {failed} of {failed + passed} cells failed: "
                           f"pass rate {100 * passed / (failed + passed):.0f}% "
                           f"({passed}/{failed + passed})"), last
    folder = toy.path / "reports" / "full"
    data = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert data["outcome"] == "failed" and data["headline"].startswith("pytest-lceval ❌ ")
    reasons = [cell["reason"] for cell in data["cells"] if cell["outcome"] == "failed"]
    assert len(reasons) == failed
    assert all("StoreError" in reason and "disk I/O error" in reason for reason in reasons)
    assert COLOUR["failed"] in (folder / "badge.svg").read_text(encoding="utf-8")
    assert int(ET.parse(toy.path / "full.xml").getroot().find("testsuite").get("failures")) \
        == failed  # type: ignore[union-attr]
    assert answers(toy.path / "s.sqlite") >= before


# -- item 2: a worker lost under a cell ----------------------------------------------------------

KILL_UNDER_THE_MIDDLE_CELL = """
import os
import signal


def pytest_runtest_call(item):
    if item.nodeid.endswith("[toy-256-50]") and os.environ.get("PYTEST_XDIST_WORKER"):
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies in the middle of the cell
"""


@pytest.mark.bad_input("xdist-worker-killed")
def test_a_cell_lost_with_its_worker_is_named_and_the_run_incomplete(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TOY_TASK + KILL_UNDER_THE_MIDDLE_CELL)
    pytester.makepyfile(test_suite=SUITE)
    lost = "test_suite.py::test_cell[toy-256-50]"
    outcome = pytester.runpytest_subprocess(*GRID, *outputs("lost"), "-n", "2",
                                            "--lceval-store", "s.sqlite",
                                            timeout=SUBPROCESS_TIMEOUT)
    said = told(pytester, "lost", outcome.ret, outcome.stdout.str())
    agree(said, "incomplete", f"incomplete, 1 of 3 selected tests not run (lost with a crashed "
                              f"worker: {lost})")
    data = json.loads((pytester.path / "reports" / "lost" / "summary.json").read_text())
    assert data["verdict"]["lost"] == [lost]
    cases = junit_cases(pytester.path / "lost.xml")
    own = cases["test_cell[toy-256-50]"]
    assert own.find("error") is not None or own.find("failure") is not None
    assert properties(own)["lceval_outcome"] == "lost"
    assert lost in (cases["complete"].find("failure").get("message") or "")  # type: ignore
    page = (pytester.path / "lost.html").read_text(encoding="utf-8")
    assert "toy-256-50" in page.partition('id="results-table"')[2]  # a row of its own
    assert answers(pytester.path / "s.sqlite") >= 4  # the other two cells' answers


# -- item 12: stopped before the last selected test ----------------------------------------------


@pytest.mark.parametrize("stop", [["-x"], ["--maxfail", "1"]], ids=["x", "maxfail"])
@pytest.mark.bad_input("exitfirst-after-a-failed-cell")
def test_a_run_stopped_after_a_failed_cell_is_incomplete(toy: pytest.Pytester,
                                                         stop: list[str]) -> None:
    """The middle cell fails (the mock forgets 40-60 % depth) and pytest stops: incomplete,
    exit 2, as the docs' table says, in every output."""
    outcome = toy.runpytest(*GRID, "--model", "mock:grep?miss=40-60", "--lengths", "256,512",
                            *stop, *outputs("stop"))
    outcome.assert_outcomes(passed=1, failed=1)
    said = told(toy, "stop", outcome.ret, outcome.stdout.str())
    agree(said, "incomplete", "incomplete, 4 of 6 selected tests not run (stopping after 1 "
                              "failures); 1 of 2 cells failed", failed_cells=1)


# -- item 1: Ctrl-C and SIGTERM at any moment ----------------------------------------------------

SIGNAL_AT = """
import os
import signal

import pytest

SIGNAL = signal.{signal}


def send():
    if not os.path.exists("signalled"):
        open("signalled", "w").close()
        os.kill(os.getpid(), SIGNAL)

{hook}
"""
MOMENTS = {
    "collection": "def pytest_itemcollected(item):\n    send()\n",
    "reports": "def pytest_lceval_session_finish(config):\n    send()\n",
    "after-the-verdict": ("@pytest.hookimpl(trylast=True)\n"
                          "def pytest_terminal_summary(terminalreporter):\n    send()\n"),
    "unconfigure": "def pytest_unconfigure(config):\n    send()\n",
}


def signalled_run(pytester: pytest.Pytester, moment: str,
                  name: str = "SIGINT") -> tuple[list[str], Told]:
    """The run signalled at ``moment``: the lines that say a signal was received, and the
    verdict as every output tells it (the terminal's from its last lceval line besides those)."""
    pytester.makeconftest(TOY_TASK + SIGNAL_AT.format(signal=name, hook=MOMENTS[moment]))
    pytester.makepyfile(test_suite=SUITE)
    done = run_outside(pytester, *GRID, *outputs("sig"), "--lceval-store", "s.sqlite")
    assert (pytester.path / "signalled").exists()
    assert "Traceback" not in done.stdout and "INTERNALERROR" not in done.stdout, done.stdout
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout
    received = [line for line in done.stdout.splitlines() if " received " in line]
    rest = "\n".join(line for line in done.stdout.splitlines() if line not in received)
    return received, told(pytester, "sig", done.returncode, rest)


def agree_incomplete(said: Told, verdict: str) -> None:
    """Every output tells the incomplete verdict ``verdict`` (the headline's words before ':
    pass rate'): what ``agree`` checks of a run whose tests all ran."""
    assert said.terminal.startswith(f"pytest-lceval {verdict}: pass rate "), said.terminal
    headline = said.terminal.removeprefix("pytest-lceval ")
    assert said.markdown == headline and said.html == said.terminal
    assert (said.mark, said.badge[1], said.json_outcome) == (MARK["incomplete"],
                                                             COLOUR["incomplete"], "incomplete")
    assert said.badge[0].startswith("incomplete, ")
    assert said.junit_failures == 1  # lceval-run::complete
    assert "interrupted" in said.pytest_line or "not run" in said.pytest_line, said.pytest_line
    assert not said.latest_is_this_run


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
@pytest.mark.bad_input("ctrl-c-while-reports-are-written", "sigterm-while-reports-are-written")
def test_a_signal_while_the_reports_are_written_makes_every_report_incomplete(
        pytester: pytest.Pytester, name: str) -> None:
    received, said = signalled_run(pytester, "reports", name)
    said_name, again = ("Ctrl-C (SIGINT)", "Ctrl-C again") if name == "SIGINT" else \
        ("SIGTERM", "a second SIGTERM")
    assert received == [f"lceval: {said_name} received while the reports are written: "
                        f"finishing them, with the verdict incomplete ({again} ends the process "
                        f"at once)"]
    agree_incomplete(said, f"incomplete (interrupted: {said_name} while the reports were "
                           f"written)")
    assert said.badge[0] == "incomplete, 100% (3/3)"
    folder = pytester.path / "reports" / "sig"
    assert (folder / "heatmap-toy-toy.png").exists()  # the reports begun are finished
    assert answers(pytester.path / "s.sqlite") == 6


@pytest.mark.bad_input("ctrl-c-during-collection")
def test_ctrl_c_during_collection_tells_the_incomplete_verdict(
        pytester: pytest.Pytester) -> None:
    received, said = signalled_run(pytester, "collection")
    assert received == []  # pytest's own interruption: "KeyboardInterrupt" and where
    agree_incomplete(said, "incomplete (interrupted: Ctrl-C (SIGINT))")
    assert said.badge[0] == "incomplete, no cells judged"


@pytest.mark.parametrize("moment", ["after-the-verdict", "unconfigure"])
@pytest.mark.bad_input("ctrl-c-after-the-verdict")
def test_ctrl_c_after_the_verdict_finishes_its_reports_as_decided(
        pytester: pytest.Pytester, moment: str) -> None:
    """Every report was written (or is being finished) with the verdict: they stay as they
    are, one line says so, and the run exits 2 as interrupted."""
    received, said = signalled_run(pytester, moment)
    assert received == ["lceval: Ctrl-C (SIGINT) received after the verdict was decided: "
                        "finishing its reports as decided, exit status 2 (Ctrl-C again ends "
                        "the process at once)"]
    assert said.terminal == "pytest-lceval passed: pass rate 100% (3/3), 0 skipped"
    assert (said.markdown, said.mark, said.badge, said.json_outcome) == (
        "passed: pass rate 100% (3/3), 0 skipped", MARK["passed"],
        ("100% (3/3)", COLOUR["passed"]), "passed")
    assert said.junit_failures == 0 and said.latest_is_this_run
