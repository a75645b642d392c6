"""Reports read as a reviewer reads them: the regressions first everywhere, statistics in their
bounds and strict JSON, measured scores always shown, LongScore figures that stay readable, and
failing cases kept as evidence."""

from __future__ import annotations

import copy
import html
import json
import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from test_baseline import GOOD, make_suite
from test_haystack_report import CELLS as HAYSTACK_CELLS
from test_report import cell, html_tests
from toy_suite import RECALL_SUITE

from pytest_lceval.benchmarks.longbench100.longscore.longscore_plugin import (
    pytest_lceval_undefined as longscore_undefined,
)
from pytest_lceval.benchmarks.longbench100.longscore.summary import longscore_figure, task_rows
from pytest_lceval.benchmarks.task_haystack.figures import diagnostic_figure
from pytest_lceval.benchmarks.task_haystack.metrics import measured as haystack_measured
from pytest_lceval.benchmarks.task_haystack.report import write_reports
from pytest_lceval.report import heatmaps
from pytest_lceval.report.badge import FAIL_COLOUR, badge_text
from pytest_lceval.report.findings import look_first
from pytest_lceval.report.html import cell_html
from pytest_lceval.report.summary import Tally, length_rows
from pytest_lceval.results import strict_json
from pytest_lceval.results.cells import (
    CellResult,
    Judgement,
    clip_sample,
    failing_first,
    read_results,
)

COMPARED = ["--lengths", "1k", "--depths", "0,50,55", "--samples", "12", "-p", "no:randomly",
            "--lceval-threshold", "0"]
"""Three cells; mock:grep?miss=40-60 loses every case at 50 and 55 %, none at 0 %."""


def strict_loads(text: str) -> Any:
    """A parser that rejects NaN and Infinity, as JSON.parse does."""
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def compared_run(pytester: pytest.Pytester) -> Path:
    """A comparison with one regression and one bigger drop on too few cases: the baseline's
    toy-1k-50 keeps 3 of its 12 cases (as a baseline saved with --samples 3 would), so that
    cell pairs 3 cases and is inconclusive, while toy-1k-55 regresses on 12. Sorted by the
    difference alone (both -1.0), the inconclusive cell came first."""
    make_suite(pytester)
    pytester.runpytest("--model", GOOD, *COMPARED, "--lceval-run", "base",
                       "--lceval-save", "base").assert_outcomes(passed=3)
    path = pytester.path / "reports" / "baselines" / "base.json"
    saved = json.loads(path.read_text())
    short = saved["cells"]["test_suite.py::test_cell[toy-1k-50]"]
    short["scores"], short["case_keys"] = short["scores"][:3], short["case_keys"][:3]
    path.write_text(json.dumps(saved))
    report = pytester.path / "report.html"
    outcome = pytester.runpytest("--model", "mock:grep?miss=40-60", *COMPARED, "--lceval-run",
                                 "cmp", "--lceval-compare", "base", f"--html={report}")
    outcome.assert_outcomes(passed=3)  # the cells are evidence; the pooled suite gate fails
    (pytester.path / "terminal.txt").write_text(outcome.stdout.str())
    return pytester.path / "reports" / "cmp"


