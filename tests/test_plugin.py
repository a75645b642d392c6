"""The plugin's behaviour, through pytester: options, grid, skips, store reuse, xdist, reports."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from run_outputs import read_results
from toy_suite import SUITE, TOY_TASK

SMALL = ["--lengths", "256,512", "--depths", "0,50,100", "--samples", "3", "-p", "no:randomly"]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--lengths", "8x"], "bad value '8x' for --lengths"),
        (["--depths", "150"], "outside 0..100"),
        (["--samples", "0"], "must be a positive whole number"),
        (["--lceval-threshold", "50"], "fractions 0..1"),
        (["--lceval-threshold", "=0.3"], "names no task"),
        (["--lceval-seed", "abc"], "--lceval-seed"),
        (["--model", "smolm2"], "Did you mean smollm2"),
        (["--lceval-data", "/no/such/dir"], "is not a directory"),
    ],
)
def test_bad_options_are_usage_errors(suite: pytest.Pytester, args: list[str],
                                      expected: str) -> None:
    outcome = suite.runpytest(*args)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines([f"*{expected}*"])


def test_ini_value_error_names_the_ini_key(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nlceval_lengths = 1k,zz\n")
    outcome = suite.runpytest("--model", "mock:grep")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*'1k,zz'*from ini key lceval_lengths*"])


def test_grid_ids_and_markers(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:grep", *SMALL, "--collect-only", "-q")
    outcome.stdout.fnmatch_lines(["test_suite.py::test_cell[toy-256-0]",
                                  "test_suite.py::test_cell[toy-512-100]", "6 tests collected*"])
    selected = suite.runpytest("--model", "mock:grep", *SMALL, "--collect-only", "-q",
                               "-m", "toy and len_512", "-k", "50")
    selected.stdout.fnmatch_lines(["test_suite.py::test_cell[toy-512-50]", "1/6 tests collected*"])


def test_header_shows_seed_and_cells_pass_with_a_perfect_model(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:grep", *SMALL, "--lceval-seed", "7",
                              "--lceval-run", "r1")
    outcome.stdout.fnmatch_lines(["*lceval: model=mock:grep seed=7*"])
    outcome.assert_outcomes(passed=6)
    rows = read_results(suite, "r1")
    assert [row["score"] for row in rows] == [1.0] * 6
    assert all(row["input_tokens_max"] <= row["length"] for row in rows)
    assert (suite.path / "reports" / "r1" / "heatmap-toy-toy.png").stat().st_size > 1000


def test_failure_message_states_score_ci_n_and_threshold(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:constant", "--lengths", "256", "--depths", "50",
                              "--samples", "4", "--lceval-threshold", "toy=0.25")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(
        ["*toy at 256: score 0.000 (95% CI 0.000-0.490, N=4) < threshold 0.250*"])


def test_cell_over_the_window_is_skipped_with_both_numbers(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:grep?window=300", *SMALL, "-rs")
    outcome.assert_outcomes(passed=3, skipped=3)
    outcome.stdout.fnmatch_lines(
        ["*cell length 512 tokens exceeds the model's context window of 300 tokens*"])


def test_rerun_reuses_every_stored_answer(suite: pytest.Pytester) -> None:
    suite.runpytest("--model", "mock:grep", *SMALL, "--lceval-run", "cold").assert_outcomes(
        passed=6)
    suite.runpytest("--model", "mock:grep", *SMALL, "--lceval-run", "warm").assert_outcomes(
        passed=6)
    cold, warm = read_results(suite, "cold"), read_results(suite, "warm")
    assert sum(row["model_requests"] for row in cold) == 18
    assert sum(row["model_requests"] for row in warm) == 0
    assert [row["scores"] for row in warm] == [row["scores"] for row in cold]


def test_a_changed_seed_gives_new_cases(suite: pytest.Pytester) -> None:
    suite.runpytest("--model", "mock:grep", *SMALL, "--lceval-run", "a")
    suite.runpytest("--model", "mock:grep", *SMALL, "--lceval-run", "b", "--lceval-seed", "9")
    assert sum(row["model_requests"] for row in read_results(suite, "b")) == 18


def _comparable(rows: list[dict]) -> list[dict]:
    volatile = {"seconds_build", "seconds_model", "seconds_score", "model_requests"}
    return [{k: v for k, v in row.items() if k not in volatile} for row in rows]


def test_xdist_results_equal_a_single_process_run(suite: pytest.Pytester) -> None:
    single = suite.runpytest("--model", "mock:grep", *SMALL, "--lceval-run", "n0",
                             "--lceval-store", "s0.sqlite")
    single.assert_outcomes(passed=6)
    xml = suite.path / "junit.xml"
    parallel = suite.runpytest("--model", "mock:grep", *SMALL, "--lceval-run", "n2",
                               "--lceval-store", "s2.sqlite", "-n", "2", f"--junitxml={xml}")
    parallel.assert_outcomes(passed=6)
    assert _comparable(read_results(suite, "n2")) == _comparable(read_results(suite, "n0"))
    assert (suite.path / "reports" / "n2" / "heatmap-toy-toy.png").exists()
    cases = ET.parse(xml).getroot().iter("testcase")
    properties = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
    assert len(properties) == 6
    assert all(p["score"] == "1.0" and p["n"] == "3" and "ci_low" in p for p in properties)
