"""Session-end aggregates and report matrices on hand-made results with known answers."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_lceval.benchmarks.task_haystack.figures import diagnostic_matrices, niah_grid
from pytest_lceval.benchmarks.task_haystack.metrics import HaystackMetrics, measured
from pytest_lceval.benchmarks.task_haystack.report import (
    build_summary,
    icl_effective,
    summarize,
    write_reports,
)
from pytest_lceval.benchmarks.task_haystack.task_haystack_plugin import (
    pytest_lceval_finding as haystack_finding,
)
from pytest_lceval.benchmarks.task_haystack.verdict import VALUES
from pytest_lceval.report.findings import look_first
from pytest_lceval.results.cells import CellResult

STREAMS = {0: ["a", "b", "c"], 1: ["c", "a", "b"]}
VERDICTS = {("a", 0): "FAIL", ("b", 0): "PASS", ("c", 0): "EXCEL",
            ("a", 1): "FAIL", ("b", 1): "PASS", ("c", 1): "PASS"}
METRICS = HaystackMetrics(
    setting="recall", n_task=3, n_shot=1, length_setting="3t1s", permutation=0, stream_index=0,
    stream=STREAMS[0], verdict="PASS", verdict_value=0, t=-3.0, p=0.01, verdict_note="",
    s_acc=0.8, l_acc=0.6, s_acc_by_resample={}, l_acc_by_resample={}, s_correct={},
    l_correct={}, ood_rate=0.0, ood_rate_single=0.0, rank_method="first_token",
    no_prediction=0, no_prediction_single=0, rank_note="", test_size=4, resamples=3,
    offline_pack=True, reduced_defaults="test_size=4", seam_exact=True,
    single_tokens_mean=900.0)
"""A measured cell's record; tests replace the fields they are about."""


def cell(task: str, perm: int, n_shot: int = 1, s_acc: float = 0.8,
         l_acc: float = 0.6, tokens: int = 1000) -> CellResult:
    index = STREAMS[perm].index(task)
    verdict = VERDICTS[(task, perm)]
    result = CellResult(
        nodeid=f"t[{task}-3t{n_shot}s-p{perm}-recall]", suite="task_haystack", task=task,
        length=tokens, depth=50.0 * index, extra={"perm": f"p{perm}", "setting": "recall"},
        model="mock:icl", fingerprint="f", seed=42, source="fixtures:llicl_offline")
    result.input_tokens_mean = result.input_tokens_max = tokens
    result.metrics = replace(
        METRICS, n_shot=n_shot, length_setting=f"3t{n_shot}s", permutation=perm,
        stream_index=index, stream=STREAMS[perm], verdict=verdict,
        verdict_value=VALUES[verdict], s_acc=s_acc, l_acc=l_acc,
        s_acc_by_resample={"0": s_acc, "1": s_acc + 0.05, "2": s_acc - 0.02},
        l_acc_by_resample={"0": l_acc, "1": l_acc, "2": l_acc}).to_json()
    return result


CELLS = [cell(task, perm) for perm in (0, 1) for task in ("a", "b", "c")]


def test_pass_rate_counts_excel_as_passing_and_s_acc_is_per_task() -> None:
    summary = summarize(measured(CELLS))
    assert summary["pass_rate"] == 4 / 6
    assert (summary["fail"], summary["pass"], summary["excel"]) == (2, 3, 1)
    assert summary["s_acc"] == pytest.approx(0.8) and summary["l_acc"] == pytest.approx(0.6)


def test_diagnostic_matrix_is_grey_where_a_task_never_sat() -> None:
    m = diagnostic_matrices(measured(CELLS))
    assert m["tasks"] == ["a", "b", "c"]
    main = m["main"]
    assert main[0][0] == -1 and main[0][1] == -1  # a: index 0 in p0, index 1 in p1
    assert math.isnan(main[0][2])
    assert main[2][2] == 1 and main[2][0] == 0  # c: EXCEL at 2 (p0), PASS at 0 (p1)
    assert m["strip"] == [[-1, 0, 1], [0, -1, 0]]
    assert m["by_task"] == [-1, 0, 0.5]
    assert m["by_index"] == [-0.5, -0.5, 0.5]


def test_niah_bins_depths_and_labels_measured_lengths() -> None:
    columns, rows, grid = niah_grid(measured(CELLS))
    assert columns == ["3t1s\n1000 tok"] and len(rows) == 3
    assert grid[0][0] == -0.5 and grid[2][0] == 0.5


def test_icl_effective_needs_a_significant_4_over_1_shot_gain() -> None:
    four = [cell(t, 0, n_shot=4, s_acc=0.9 if t == "a" else 0.8) for t in ("a", "b", "c")]
    effective = icl_effective(measured(CELLS[:3] + four))
    assert effective == {"a": True, "b": False, "c": False}
    assert icl_effective(measured(CELLS)) == {}


def test_reports_are_written(tmp_path: Path) -> None:
    written = write_reports(tmp_path, CELLS)
    names = {path.name for path in written.paths}
    assert {"haystack-resamples.csv", "haystack-summary.md", "haystack-niah-recall.png",
            "haystack-diagnostic-recall-3t1s.png"} <= names
    assert build_summary(CELLS)["rows"][0]["tests"] == 6
    assert any("pass rate 66.7%" in line for line in written.summary_lines)


HAYSTACK = [haystack_finding]
"""Task Haystack's plugin reads its cells for the report (pytest_lceval_finding)."""


def test_look_first_names_the_fail_permutations_most_significant_first() -> None:
    cells = [cell(task, perm) for perm in (0, 1) for task in ("a", "b", "c")]
    cells[3].metrics["t"] = -math.inf  # a in permutation 1: a constant drop, the stronger FAIL
    assert look_first(cells, verdicts=HAYSTACK) == (
        "Look first at: a-3t1s-p1-recall (FAIL, stream index 1, L-acc 60.0% vs S-acc 80.0%, "
        "t -∞); a-3t1s-p0-recall (FAIL, stream index 0, L-acc 60.0% vs S-acc 80.0%, "
        "t -3.00).")
    passing = [c for c in cells if c.metrics["verdict"] != "FAIL"]
    assert look_first(passing, limit=1, verdicts=HAYSTACK).startswith(
        "Nothing failed or dropped; lowest: b-3t1s-p0-recall (PASS, stream index 1,")
