"""The run's plan line, whole-run progress and time estimate (run_plan, report/run_progress)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from toy_suite import SUITE, TOY_TASK

from pytest_lceval.benchmarks.task_haystack.plan import HaystackCell
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.mock import MockBackend
from pytest_lceval.models.options import LoadOptions
from pytest_lceval.models.stored import StoredModel
from pytest_lceval.results.records import GenerateRequest, Generation
from pytest_lceval.run.plan import (
    PlannedCell,
    RunTracker,
    Throughput,
    duration,
    load_prior,
    save_prior,
)
from pytest_lceval.run.progress import CellProgress, StreamBoard, WorkerBoard, short_label
from pytest_lceval.store.database import Store

SLOW_MOCK = """
import time

import pytest

from pytest_lceval.models import mock

DELAY = {delay}


@pytest.fixture(autouse=True)
def _slow_mock(monkeypatch):
    '''mock:grep taking DELAY seconds a case, so that cells have a measurable throughput.'''
    generate = mock.MockBackend.generate

    def slow(self, requests):
        time.sleep(DELAY * len(requests))
        return generate(self, requests)

    monkeypatch.setattr(mock.MockBackend, "generate", slow)
"""
SMALL = ["--model", "mock:grep", "--lengths", "256,512", "--depths", "0,50,100",
         "--samples", "3", "-p", "no:randomly"]
"""6 cells of 3 cases: 3 x 3 x (256 + 512) = 6,912 planned tokens."""


def _suite(pytester: pytest.Pytester, delay: float = 0.0) -> pytest.Pytester:
    """The toy suite; runs with a ``delay`` need ``runpytest_subprocess``: an in-process run
    would patch a copy of the mock module that the loaded backend does not use."""
    pytester.makeconftest(TOY_TASK + SLOW_MOCK.format(delay=delay))
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def _progress_lines(outcome: pytest.RunResult) -> list[str]:
    return [line for line in outcome.outlines if re.match(r"lceval: \d+/\d+ cells", line)]


# -- the plan and the estimate, as numbers ----------------------------------------------------


def _grid() -> dict[str, PlannedCell]:
    recall = [Cell("recall", task, length, depth, 10)
              for task in ("niah", "json_kv") for length in (1024, 2048, 4096)
              for depth in (0.0, 50.0, 100.0)]
    haystack = [HaystackCell("task_haystack", task, 0, None, 4, n_task=10, n_shot=1)
                for task in ("sst2", "boolq")]
    return {f"t[{cell.id}]": PlannedCell.of(cell) for cell in recall + haystack}


def test_plan_line_counts_suites_cells_cases_and_tokens() -> None:
    line = RunTracker(_grid()).plan_line()
    # 18 recall cells x 10 cases, 3 x 10 x (1k + 2k + 4k) x 2 tasks = 430,080 tokens; 2 Task
    # Haystack cells of 4 cases whose token length is only known once measured.
    assert line == ("lceval: plan: 2 suites (recall, task_haystack), 20 cells, 188 cases, "
                    "430.1k tokens + 2 cells whose length is measured as it runs; "
                    "time: estimate after the first cell")


def test_plan_estimate_uses_the_remembered_throughput() -> None:
    prior = Throughput(430_080 / 3600, 2, "2026-11-20")
    line = RunTracker(_grid(), prior).plan_line()
    assert line.endswith("; est. 1 h 0 min (from 119 tok/s measured on 2026-11-20 with -n 2), "
                         "2 cells estimated once one of a kind is measured")


def test_measured_throughput_replaces_the_prior_and_ignores_stored_answers() -> None:
    tracker = RunTracker(_grid(), Throughput(1.0, 1, "2026-01-01"), workers=2)
    ids = list(tracker.plan)
    # A cell answered from the store (no model request) tells nothing about speed.
    tracker.finish(ids[0], {"n": 10, "model_requests": 0, "seconds_model": 0.01,
                            "input_tokens_mean": 1000.0})
    assert tracker.measured is None and tracker.rate == 1.0
    # 10 cases of 1,000 tokens in 20 model-seconds on each of 2 workers: 1,000 tok/s together.
    tracker.finish(ids[1], {"n": 10, "model_requests": 10, "seconds_model": 20.0,
                            "input_tokens_mean": 1000.0})
    assert tracker.measured == pytest.approx(1000.0)
    remaining = sum(cell.tokens or 0 for nodeid, cell in tracker.plan.items()
                    if nodeid not in tracker.done)
    seconds, unknown = tracker.remaining_seconds()
    assert seconds == pytest.approx(remaining / 1000.0) and unknown == 2
    # A Task Haystack cell is timed per cell: the other one of its length costs the same.
    tracker.finish(ids[-1], {"n": 12, "model_requests": 40, "seconds_model": 30.0,
                             "input_tokens_mean": 900.0})
    assert tracker.measured == pytest.approx(1000.0)
    seconds, unknown = tracker.remaining_seconds()
    assert seconds == pytest.approx(remaining / 1000.0 + 30.0 / 2) and unknown == 0
    line = tracker.progress_line(125.0)
    assert line.startswith("lceval: 3/20 cells (15 %), 24/188 cases, 1,000 tok/s, 2 min elapsed, "
                           "ETA ")
    assert line.endswith(f"ETA {duration(seconds)}")


def test_durations_and_the_prior_file(tmp_path: Path) -> None:
    assert [duration(s) for s in (4.4, 59, 61, 3569, 3599, 10_260)] == [
        "4 s", "59 s", "1 min", "59 min", "1 h 0 min", "2 h 51 min"]
    assert load_prior(tmp_path, "m") is None
    save_prior(tmp_path, "m", Throughput(620.5, 2, "2026-11-20"))
    save_prior(tmp_path, "other", Throughput(9.0, 1, "2026-11-21"))
    assert load_prior(tmp_path, "m") == Throughput(620.5, 2, "2026-11-20")
    (tmp_path / "throughput.json").write_text("{not json")
    assert load_prior(tmp_path, "m") is None


def test_cell_labels_on_the_status_line_and_worker_lines() -> None:
    assert short_label("[main] suites/test_recall.py::test_recall[json_kv-4k-50]") == \
        "json_kv-4k-50"
    assert short_label("[gw1] LongScore base ability of kv") == "LongScore base ability of kv"

    def report(progress: CellProgress) -> None:
        progress(1, 2, 50, 0.5)
        progress(2, 2, 100, 1.0)

    assert _worker_log(report) == "[gw0] t[a]: 1/2 cases, 100 tok/s\n"


class _Waiting(MockBackend):
    """mock:grep whose answers take 2.5 s a batch (a slow server, a long prefill)."""

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        time.sleep(2.5)
        return super().generate(requests)


def test_a_cell_waiting_for_the_model_still_shows_progress(tmp_path: Path) -> None:
    """While a batch is out, progress hears every second that the cell waits, and the line
    says for how long; the counts it hears are those of the batches already answered."""
    heard: list[tuple[int, int, int, float]] = []
    model = StoredModel(_Waiting("grep", {}, LoadOptions()), Store(tmp_path / "s.sqlite"),
                        batch_size=2)
    model.generate([GenerateRequest(f"q{i}", 4) for i in range(4)],
                   lambda *counts: heard.append(counts))
    waiting = [counts for counts in heard if counts[0] < 4]
    assert len(waiting) >= 4  # two beats a batch, at least
    assert {done for done, _, _, _ in waiting} == {0, 2}
    assert [seconds for _, _, _, seconds in waiting] == sorted(s for *_, s in waiting)

    def report(progress: CellProgress) -> None:
        time.sleep(1.1)
        progress(0, 2, 0, 1.1)

    assert re.fullmatch(r"\[gw0\] t\[a\]: 0/2 cases, 0 tok/s, waiting 1 s for the model\n",
                        _worker_log(report))


class _Log:
    """An xdist worker's log (not a terminal)."""

    text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def _worker_log(report: Callable[[CellProgress], None]) -> str:
    """What a worker prints to its log while ``report`` drives the progress of cell t[a]."""
    log = _Log()
    progress = CellProgress("[gw0] t[a]", after=0.0, log_every=0.0,
                            board=WorkerBoard(contextlib.nullcontext, log))
    report(progress)
    progress.close()
    return log.text


