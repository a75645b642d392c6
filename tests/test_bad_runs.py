"""The bad-input sweep's second part: inputs whose harm shows over a whole run rather than in one
error line. Two runs started together, a comparison that compares almost nothing, every cell
longer than the model's window, a threshold given twice, a judge that is the model under test,
a judge nobody asks, a judge whose server trickles, JUnit XML on pytest's defaults. Each test
reproduces what a user did and checks the line they see, the exit status, and that stored
answers stay.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeServer, Reply, Seen, byte_encoding, default_answer, models
from toy_suite import JUDGED_SUITE, JUDGED_TASK, SUITE, TOY_TASK

GRID = ["--model", "mock:grep", "--lengths", "256", "--depths", "50", "--samples", "2",
        "-p", "no:randomly"]
SAME_SECOND = """
import time

import pytest_lceval.plugin


class _SameSecond:
    '''Every run's clock reads the same second: runs started together, made certain.'''

    def __getattr__(self, name):
        return getattr(time, name)

    def strftime(self, layout, *args):
        return "20260101-120000" if layout == "%Y%m%d-%H%M%S" else time.strftime(layout, *args)


pytest_lceval.plugin.time = _SameSecond()
"""
COUNT_LOADS = """
import pytest


@pytest.hookimpl(wrapper=True)
def pytest_lceval_make_backend(spec, options):
    with open("loads.txt", "a") as loads:
        loads.write(spec + "\\n")
    return (yield)
"""


def answers(store: Path) -> int:
    import sqlite3

    with sqlite3.connect(store) as db:
        return int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])


def results(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


@pytest.fixture
def toy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


# -- item 2: runs that share a second -------------------------------------------------------


@pytest.mark.bad_input("two-runs-in-one-second", "two-saves-of-one-baseline")
def test_two_runs_started_together_keep_their_folders_and_baselines_apart(
        toy: pytest.Pytester) -> None:
    """Started together (their clocks read the same second), two runs with other seeds each
    report their own cell, and the second --lceval-save=same says it replaced the first's."""
    toy.makeconftest(TOY_TASK + SAME_SECOND)
    runs = [subprocess.Popen(
        [sys.executable, "-m", "pytest", *GRID, "--lceval-seed", str(seed), "--lceval-save",
         "same", "-p", "no:cacheprovider"],
        cwd=toy.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for seed in (1, 2)]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    folders = sorted(path for path in (toy.path / "reports").iterdir()
                     if path.name.startswith("20260101-120000"))
    assert [path.name for path in folders] == ["20260101-120000-mock_grep",
                                                "20260101-120000-mock_grep-2"]
    seeds = sorted(row["seed"] for folder in folders for row in results(folder))
    assert seeds == [1, 2]  # one cell each, each its own run's
    for output in outputs:
        assert "lceval: 1 cells, results and reports in" in output, output
    saved = [line for output in outputs for line in output.splitlines()
             if line.startswith("lceval: saved baseline 'same' (1 cells)")]
    assert len(saved) == 2, outputs
    replacing = [line for line in saved if ", replacing the one run " in line]
    assert len(replacing) == 1, saved
    baseline = json.loads((toy.path / "reports" / "baselines" / "same.json").read_text())
    # it names the other run's folder (whichever finished first: one name begins the other)
    other, = (folder for folder in folders if str(folder) != baseline["run"])
    assert f"replacing the one run {other} saved at" in replacing[0], replacing
    assert len(baseline["cells"]) == 1
    assert not list((toy.path / "reports" / "baselines").glob("*.partial"))


def _point_often(reports: Path, name: str, start: Any) -> None:
    from pytest_lceval.plugin import _point_latest
    start.wait()
    for _ in range(2000):
        _point_latest(reports / "latest", reports / name)


def test_runs_finishing_together_both_move_latest(tmp_path: Path) -> None:
    """Unlink-then-link let the second of two finishing runs fail on the first's new link
    (.ci/run, seed 617232298: exit 1); four processes moving it at once all succeed."""
    import multiprocessing

    names = [f"run-{index}" for index in range(4)]
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(len(names))
    movers = [context.Process(target=_point_often, args=(tmp_path, name, start))
              for name in names]
    for mover in movers:
        mover.start()
    for mover in movers:
        mover.join(timeout=120)
    assert [mover.exitcode for mover in movers] == [0, 0, 0, 0]
    assert (tmp_path / "latest").readlink().name in names
    assert [path.name for path in tmp_path.iterdir()] == ["latest"]  # no link left behind


@pytest.mark.bad_input("save-in-a-reused-run-folder")
def test_a_baseline_holds_only_the_cells_its_run_measured(toy: pytest.Pytester) -> None:
    """A run folder holds one run: a second run naming it is refused before it measures, so no
    save can hold the earlier run's cells, and the earlier run's results stay as they were."""
    store = ["--lceval-store", "s.sqlite"]
    toy.runpytest(*GRID, *store, "--lceval-run", "r").assert_outcomes(passed=1)
    second = toy.runpytest(*GRID, *store, "--lceval-run", "r", "--lengths", "512",
                           "--lceval-save", "b")
    assert second.ret == pytest.ExitCode.USAGE_ERROR
    second.stderr.fnmatch_lines(["ERROR: pytest-lceval: --lceval-run r: * holds the run of "
                                 "mock:grep started *"])
    assert not (toy.path / "reports" / "baselines" / "b.json").exists()
    assert [row["nodeid"] for row in results(toy.path / "reports" / "r")] == [
        "test_suite.py::test_cell[toy-256-50]"]


def test_a_pytest_run_without_cells_leaves_no_run_folder(pytester: pytest.Pytester) -> None:
    """The run folder is made at session start (before xdist's workers hear of it) and removed
    when nothing was written in it: a plain test run with the plugin installed leaves nothing."""
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=1)
    assert not (pytester.path / "reports").exists()