def test_a_comparison_with_one_regression_lists_it_first_everywhere(
        pytester: pytest.Pytester) -> None:
    run = compared_run(pytester)
    text = (run / "summary.md").read_text()
    assert text.startswith("### pytest-lceval ❌ 1 regressed against `base` (toy); 1 suite gate "
                           "failed: baseline_suite (toy)")
    table = [line for line in text.splitlines() if line.startswith("| toy · ")]
    assert table[0].startswith("| toy · `toy-1k-55` | string_match_all (0–1) | 1.000 | 0.000 | "
                               "-1.000 (")
    assert table[0].endswith("| regressed |")
    assert table[1].startswith("| toy · `toy-1k-50` |") and table[1].endswith(
        "| none at N=3 | inconclusive |")
    assert "Not listed: 1 unchanged" in text
    assert text.index("**1 regressed against `base` (toy).** Cells: 1 regressed, ") < \
        text.index("| suite | passed |")

    terminal = (pytester.path / "terminal.txt").read_text().splitlines()
    ours = [line for line in terminal if line.startswith("lceval: pytest-lceval")]
    assert ours == ["lceval: pytest-lceval 1 regressed against base (toy); 1 suite gate failed: "
                    "baseline_suite (toy): pass rate 100% (3/3), 0 skipped"]
    before = terminal[terminal.index(ours[0]) - 1]  # the verdict is the last lceval line
    assert before.startswith("lceval:   regressed toy · toy-1k-55: 1.000 -> 0.000, Δ -1.000")
    assert not any("inconclusive toy" in line for line in terminal)

    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert "<b>pytest-lceval 1 regressed against base (toy); 1 suite gate failed" in page
    assert '<p class="look-first">Look first at: toy-1k-55 (regressed against base: 100.0% ' \
           "→ 0.0%, Δ -100.0 points, p &lt;0.001)." in page
    comparison = page[page.index("<h3>Comparison with baseline base: 1 regressed, "
                                 "1 inconclusive, 1 unchanged</h3>"):]
    assert comparison.index("<td>toy-1k-55</td>") < comparison.index("<td>toy-1k-50</td>") \
        < comparison.index("<details><summary>1 unchanged")
    assert comparison.index("<details><summary>1 unchanged") < comparison.index(
        "<td>toy-1k-0</td>")  # folded away
    badge = (run / "badge.svg").read_text()
    assert "lceval vs base" in badge and "1 gate failed, 1 regressed, 100% (3/3)" in badge