class _Terminal(_Log):
    def isatty(self) -> bool:
        return True


def test_a_note_is_a_line_of_its_own_on_every_board() -> None:
    """What the model learnt as it loaded (the CPU decoder's probe) is said once: a worker
    prints it on a terminal too, where its cells' lines are silent; a stream ends the line
    being rewritten first."""
    worker = _Terminal()
    board = WorkerBoard(contextlib.nullcontext, worker)
    board.cell("t[a]", "1/2 cases")
    board.note("lceval: CPU decoder: ...")
    assert worker.text == "lceval: CPU decoder: ...\n"
    terminal = _Terminal()
    stream = StreamBoard(terminal)
    stream.cell("t[a]", "1/2 cases")
    stream.note("lceval: CPU decoder: ...")
    assert terminal.text == "\r\x1b[2Kt[a]: 1/2 cases\r\x1b[2Klceval: CPU decoder: ...\n"


# -- the plugin in real runs ------------------------------------------------------------------


def test_plan_line_before_the_first_cell_and_a_line_per_cell(pytester: pytest.Pytester) -> None:
    outcome = _suite(pytester).runpytest(*SMALL)
    outcome.assert_outcomes(passed=6)
    plan = "lceval: plan: 1 suite (toy), 6 cells, 18 cases, 6.9k tokens; " \
           "time: estimate after the first cell"
    assert plan in outcome.outlines
    first = next(i for i, line in enumerate(outcome.outlines) if line.startswith("test_suite.py"))
    assert outcome.outlines.index(plan) < first
    lines = _progress_lines(outcome)
    # 6 cells: fewer than 20, so a line per cell (the last one at the end of the session).
    assert [line.split(" (")[0] for line in lines] == [f"lceval: {n}/6 cells" for n in range(1, 7)]
    assert lines[2].startswith("lceval: 3/6 cells (50 %), 9/18 cases, ")
    assert lines[-1].startswith("lceval: 6/6 cells (100 %), 18/18 cases")