# -- item 3: a comparison of almost nothing ---------------------------------------------------


@pytest.mark.bad_input("compare-with-a-1-cell-baseline")
def test_a_comparison_that_compares_too_little_fails(toy: pytest.Pytester) -> None:
    store = ["--lceval-store", "s.sqlite"]
    toy.runpytest(*GRID, *store, "--lceval-save", "one").assert_outcomes(passed=1)
    stored = answers(toy.path / "s.sqlite")
    wide = [*GRID, *store, "--lengths", "256,512", "--depths", "0,50", "--lceval-compare", "one"]
    compared = toy.runpytest(*wide)
    compared.assert_outcomes(passed=4)
    assert compared.ret == pytest.ExitCode.TESTS_FAILED
    compared.stdout.fnmatch_lines([
        "lceval: suite gate FAILED baseline_coverage: toy: baseline 'one' covers 1 of 4 "
        "measured cells (25% < --lceval-compare-min-coverage 100%); 3 not compared: "
        "toy-256-0, toy-512-0, toy-512-50. Save the baseline again over the cells this run "
        "selects, or lower --lceval-compare-min-coverage"])
    allowed = toy.runpytest(*wide, "--lceval-compare-min-coverage", "0.25")
    assert allowed.ret == pytest.ExitCode.OK
    allowed.stdout.fnmatch_lines(["lceval: suite gate PASSED baseline_coverage: toy: baseline "
                                  "'one' covers 1 of 4 measured cells (25% >= *"])
    assert answers(toy.path / "s.sqlite") >= stored


# -- item 5: what the header, the plan and the gates say --------------------------------------


@pytest.mark.bad_input("lengths-beyond-the-window")
def test_a_run_whose_cells_all_exceed_the_window_is_never_green(toy: pytest.Pytester) -> None:
    outcome = toy.runpytest(*GRID, "--lengths", "16k,32k", "--lceval-store", "s.sqlite")
    outcome.assert_outcomes(skipped=2)
    assert outcome.ret == pytest.ExitCode.TESTS_FAILED
    outcome.stdout.fnmatch_lines([
        "lceval: plan: no cell can run: all 2 selected cells are longer than the model's "
        "8,192-token window (they skip)",
        "lceval: suite gate FAILED judged_cells: toy: none of its 2 selected cells was judged, "
        "so the suite cannot pass: cell length 16384 tokens exceeds the model's context window "
        "of 8192 tokens; cell length 32768 tokens exceeds*"])
    some = toy.runpytest(*GRID, "--lengths", "256,16k", "--lceval-store", "s.sqlite")
    assert some.ret == pytest.ExitCode.OK
    some.stdout.fnmatch_lines(["lceval: plan: 1 suite (toy), 1 cell, 2 cases, 512 tokens; 1 more "
                               "selected cell longer than the model's 8,192-token window "
                               "(they skip)*"])


