"""summary.md carries what decides the verdict (issue 33, item 6): LongScore's Table-7 row and the
cells it failed, Task Haystack's pass rate and FAILs with S-acc, L-acc, t and p, the worst cells
ranked by the verdict that failed them, pointers that name a file which lists what they point
at, lengths in numeric order, and Task Haystack's HTML section with its per-test table first.
Real inner runs with the mock models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_baseline import make_suite

from pytest_lceval.benchmarks.longbench100.longscore.base import BaseAbility
from pytest_lceval.report.section import LISTED
from pytest_lceval.report.summary import FAILING_SHOWN, WORST_SHOWN

HAYSTACK_SUITE = (Path(__file__).parent.parent / "suites" / "test_task_haystack.py").read_text()
LONGSCORE_RUN = ["--model", "mock:grep?miss=40-60", "--lengths", "1k,2k,3k,4k", "--depths",
                 "0,25,50", "--samples", "3", "--longscore-base-lengths", "1k,2k",
                 "--longscore-min", "-20", "-p", "no:randomly"]
"""Blind at 40-60 % depth: base 2/3 pooled over depths; the 50 % cells score 0, at 1k and 2k
failing the score threshold, at 3k and 4k failing LongScore (-100 %)."""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_suite(pytester)


def summary(pytester: pytest.Pytester, run: str) -> tuple[str, dict[str, Any]]:
    folder = pytester.path / "reports" / run
    return ((folder / "summary.md").read_text(encoding="utf-8"),
            json.loads((folder / "summary.json").read_text(encoding="utf-8")))


def test_a_longscore_failed_run_names_table_7_and_ranks_its_failures_first(
        suite: pytest.Pytester) -> None:
    suite.runpytest(*LONGSCORE_RUN, "--lceval-run", "ls").assert_outcomes(passed=8, failed=4)
    text, data = summary(suite, "ls")
    assert "**LongScore**" in text and "per task: `longscore-toy.md`." in text
    assert (suite.path / "reports" / "ls" / "longscore-toy.md").exists()
    assert ("| suite | claimed length | base ability | LC@3k | LC@4k | avg score | avg LC | "
            "failed on LongScore |") in text
    assert "| toy | 8k | 66.7 | +0.0 | +0.0 | 66.7 | +0.0 | 2 of 6 |" in text
    assert "- toy: `toy-3k-50` -100.0% (95% CI -100.0..-" in text
    assert "`toy-4k-50` -100.0%" in text
    [row] = data["sections"][0]["data"]["suites"]
    assert [f["nodeid"].rpartition("[")[2] for f in row["failed"]] == ["toy-3k-50]",
                                                                        "toy-4k-50]"]
    assert [e["length"] for e in row["lc_by_length"]] == ["3k", "4k"]
    # Worst cells: LongScore's failures first, then the threshold's, although all four score 0
    # and the 1k cell sorts first by name; no passed cell listed while cells failed.
    worst = [line for line in text.splitlines() if line.startswith("| toy · `")]
    assert [line.split("`")[1] for line in worst] == ["toy-3k-50", "toy-4k-50", "toy-1k-50",
                                                      "toy-2k-50"]
    assert worst[0].endswith("| FAIL: longscore | FAIL, LongScore -100.0%, score 0.0% |")
    assert worst[2].endswith("| FAIL: threshold | FAIL, score 0.0% |")


def test_every_pointer_names_a_file_that_lists_what_it_points_at(
        suite: pytest.Pytester) -> None:
    """More LongScore failures than summary.md lists (summary.json has them), more failed
    cells than the worst-cells table shows (summary.json's cells), and more regressions than
    the terminal lists (summary.md has them, folded)."""
    depths = ["--depths", "0,45,50,55,60", "--samples", "1", "-p", "no:randomly"]
    suite.runpytest("--model", "mock:grep?miss=40-60", "--lengths", "1k,2k,3k,4k,5k", *depths,
                    "--longscore-base-lengths", "1k,2k", "--longscore-min", "-20",
                    "--lceval-run", "many").assert_outcomes(passed=5, failed=20)
    text, data = summary(suite, "many")
    failed = data["sections"][0]["data"]["suites"][0]["failed"]
    assert len(failed) == 12 > LISTED  # 3k, 4k, 5k at 45-60 %; 1k and 2k fail the threshold
    assert f"and {12 - LISTED} more in summary.json (`sections.longscore`)" in text
    assert f"{20 - WORST_SHOWN} more failed or dropped cells: every cell, with its outcome " \
           "and reason, is in summary.json (`cells`)" in text
    assert sum(cell["outcome"] == "failed" for cell in data["cells"]) == 20

    grid = ["--lengths", "1k,2k,3k", "--depths", "0,45,48,50,52,55,58,60", "--samples", "6",
            "--lceval-threshold", "0", "-p", "no:randomly"]
    suite.runpytest("--model", "mock:grep", *grid, "--lceval-run", "good", "--lceval-save",
                    "good").assert_outcomes(passed=24)
    outcome = suite.runpytest("--model", "mock:grep?miss=40-60", *grid, "--lceval-run", "cmp",
                              "--lceval-compare", "good")
    text, data = summary(suite, "cmp")
    regressed = [d for d in data["deltas"] if d["status"] == "regressed"]
    assert len(regressed) == 21 > FAILING_SHOWN
    outcome.stdout.fnmatch_lines([f"lceval:   and {21 - FAILING_SHOWN} more in summary.md"])
    folded = text.split("<details><summary>1 more failing cells</summary>")[1]
    assert f"`{regressed[-1]['label']}`" in folded.split("</details>")[0]
    assert all(f"`{d['label']}`" in text for d in regressed)


def test_effective_length_scores_read_in_numeric_length_order(suite: pytest.Pytester) -> None:
    suite.runpytest("--model", "mock:grep?window=16384", "--lengths", "2k,12k", "--depths", "0",
                    "--samples", "1", "-p", "no:randomly", "--lceval-run", "long"
                    ).assert_outcomes(passed=2)
    text, _ = summary(suite, "long")
    assert "| toy | toy | 16k | ≥12k | 2k 1.00 · 12k 1.00 |" in text


def test_a_base_read_back_from_the_store_lists_its_lengths_in_order() -> None:
    """The store writes JSON with sorted keys ('16k' before '8k')."""
    base = BaseAbility(0.5, {"8k@0": [1.0], "8k@50": [0.0], "16k@0": [1.0], "16k@50": [0.0]},
                       rules={"8k": "all", "16k": "all"})
    stored = json.loads(json.dumps(base.to_json(), sort_keys=True))
    assert list(stored["strata"]) == ["16k@0", "16k@50", "8k@0", "8k@50"]
    read = BaseAbility.from_json(stored)
    assert list(read.strata) == ["8k@0", "8k@50", "16k@0", "16k@50"]
    assert read.describe() == "base ability 0.500 (N=4: 8k 2, 16k 2; all)"


def test_task_haystack_summary_and_html_lead_with_the_t_tests(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_task_haystack=HAYSTACK_SUITE)
    report = pytester.path / "report.html"
    outcome = pytester.runpytest("--model", "mock:icl?reach=200", "--haystack-test-size", "12",
                                 "--haystack-resamples", "5", "--haystack-ntasks", "4",
                                 "--haystack-shots", "4", "--lceval-run", "h", f"--html={report}",
                                 "-p", "no:randomly")
    outcome.assert_outcomes(passed=2, failed=2)
    text, data = summary(pytester, "h")
    [section] = data["sections"]
    fails = section["data"]["fail"]
    assert len(fails) == 2 and fails[0]["t"] <= fails[1]["t"] < 0
    assert "| recall | 4t4s | 4 | 50.0% | 2 |" in text
    for fail in fails:
        label = fail["nodeid"].rpartition("[")[2][:-1]
        assert (f"| `{label}` | {100 * fail['s_acc']:.1f} | {100 * fail['l_acc']:.1f} | "
                f"{fail['t']:.2f} | {fail['p']:.3f} |") in text
    per_test = (pytester.path / "reports" / "h" / "haystack-summary.md").read_text()
    assert per_test.index("## Per test") < per_test.index("## Per setting and length")
    assert per_test.count("**FAIL**") == 2 and per_test.count("| PASS |") == 2
    page = report.read_text(encoding="utf-8")
    section_html = page[page.index("<h2>Suite task_haystack</h2>"):]
    order = [section_html.index(mark) for mark in (
        "<h4>haystack-summary.md</h4>", "<h2>Per test</h2>", "<h2>Per setting and length",
        'alt="haystack-niah-recall.png"',
        "<details><summary>haystack-resamples.csv: 20 rows")]
    assert order == sorted(order)
