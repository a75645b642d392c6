"""RULER's effective context length: the definition on known curves, a mock model with a known
cliff (perfect up to 4k, about 0.2 beyond) measured at 4k, the comparison with a saved run
("fell from ≥8k to 4k") and the gate that fails the run on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toy_suite import RECALL_SUITE

from pytest_lceval.verdicts.effective.length import (
    DEFAULT_THRESHOLD,
    SUITE_ROW,
    Curve,
    Scored,
    changes,
    curves,
)

CLIFF = "mock:grep?window=16384&cliff=4096&after=0.2"
HALF = "mock:grep?window=16384&cliff=4096&after=0.5"
"""The same cliff with about half the long prompts answered: no cell drops by its whole score,
so with --lceval-min-drop 1 no cell fails its own comparison and only the gate can fail a run."""
PERFECT = "mock:grep?window=16384"
RUN = ["--lceval-tasks", "niah_single_2,niah_multikey_2", "--lengths", "1k,2k,4k,8k",
       "--depths", "0,100", "--samples", "10", "--lceval-threshold", "0",
       "-p", "no:cacheprovider"]


def curve(*scores: float, lengths: tuple[int, ...] = (1024, 2048, 4096, 8192)) -> Curve:
    return Curve("s", "t", dict(zip(lengths, scores, strict=True)), DEFAULT_THRESHOLD)


def test_the_longest_length_whose_score_stays_at_or_above_the_threshold() -> None:
    assert curve(1.0, 1.0, 0.9, 0.2).text == "4k"
    assert curve(1.0, 1.0, 0.856, 0.2).effective == 4096  # at the threshold counts
    assert curve(1.0, 0.5, 0.9, 0.9).text == "1k"  # a dip ends it: the score must stay
    assert curve(0.5, 1.0, 1.0, 1.0).text == "<1k" and curve(0.5, 1.0, 1.0, 1.0).effective \
        is None
    assert curve(1.0, 1.0, 1.0, 1.0).text == "≥8k" and curve(1.0, 1.0, 1.0, 1.0).at_least
    assert Curve("s", "t", {}, DEFAULT_THRESHOLD).text == "–"
    assert Curve("s", "t", {4096: 0.9}, 0.95).text == "<4k"  # the threshold is an option


def test_depths_pool_per_task_and_a_suite_averages_its_tasks_where_all_were_measured() -> None:
    cells = [Scored("recall", "a", 1024, (1.0, 1.0)), Scored("recall", "a", 1024, (1.0, 0.0)),
             Scored("recall", "a", 2048, (1.0, 1.0)), Scored("recall", "b", 1024, (0.5,)),
             Scored("recall", "b", 2048, (1.0,)), Scored("recall", "a", 4096, (1.0,)),
             Scored("other", "c", 0, (1.0,))]  # no token length: Task Haystack's cells
    suite, a, b = curves(cells, 0.7)
    assert (suite.task, a.task, b.task) == (SUITE_ROW, "a", "b")
    assert a.scores == {1024: 0.75, 2048: 1.0, 4096: 1.0} and a.text == "≥4k"
    assert suite.scores == {1024: 0.625, 2048: 1.0}  # 4k: only a was measured there
    assert suite.text == "<1k" and b.text == "<1k"


def test_a_baseline_is_compared_on_the_lengths_both_runs_measured() -> None:
    before = [curve(1.0, 1.0, 1.0, 1.0)]
    now = [curve(1.0, 0.5, lengths=(1024, 2048))]
    [change] = changes(now, before).values()
    assert (change.before.text, change.now.text, change.status) == ("≥2k", "1k", "fell")
    assert change.describe("base") == ("effective length of s · t fell from ≥2k to 1k against "
                                       "baseline 'base': score at 2k 0.500 < threshold 0.856 "
                                       "(baseline 1.000)")
    [same] = changes([curve(1.0, 1.0, lengths=(1024, 2048))], before).values()
    assert same.status == "same"  # the baseline's 4k and 8k were not measured now
    assert [c.status for c in changes(before, now).values()] == ["rose"]
    assert changes(now, [curve(1.0, lengths=(4096,))]) == {}


@pytest.fixture
def recall(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    return pytester


def summary(pytester: pytest.Pytester, run: str) -> dict:  # type: ignore[type-arg]
    return json.loads((pytester.path / "reports" / run / "summary.json").read_text())


def test_a_model_with_a_cliff_after_4k_has_an_effective_length_of_4k(
        recall: pytest.Pytester) -> None:
    recall.runpytest("--model", CLIFF, *RUN, "--lceval-run", "cliff").assert_outcomes(passed=16)
    rows = {(row["suite"], row["task"]): row for row in summary(recall, "cliff")["effective"]}
    assert sorted(rows) == [("recall", ""), ("recall", "niah_multikey_2"),
                            ("recall", "niah_single_2")]
    for row in rows.values():
        assert (row["effective"], row["effective_tokens"], row["window"]) == ("4k", 4096, 16384)
        assert [row["scores"][n] for n in ("1k", "2k", "4k")] == [1.0, 1.0, 1.0]
        assert 0.05 <= row["scores"]["8k"] <= 0.4  # about after=0.2 of 20 cases answered
    text = (recall.path / "reports" / "cliff" / "summary.md").read_text(encoding="utf-8")
    assert "**Claimed window vs effective length** (the longest length at which the " \
           "score, and the score at every shorter length, is at least 0.856" in text
    assert "| recall | (all tasks) | 16k | 4k | 1k 1.00 · 2k 1.00 · 4k 1.00 · 8k 0." in text
    again = recall.runpytest("--model", CLIFF, *RUN, "--lceval-run", "strict",
                             "--lceval-effective-threshold", "1.01")
    again.stderr.fnmatch_lines(["*--lceval-effective-threshold*must be at most 1*"])
    lenient = recall.runpytest("--model", CLIFF, *RUN, "--lceval-run", "lenient",
                               "--lceval-effective-threshold", "0.01")
    lenient.assert_outcomes(passed=16)
    assert summary(recall, "lenient")["effective"][0]["effective"] == "≥8k"


def test_the_gate_fails_a_run_whose_effective_length_fell_below_the_baseline(
        recall: pytest.Pytester) -> None:
    recall.runpytest("--model", PERFECT, *RUN, "--lceval-save", "base").assert_outcomes(
        passed=16)
    # --lceval-min-drop 1: no cell fails on its own comparison; only the gate can fail the run.
    compared = ["--model", HALF, *RUN, "--lceval-compare", "base", "--lceval-min-drop", "1"]
    report = recall.runpytest(*compared, "--lceval-run", "nogate")
    assert report.ret == pytest.ExitCode.OK
    rows = summary(recall, "nogate")["effective"]
    assert [(r["task"], r["baseline"], r["effective"], r["change"]) for r in rows] == [
        ("", "≥8k", "4k", "fell"), ("niah_multikey_2", "≥8k", "4k", "fell"),
        ("niah_single_2", "≥8k", "4k", "fell")]
    text = (recall.path / "reports" / "nogate" / "summary.md").read_text(encoding="utf-8")
    assert "| recall | (all tasks) | 16k | 4k | 1k 1.00 · 2k 1.00 · 4k 1.00 · 8k 0." in text
    assert "| ≥8k → 4k (fell) |" in text
    assert "FAILED effective_length" not in report.stdout.str()

    gated = recall.runpytest(*compared, "--lceval-run", "gated", "--lceval-effective-gate",
                             "suite")
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    gated.stdout.fnmatch_lines([
        "lceval: suite gate FAILED effective_length: effective length of recall fell from ≥8k "
        "to 4k against baseline 'base': score at 8k 0.* < threshold 0.856 (baseline 1.000)"])
    [gate] = [g for g in summary(recall, "gated")["gates"] if g["criterion"] == "effective_length"]
    assert (gate["criterion"], gate["passed"]) == ("effective_length", False)
    assert gate["properties"]["effective_length"] == "4k"

    tasks = recall.runpytest(*compared, "--lceval-run", "tasks", "--lceval-effective-gate",
                             "task")
    tasks.stdout.fnmatch_lines(["*FAILED effective_length: effective length of recall fell*; "
                                "effective length of recall · niah_multikey_2 fell*; "
                                "effective length of recall · niah_single_2 fell*"])


def test_the_gate_passes_when_the_effective_length_held_or_rose(
        recall: pytest.Pytester) -> None:
    recall.runpytest("--model", CLIFF, *RUN, "--lceval-save", "short").assert_outcomes(
        passed=16)
    outcome = recall.runpytest("--model", PERFECT, *RUN, "--lceval-compare", "short",
                               "--lceval-effective-gate", "task", "--lceval-run", "better")
    assert outcome.ret == pytest.ExitCode.OK
    outcome.stdout.fnmatch_lines(["lceval: suite gate PASSED effective_length: effective "
                                  "length of recall rose from 4k to ≥8k against baseline "
                                  "'short'; 3 effective lengths compared, none fell"])


def test_the_gate_needs_a_baseline_and_refuses_one_without_the_suites_lengths(
        recall: pytest.Pytester) -> None:
    alone = recall.runpytest("--model", CLIFF, *RUN, "--lceval-effective-gate", "suite")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(["*--lceval-effective-gate suite compares the effective context "
                                "length with a saved run: give --lceval-compare NAME*"])
    recall.runpytest("--model", PERFECT, *RUN[:2], "--lengths", "512", *RUN[4:],
                     "--lceval-save", "other")
    elsewhere = recall.runpytest("--model", HALF, *RUN, "--lceval-compare", "other",
                                 "--lceval-min-drop", "1", "--lceval-effective-gate", "suite")
    assert elsewhere.ret == pytest.ExitCode.TESTS_FAILED
    elsewhere.stdout.fnmatch_lines(["*FAILED effective_length: recall: cannot compare the "
                                    "effective context length with baseline 'other'*"])


def test_html_section_shows_claimed_window_and_effective_length(recall: pytest.Pytester) -> None:
    report = Path(recall.path) / "report.html"
    recall.runpytest("--model", CLIFF, *RUN, f"--html={report}")
    page = report.read_text(encoding="utf-8")
    assert "<h3>Claimed window vs effective length</h3>" in page
    assert ("<td>recall</td><td>(all tasks)</td><td class=\"num\">16k</td>"
            "<td class=\"num\">4k</td>") in page