@pytest.mark.bad_input("threshold-given-twice", "pass-rate-given-twice")
def test_the_header_states_the_thresholds_that_apply(toy: pytest.Pytester) -> None:
    outcome = toy.runpytest(*GRID, "--lceval-threshold", "0.3", "--lceval-threshold", "0.6",
                            "--lceval-threshold", "toy=0.2,toy=0.9", "--lceval-min-pass-rate",
                            "0.5", "--lceval-min-pass-rate", "0.8", "-rs")
    outcome.stdout.fnmatch_lines([
        "lceval: thresholds: 0.6 (--lceval-threshold) for every task, toy=0.9; given twice, the "
        "last wins: 0.3 replaced by 0.6, toy=0.2 replaced by toy=0.9",
        "lceval: suite gate --lceval-min-pass-rate 0.8; given twice, the last wins: 0.5 "
        "replaced by 0.8"])
    default = toy.runpytest(*GRID, "--collect-only")
    default.stdout.fnmatch_lines(["lceval: thresholds: 0.5 (default) for every task"])


@pytest.mark.parametrize(("extra", "loads", "said"), [
    ((), 1, "it shares the model's backend, so the weights load once"),
    (("--chat-template", "on"), 2, "loaded apart, as its options differ from the model's"),
], ids=["shared", "apart"])
@pytest.mark.bad_input("judge-is-the-model")
def test_a_judge_that_is_the_model_under_test_is_said_and_loaded_once(
        pytester: pytest.Pytester, extra: tuple[str, ...], loads: int, said: str) -> None:
    pytester.makeconftest(JUDGED_TASK + COUNT_LOADS)
    pytester.makepyfile(test_judged=JUDGED_SUITE)
    outcome = pytester.runpytest(*GRID, "--lceval-judge", "mock:grep", *extra)
    outcome.stdout.fnmatch_lines([
        f"lceval: --lceval-judge=mock:grep is the model under test: it judges its own answers "
        f"({said})"])
    assert "INTERNALERROR" not in outcome.stdout.str()
    assert (pytester.path / "loads.txt").read_text().splitlines() == ["mock:grep"] * loads


# -- item 10: a judge nobody asks --------------------------------------------------------------


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "two-workers"])
@pytest.mark.bad_input("judge-without-a-key-unused")
def test_a_judge_no_selected_cell_needs_is_not_checked(toy: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      workers: list[str]) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    outcome = toy.runpytest_subprocess(*GRID, "--lceval-judge", "openai:judge", *workers)
    outcome.assert_outcomes(passed=1)
    assert outcome.ret == pytest.ExitCode.OK


# -- item 1: a judge's server that trickles ---------------------------------------------------


@pytest.fixture
def trickling() -> Iterator[FakeServer]:
    def answer(request: Seen) -> Reply:
        if request.path.endswith("/models"):
            return models({"id": "judge", "max_model_len": 8192})
        return dataclasses.replace(default_answer(request), trickle=1.0)

    with FakeServer(answer).running() as server:
        yield server


@pytest.mark.bad_input("judge-server-trickles")
def test_a_judges_request_ends_at_its_deadline(pytester: pytest.Pytester,
                                               trickling: FakeServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's server sends a byte a second (its answer would take over an hour): the
    judge's requests end at --lceval-timeout as the model's do, with the timed-out line."""
    tiktoken = pytest.importorskip("tiktoken")
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: byte_encoding())
    pytester.makeconftest(JUDGED_TASK)
    pytester.makepyfile(test_judged=JUDGED_SUITE)
    started = time.monotonic()
    outcome = pytester.runpytest(
        *GRID, "--lceval-store", "s.sqlite", "--lceval-judge", "openai:judge",
        f"--lceval-judge-base-url={trickling.url}", "--lceval-judge-tokenizer=tiktoken:bytes_test",
        "--lceval-timeout", "2", "--lceval-retries", "0")
    assert time.monotonic() - started < 45
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "pytest-lceval: openai backend: generate request to http://127.0.0.1:* (model judge) "
        "failed: the request timed out: no whole answer within --lceval-timeout 2 s *"])
    assert "Traceback" not in outcome.stdout.str()
    assert answers(pytester.path / "s.sqlite") == 2  # the model's answers, stored before


# -- item 12: JUnit XML on pytest's defaults --------------------------------------------------


@pytest.mark.bad_input("junitxml-on-defaults")
def test_scores_reach_junit_xml_without_a_warning(toy: pytest.Pytester) -> None:
    outcome = toy.runpytest(*GRID, "--junitxml", "junit.xml", "-W", "error::pytest.PytestWarning")
    outcome.assert_outcomes(passed=1)
    assert "record_property" not in outcome.stdout.str()
    assert "warnings summary" not in outcome.stdout.str()
    root = ET.parse(toy.path / "junit.xml").getroot()
    [case] = root.iter("testcase")
    properties = {prop.get("name"): prop.get("value") for prop in case.iter("property")}
    assert properties["score"] == "1.0" and properties["task"] == "toy"
    assert properties["n"] == "2" and properties["lceval_outcome"] == "passed"