def test_a_log_gets_a_line_every_five_percent_of_cells(pytester: pytest.Pytester) -> None:
    depths = ",".join(str(d) for d in range(0, 100, 5))  # 20 depths x 2 lengths = 40 cells
    args = [*SMALL[:4], "--depths", depths, "--samples", "1", "-p", "no:randomly", "-q"]
    outcome = _suite(pytester).runpytest(*args)
    outcome.assert_outcomes(passed=40)
    done = [int(line.split("/")[0].split()[-1]) for line in _progress_lines(outcome)]
    assert done == list(range(2, 41, 2))


def test_the_estimate_uses_the_measured_throughput(pytester: pytest.Pytester) -> None:
    suite = _suite(pytester, delay=0.01)
    first = suite.runpytest_subprocess(*SMALL)
    first.assert_outcomes(passed=6)
    assert all(" tok/s, " in line for line in _progress_lines(first))
    remembered = json.loads((suite.path / ".lceval" / "throughput.json").read_text())
    rate = remembered["mock:grep"]["tokens_per_second"]
    assert rate > 0 and remembered["mock:grep"]["workers"] == 1

    # Same store: every answer is stored, so nothing is measured and the prior stands.
    second = suite.runpytest_subprocess(*SMALL, "-v")
    second.assert_outcomes(passed=6)
    date = remembered["mock:grep"]["date"]
    second.stdout.fnmatch_lines([
        f"lceval: plan: 1 suite (toy), 6 cells, 18 cases, 6.9k tokens; "
        f"est. {duration(6912 / rate)} (from {rate:,.0f} tok/s measured on {date})"])
    assert not any("tok/s" in line for line in _progress_lines(second))
    assert json.loads((suite.path / ".lceval" / "throughput.json").read_text()) == remembered
    # -v keeps one result line per test, each followed by the run's progress.
    results = [i for i, line in enumerate(second.outlines) if " PASSED " in line]
    assert len(results) == 6
    assert all(re.match(r"lceval: \d/6 cells", second.outlines[i + 1]) for i in results)