def test_every_results_and_summary_line_is_strict_json_with_intervals_in_bounds(
        pytester: pytest.Pytester) -> None:
    run = compared_run(pytester)
    rows = [strict_loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    summary = strict_loads((run / "summary.json").read_text())
    strict_loads((pytester.path / "reports" / "baselines" / "base.json").read_text())
    props = {row["nodeid"][-6:-1]: next(j["properties"] for j in row["judgements"]
                                        if j["criterion"] == "baseline") for row in rows}
    assert props["1k-50"]["baseline_mde"] is None  # infinite, and says so
    assert props["1k-50"]["baseline_mde_why"] == (
        "infinite: no drop is detectable at N=3: the exact test needs at least 6 cases moving "
        "the same way")
    for p in props.values():
        assert -1.0 <= p["baseline_ci_low"] <= p["baseline_diff"] <= p["baseline_ci_high"] <= 1
    deltas = {d["label"]: d for d in summary["deltas"]}
    assert deltas["toy-1k-50"]["mde"] is None and deltas["toy-1k-50"]["mde_why"] == "infinite"
    assert [d["label"] for d in summary["deltas"]] == ["toy-1k-55", "toy-1k-50", "toy-1k-0"]
    # read back, the numbers are numbers again
    back = {r.nodeid[-6:-1]: r for r in read_results(run)}
    assert math.isinf(next(j.properties["baseline_mde"] for j in back["1k-50"].judgements
                           if j.criterion == "baseline"))


def test_strict_json_names_what_it_writes_as_null_and_reads_it_back() -> None:
    value = {"mde": math.inf, "low": -math.inf, "t": math.nan, "n": 3, "why_not": None,
             "p": math.nan, "p_why": "undefined: one resample", "by": [1.0, math.nan, math.inf],
             "nested": [{"x": math.nan}]}
    text = strict_json.dumps(value, sort_keys=True)
    data = strict_loads(text)
    assert data["mde"] is None and data["mde_why"] == "infinite"
    assert data["low_why"] == "-infinite" and data["t_why"] == "undefined"
    assert data["p_why"] == "undefined: one resample"  # the writer's own reason is kept
    assert data["by"] == [1.0, None, None] and data["by_why"] == "undefined at 1; infinite at 2"
    assert data["nested"] == [{"x": None, "x_why": "undefined"}] and data["why_not"] is None
    back = strict_json.loads(text)
    assert math.isinf(back["mde"]) and back["low"] == -math.inf and math.isnan(back["t"])
    assert back["by"][0] == 1.0 and math.isnan(back["by"][1]) and math.isinf(back["by"][2])
    assert back["n"] == 3 and back["why_not"] is None
    assert strict_json.dumps(back, sort_keys=True) == text  # stable when written again


def test_task_haystack_files_are_strict_json(tmp_path: Path) -> None:
    undefined = copy.deepcopy(HAYSTACK_CELLS)  # the cells are shared with other tests
    undefined[0].metrics = {**undefined[0].metrics, "t": math.nan, "p": math.nan}
    write_reports(tmp_path, undefined)
    for name in ("haystack-resamples.json", "haystack-summary.json"):
        strict_loads((tmp_path / name).read_text())


def test_a_longscore_min_run_shows_measured_scores_where_longscore_is_undefined(
        pytester: pytest.Pytester) -> None:
    """mock:constant scores 0 everywhere: the base is 0, LongScore undefined on the long cells,
    which the threshold judges instead; every report shows the scores they were measured at,
    labelled."""
    make_suite(pytester)
    report = pytester.path / "report.html"
    pytester.runpytest("--model", "mock:constant", "--lengths", "1k,2k,3k,4k", "--depths",
                       "0,25,50", "--samples", "3", "--longscore-base-lengths", "1k,2k",
                       "-p", "no:randomly", "--longscore-min", "-20", "--lceval-run", "z",
                       f"--html={report}").assert_outcomes(failed=12)
    run = pytester.path / "reports" / "z"
    results = read_results(run)
    _, _, grid, marks = heatmaps.score_grid(results, lambda r: r.depth,
                                            heatmaps.score_marks(longscore_undefined))
    assert all(value == 0.0 for row in grid for value in row)  # no 'skip' anywhere
    assert {m.note() for row in marks for m in row} == {"N=3 ✗", "N=3 ✗\nLC undef."}
    rows = {nodeid: entry["resultsTableRow"][2] for nodeid, [entry] in html_tests(report).items()}
    assert rows["test_suite.py::test_cell[toy-3k-25]"] == '<td class="col-score">0.000</td>'
    page = report.read_text(encoding="utf-8")
    table = page[page.index("<h3>Scores by task and length</h3>"):]
    table = table[:table.index("</table>")]
    assert ">skip<" not in table and table.count("LC undefined</span>") == 2
    text = (run / "summary.md").read_text()
    assert "| toy | 3k | 0.000 | string_match_all (0–1) | 1 | 9 |" in text
    assert "| toy | 4k | 0.000 | string_match_all (0–1) | 1 | 9 |" in text
    longscore_md = (run / "longscore-toy.md").read_text()
    assert "(cases: 1k all cases of the run's cells; 2k all cases of the run's cells)" \
        in longscore_md
    assert "pools them into one base (depths 0, 25, 50 %)" in longscore_md
    assert "a long cell fails when its LC is below --longscore-min -20%" in longscore_md


def test_scores_by_length_average_the_same_tasks_at_every_length() -> None:
    """The issue's 12 tasks at 1k against 9 at 2k made a model look better with length."""
    cells = [cell("a-1k-50", 0.9), cell("b-1k-50", 0.0), cell("a-2k-50", 0.8),
             cell("b-2k-50", math.nan, "skipped", "too long")]
    for result in cells:
        result.scores = [] if math.isnan(result.score) else [result.score]
    rows = length_rows(cells)
    assert [(r.length, r.score, r.tasks, r.left_out) for r in rows] == [
        (1024, pytest.approx(0.9), 1, ("b",)), (2048, pytest.approx(0.8), 1, ("b",))]


def _compared(label: str, status: str, diff: float, outcome: str = "passed",
              before: str = "passed") -> CellResult:
    result = cell(label, 0.5 + diff, outcome)
    result.judgements = [Judgement("baseline", status != "regressed", "", {
        "baseline": "base", "baseline_status": status, "baseline_score": 0.5,
        "baseline_diff": diff, "baseline_p": 0.0004, "baseline_outcome": before})]
    return result


def test_look_first_names_the_regressions_of_a_comparison_run() -> None:
    cells = [_compared("a-1k-0", "inconclusive", -0.5, "failed", "failed"),
             _compared("a-2k-0", "regressed", -0.2, "failed"),
             _compared("a-4k-0", "inconclusive", -0.4, "failed")]
    assert look_first(cells) == (
        "Look first at: a-2k-0 (regressed against base: 50.0% → 30.0%, Δ -20.0 points, "
        "p <0.001); a-4k-0 (FAIL, score 10.0%); a-1k-0 (FAIL, score 0.0%, also failed in the "
        "baseline).")


def test_the_badge_of_a_comparison_leads_with_the_regressions() -> None:
    assert badge_text(Tally("all", passed=9, failed=0), regressed=0) == (
        "0 regressed, 100% (9/9)", "#4c1")
    assert badge_text(Tally("all", passed=8, failed=1), regressed=1) == (
        "1 regressed, 89% (8/9)", FAIL_COLOUR)


def test_samples_keep_failing_cases_first_and_a_window_around_the_gold() -> None:
    assert failing_first([1.0, 0.0, None, 0.5, 0.0], 3) == [2, 1, 4]
    prompt = "head " * 300 + "One of the special magic numbers for k1 is: 7654321. " + \
        "tail " * 300
    clipped = clip_sample(prompt, ("7654321", "no"))
    assert clipped.startswith("head ") and clipped.endswith("tail ")
    assert "special magic numbers for k1 is: 7654321." in clipped
    assert clipped.count("characters ...]") == 2 and len(clipped) < 2200
    assert clip_sample(prompt).count("characters ...]") == 1  # no gold: head and tail only
    assert clip_sample(prompt, ("head",)).count("characters ...]") == 1  # gold in the head


def test_a_cell_answered_in_another_cells_call_says_shared_call() -> None:
    result = cell("a-1k-0", 1.0)
    result.scores, result.n, result.model_requests = [1.0], 1, 0
    text = cell_html(result)
    assert "model: shared call (no request of its own" in text
    assert "(0 requests)" not in text


def test_longscore_figure_has_a_panel_per_task_and_a_message_when_nothing_is_defined() -> None:
    base = {"longscore_base": 0.75, "longscore_window": 8192, "longscore_floor": 0.05,
            "longscore_base_n": 9, "longscore_role": "long"}
    cells = [cell(f"t{i}-4k-{depth}", 0.5, longscore=-33.3, **base)
             for i in range(9) for depth in (0, 50)]
    for result in cells:
        result.depth = float(result.nodeid.rpartition("-")[2][:-1])
    figure = longscore_figure("recall", "m", task_rows(cells)["recall"], -20.0)
    visible = [axes for axes in figure.axes if axes.get_visible()]
    assert [axes.get_title().split("\n")[0] for axes in visible] == [f"t{i}" for i in range(9)]
    assert all(axes.get_legend() is None for axes in visible)
    assert "lowest LC: t0 -33.3% at 4k" in figure._suptitle.get_text()
    plt.close(figure)
    for result in cells:
        result.metrics.update(longscore=None, longscore_base=0.0)
    figure = longscore_figure("recall", "m", task_rows(cells)["recall"], -20.0)
    assert figure.axes == []
    assert "LongScore is undefined for every task of recall" in figure.texts[0].get_text()
    plt.close(figure)


def test_task_haystack_diagnostic_has_a_colour_bar() -> None:
    figure = diagnostic_figure(haystack_measured(HAYSTACK_CELLS))
    bars = [axes for axes in figure.axes if axes.get_ylabel() == "verdict (mean where several)"]
    assert len(bars) == 1
    assert [t.get_text() for t in bars[0].get_yticklabels()] == ["-1 FAIL", "0 PASS",
                                                                "+1 EXCEL"]
    plt.close(figure)


def test_a_recall_only_run_prints_no_task_haystack_start_up_lines(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    outcome = pytester.runpytest("--model", "mock:grep", "--lengths", "1k", "--depths", "50",
                                 "--samples", "1", "--lceval-tasks", "niah_single_1",
                                 "-p", "no:randomly")
    outcome.assert_outcomes(passed=1)
    assert not [line for line in outcome.stdout.lines if line.startswith("haystack:")]
    outcome.stdout.fnmatch_lines(["lceval: plan: 1 suite (recall)*"])


def test_html_escapes_what_the_new_rows_show() -> None:
    result = _compared("a-1k-0", "regressed", -0.5, "failed")
    result.samples = [{"index": 4, "prompt": "<b>x</b>", "gold": ["<i>"], "output": "<s>",
                       "score": 0.0}]
    result.n = 1
    text = cell_html(result)
    assert "Sample (case 4): score 0.0, gold &lt;i&gt;" in text
    assert html.escape("<b>x</b>") in text and "<b>x</b>" not in text
