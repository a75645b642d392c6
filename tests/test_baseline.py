"""Saved runs and --lceval-compare through pytester, with the mock backend and the toy task."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from toy_suite import SUITE, TOY_TASK

import pytest_lceval

SMALL = ["--lengths", "1k,2k", "--depths", "0,50", "--samples", "12", "-p", "no:randomly",
         "--lceval-threshold", "0"]
"""Four cells; threshold 0, so only the baseline criterion can fail a cell."""
GOOD = "mock:grep"
DEGRADED = "mock:grep?miss=40-60"
"""Forgets keys in the middle of the context: the 50 % cells drop from 1.0 to 0.0."""


def make_suite(pytester: pytest.Pytester, conftest_extra: str = "") -> pytest.Pytester:
    """A pytester folder with the toy task registered and a one-test suite over its grid."""
    pytester.makeconftest(TOY_TASK + conftest_extra)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_suite(pytester)


def run_rows(pytester: pytest.Pytester, run: str) -> list[dict[str, Any]]:
    path = pytester.path / "reports" / run / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def baseline_props(row: dict[str, Any]) -> dict[str, Any]:
    return next(j["properties"] for j in row["judgements"] if j["criterion"] == "baseline")


def save_base(pytester: pytest.Pytester, *extra: str) -> None:
    pytester.runpytest("--model", GOOD, *SMALL, "--lceval-run", "base", "--lceval-save", "base",
                       *extra).assert_outcomes(passed=4)


def test_compare_marks_exactly_the_degraded_cells_and_the_suite_gate_fails_with_n_2(
        suite: pytest.Pytester) -> None:
    """The cells' own tests are the evidence of where the model lost; the pooled suite gate
    fails the run (and is a failed test case of its own in the JUnit XML)."""
    save_base(suite)
    xml = suite.path / "junit.xml"
    outcome = suite.runpytest("--model", DEGRADED, *SMALL, "--lceval-run", "cmp",
                              "--lceval-compare", "base", "-n", "2", f"--junitxml={xml}")
    outcome.assert_outcomes(passed=4)
    assert outcome.ret == pytest.ExitCode.TESTS_FAILED
    outcome.stdout.fnmatch_lines(["*suite gate FAILED baseline_suite: toy pooled over 4 compared "
                                  "cells: 0.500 vs 1.000 in baseline 'base', difference -0.500*"
                                  "exact McNemar p=1.19e-07 (24 worse, 0 better), N=48: "
                                  "significant drop of at least --lceval-min-drop 0.05"])
    rows = run_rows(suite, "cmp")
    [message] = {j["message"] for row in rows for j in row["judgements"]
                 if j["criterion"] == "baseline" and row["nodeid"].endswith("toy-1k-50]")}
    assert message.startswith("vs baseline 'base': 0.000 vs 1.000, difference -1.000")
    assert message.endswith("exact McNemar p=0.000488 on 12 discordant cases (12 worse, 0 "
                            "better), N=12: significant drop of at least --lceval-min-drop 0.050")
    statuses = {row["nodeid"]: baseline_props(row)["baseline_status"] for row in rows}
    assert statuses == {
        "test_suite.py::test_cell[toy-1k-0]": "unchanged",
        "test_suite.py::test_cell[toy-1k-50]": "regressed",
        "test_suite.py::test_cell[toy-2k-0]": "unchanged",
        "test_suite.py::test_cell[toy-2k-50]": "regressed",
    }
    every = list(ET.parse(xml).getroot().iter("testcase"))
    cases = [case for case in every if case.get("classname") == "test_suite"]
    assert len(cases) == 4
    gates = {(c.get("classname"), c.get("name")) for c in every if c not in cases}
    assert ("lceval-gates.toy", "baseline_coverage") in gates  # each suite gate a test case
    [failed] = [c.get("name") for c in every if c not in cases and c.find("failure") is not None]
    assert failed == "baseline_suite"
    assert {classname for classname, _ in gates} == {"lceval-gates.toy"}
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert {"score", "n", "ci_low", "baseline_status", "baseline_diff", "baseline_ci_low",
                "baseline_ci_high", "baseline_p", "baseline_mde", "baseline_n"} <= set(props)
        assert props["baseline"] == "base" and props["baseline_n"] == "12"


def test_save_then_the_same_model_passes_its_own_baseline(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", GOOD, *SMALL, "--lceval-save", "base")
    outcome.stdout.fnmatch_lines(["*lceval: saved baseline 'base' (4 cells) to *base.json"])
    saved = json.loads((suite.path / "reports" / "baselines" / "base.json").read_text())
    assert saved["format"] == "pytest-lceval-baseline"
    assert (saved["seed"], saved["model"], saved["package_version"]) == \
        (42, GOOD, pytest_lceval.__version__)
    assert len(saved["fingerprint"]) == 64 and saved["settings"]["samples"] == 12
    assert len(saved["cells"]) == 4
    for cell in saved["cells"].values():
        assert cell["scores"] == [1.0] * 12 and len(set(cell["case_keys"])) == 12

    outcome = suite.runpytest("--model", GOOD, *SMALL, "--lceval-run", "again",
                              "--lceval-compare", "base")
    outcome.assert_outcomes(passed=4)
    outcome.stdout.fnmatch_lines(["*lceval: comparing with baseline 'base' (mock:grep, 4 cells*"])
    props = [baseline_props(row) for row in run_rows(suite, "again")]
    assert {p["baseline_status"] for p in props} == {"unchanged"}
    assert {p["baseline_mde"] for p in props} == {0.5}  # 6 of 12 cases must flip


def test_fewer_samples_pair_on_the_common_cases_and_paths_work(suite: pytest.Pytester) -> None:
    save_base(suite)
    path = suite.path / "reports" / "baselines" / "base.json"
    small = [*SMALL[:4], "--samples", "6", *SMALL[6:]]
    outcome = suite.runpytest("--model", GOOD, *small, "--lceval-run", "six",
                              "--lceval-compare", str(path))
    outcome.assert_outcomes(passed=4)
    assert {baseline_props(row)["baseline_n"] for row in run_rows(suite, "six")} == {6}


def test_other_prompts_are_refused_with_the_cause(suite: pytest.Pytester) -> None:
    save_base(suite, "--chat-template", "off")
    outcome = suite.runpytest("--model", GOOD, *SMALL, "--lceval-compare", "base",
                              "--chat-template", "on")
    outcome.assert_outcomes(failed=4)
    outcome.stdout.fnmatch_lines([
        "*cannot compare with baseline 'base': none of this cell's 12 cases is among the "
        "baseline's 12; cases pair by request hash, so the prompts differ. Likely cause: "
        "--chat-template differs (baseline off, this run on)*"])


def test_a_missing_baseline_or_another_seed_is_a_usage_error(suite: pytest.Pytester) -> None:
    save_base(suite)
    outcome = suite.runpytest("--model", GOOD, *SMALL, "--lceval-compare", "nope")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*nope.json does not exist (saved runs in *baselines: base)*"])
    outcome = suite.runpytest("--model", GOOD, *SMALL, "--lceval-compare", "base",
                              "--lceval-seed", "7")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*baseline 'base' was saved with seed 42 and this run uses 7*"
                                  "Rerun with --lceval-seed=42.*"])


@pytest.mark.parametrize(("args", "expected"), [
    (["--lceval-min-drop", "5"], "*bad value '5' for --lceval-min-drop*fractions 0..1*"),
    (["--lceval-save", "a b"], "*bad value 'a b' for --lceval-save*letters, digits*"),
])
def test_bad_baseline_options_are_usage_errors(suite: pytest.Pytester, args: list[str],
                                               expected: str) -> None:
    outcome = suite.runpytest("--model", GOOD, *SMALL, *args)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines([expected])