def test_a_slow_cell_reports_its_progress_outside_the_capture(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log shows cells that run longer than $LCEVAL_PROGRESS_EVERY seconds; under pytest's
    (default) capture the line used to land in the test's captured stderr and never reach the
    terminal."""
    monkeypatch.setenv("LCEVAL_PROGRESS_EVERY", "1")
    outcome = _suite(pytester, delay=1.1).runpytest_subprocess(
        *SMALL[:2], "--lengths", "256", "--depths", "50", "--samples", "3",
        "--lceval-batch-size", "1")
    outcome.assert_outcomes(passed=1)
    outcome.stdout.re_match_lines(
        [re.escape("[main] test_suite.py::test_cell[toy-256-50]: ") + r"[12]/3 cases, \d+ tok/s"])


def test_under_xdist_the_controller_prints_plan_and_progress(pytester: pytest.Pytester) -> None:
    suite = _suite(pytester, delay=0.01)
    outcome = suite.runpytest_subprocess(*SMALL, "-n", "2", "--lceval-run", "x")
    outcome.assert_outcomes(passed=6)
    outcome.stdout.fnmatch_lines([
        "lceval: plan: 1 suite (toy), 6 cells, 18 cases, 6.9k tokens; "
        "time: estimate after the first cell"])
    lines = _progress_lines(outcome)
    assert [line.split(" (")[0] for line in lines] == [f"lceval: {n}/6 cells" for n in range(1, 7)]
    assert lines[-1].startswith("lceval: 6/6 cells (100 %), 18/18 cases, ")
    assert " tok/s, " in lines[-1]
    assert not (suite.path / "reports" / "x" / ".plan").exists()
    remembered = json.loads((suite.path / ".lceval" / "throughput.json").read_text())
    assert remembered["mock:grep"]["workers"] == 2


def _run_on_a_terminal(pytester: pytest.Pytester, *args: str) -> bytes:
    """Run pytest with its output on a pseudo-terminal of 100 x 30; everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = {**os.environ, "COLUMNS": "100", "LINES": "30", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    child = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                             cwd=pytester.path, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    output = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    assert child.wait(timeout=120) == 0, output.decode(errors="replace")[-3000:]
    return output


@pytest.mark.parametrize(("workers", "delay"), [([], 1.1), (["-n", "2"], 0.01)],
                         ids=["single", "xdist"])
def test_on_a_terminal_the_status_line_sits_below_pytest_output(
        pytester: pytest.Pytester, workers: list[str], delay: float) -> None:
    """Cells of 3.3 s in a single process, so that the running cell's progress shows too."""
    pyte = pytest.importorskip("pyte")
    _suite(pytester, delay=delay)
    output = _run_on_a_terminal(pytester, *SMALL[:2], "--lengths", "256", "--depths", "0,50",
                                "--samples", "3", "--lceval-batch-size", "1", *workers)
    screen = pyte.Screen(100, 30)
    stream = pyte.ByteStream(screen)
    drawn = 0
    # Replay the output up to the end of each redraw of the status line: it is on the row
    # below the cursor, and pytest's own line (where the cursor is) is never overwritten.
    for piece in re.split(rb"(?<=\x1b\[1A)(\x1b\[\d+G)", output):
        stream.feed(piece)
        below = screen.display[screen.cursor.y + 1] if screen.cursor.y + 1 < 30 else ""
        if re.match(rb"\x1b\[\d+G", piece) and below.startswith("lceval: "):
            drawn += 1
            assert re.match(r"lceval: [0-2]/2 cells", below)
            assert not screen.display[screen.cursor.y].startswith("lceval: ")
    assert drawn > 2
    rows = [line.rstrip() for line in screen.display]
    # At the end only lasting lines remain: pytest's dots, then the run's final line.
    status = [row for row in rows if re.match(r"lceval: \d/2 cells", row)]
    assert len(status) == 1 and status[0].startswith("lceval: 2/2 cells (100 %), 6/6 cases, ")
    assert not any(" | " in row for row in rows)
    dots = next(row for row in rows if row.startswith(("test_suite.py", "..")))
    assert re.fullmatch(r"(test_suite\.py )?\.\. +\[100%\]", dots)
    if not workers:
        # The running cell's progress showed on the status line while it ran.
        assert re.search(rb"\| toy-256-\d+: 3/3", output)
