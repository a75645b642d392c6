"""Reports: summary.md/json, badges, and the pytest-html report (with -n 2 and hostile outputs)."""

from __future__ import annotations

import csv
import html
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import pytest
from test_baseline import DEGRADED, GOOD, SMALL, make_suite, save_base
from test_haystack_report import CELLS as HAYSTACK_CELLS

from pytest_lceval.benchmarks.longbench100.longscore.longscore_plugin import (
    pytest_lceval_finding as longscore_finding,
)
from pytest_lceval.benchmarks.longbench100.longscore.longscore_plugin import (
    pytest_lceval_report_artifacts as longscore_artifacts,
)
from pytest_lceval.benchmarks.longbench100.longscore.longscore_plugin import (
    pytest_lceval_undefined as longscore_undefined,
)
from pytest_lceval.benchmarks.longbench100.longscore.summary import write_summaries
from pytest_lceval.benchmarks.task_haystack.report import write_reports
from pytest_lceval.benchmarks.task_haystack.task_haystack_plugin import (
    pytest_lceval_report_artifacts as haystack_artifacts,
)
from pytest_lceval.foundation.grid import parse_length
from pytest_lceval.report import figure_style, heatmaps
from pytest_lceval.report.badge import FAIL_COLOUR, PASS_COLOUR
from pytest_lceval.report.findings import look_first, skip_reasons, worst_cells
from pytest_lceval.report.html import (
    HEATMAPS,
    assign_artifacts,
    clip,
    csv_html,
    rounded,
    score_table_html,
    skips_html,
    suite_sections,
)
from pytest_lceval.report.summary import cell_label, summarize
from pytest_lceval.results.cells import CellResult

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
ONE_PIXEL_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKm"
                 "MIQAAAABJRU5ErkJggg==")
OTHER_REPORTS = f"""
import base64

import pytest


@pytest.hookimpl
def pytest_lceval_session_finish(config, run_dir, results):
    # Stand-ins for the Task Haystack and LongScore outputs, found by file-name prefix.
    (run_dir / "haystack-toy-diagnostic.md").write_text(
        "# Diagnostic\\n\\n| task | 0% |\\n|---|---|\\n| a | <b>x</b> |\\n")
    (run_dir / "haystack-niah.png").write_bytes(base64.b64decode("{ONE_PIXEL_PNG}"))
    (run_dir / "longscore-longbench100.csv").write_text("length,LC\\n8k,-12.5\\n")
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_suite(pytester)


def html_tests(report: Path) -> dict[str, list[dict[str, Any]]]:
    """pytest-html's per-test data, from the JSON blob its page renders."""
    blob = re.search(r'data-jsonblob="([^"]*)"', report.read_text(encoding="utf-8"))
    assert blob is not None
    return json.loads(html.unescape(blob.group(1)))["tests"]


def test_summary_markdown_is_short_and_names_verdicts_worst_cells_and_deltas(
        suite: pytest.Pytester) -> None:
    save_base(suite)
    suite.runpytest("--model", DEGRADED, *SMALL, "--lceval-run", "cmp", "--lceval-compare",
                    "base").assert_outcomes(passed=4)  # the pooled suite gate fails the run
    run = suite.path / "reports" / "cmp"
    text = (run / "summary.md").read_text()
    assert len(text) < 4000
    assert text.startswith("### pytest-lceval ❌ 1 regressed against `base` (toy); 1 suite gate "
                           "failed: baseline_suite (toy): pass rate 100% (4/4), 0 skipped")
    assert "| toy | 4 | 0 | 0 | 100% |" in text
    assert "| toy · `toy-1k-50` | 0.000 (0.000–0.242) | string_match_all (0–1) | 12 | " \
           "passed | regressed against base: 100.0% → 0.0%, Δ -100.0 points, " \
           "p &lt;0.001 |" in text
    assert "**1 regressed against `base` (toy).** Cells: 2 regressed, 2 unchanged" in text
    assert "Not listed: 2 unchanged" in text and "`toy-1k-0` | string_match_all (0–1) | " \
        "1.000 | 1.000" not in text
    # per length, HELMET's way: the mean over tasks of each task's cases, depths pooled
    assert "| toy | 1k | 0.500 | string_match_all (0–1) | 1 | 24 |" in text
    assert "| toy | 2k | 0.500 | string_match_all (0–1) | 1 | 24 |" in text
    assert "| toy · `toy-2k-50` | string_match_all (0–1) | 1.000 | 0.000 | -1.000 (-1.000 to " \
           "-0.471) | <0.001 | 0.500 | regressed |" in text
    data = json.loads((run / "summary.json").read_text())  # strict JSON: no NaN
    assert data["ok"] is False and data["total"] == {"name": "all", "passed": 4, "failed": 0,
                                                     "skipped": 0}
    assert len(data["cells"]) == 4 and data["delta_counts"] == {"regressed": 2, "unchanged": 2}


def test_badges_per_run_and_suite_carry_the_pass_rate_and_colour(
        suite: pytest.Pytester) -> None:
    suite.runpytest("--model", GOOD, *SMALL, "--lceval-run", "good").assert_outcomes(passed=4)
    suite.runpytest("--model", "mock:constant", *SMALL[:-2], "--lceval-run", "bad")
    good = (suite.path / "reports" / "good" / "badge.svg").read_text()
    assert "100% (4/4)" in good and PASS_COLOUR in good
    bad = (suite.path / "reports" / "bad" / "badge-toy.svg").read_text()
    assert "0% (0/4)" in bad and FAIL_COLOUR in bad and "lceval toy" in bad


GROUPS = [HEATMAPS, *haystack_artifacts(), *longscore_artifacts()]
"""The run folder's figure groups of a session with the built-in plugins."""


def test_html_report_with_n_2_has_cell_extras_and_suite_sections(
        suite: pytest.Pytester) -> None:
    make_suite(suite, OTHER_REPORTS)
    save_base(suite)
    report = suite.path / "report.html"
    suite.runpytest("--model", DEGRADED, *SMALL, "--lceval-run", "cmp", "--lceval-compare",
                    "base", "-n", "2", f"--html={report}").assert_outcomes(passed=4)
    tests = html_tests(report)
    assert len(tests) == 4
    for nodeid, [entry] in tests.items():
        [extra] = [e for e in entry["extras"] if e["format_type"] == "html"]
        assert "verdict: baseline" in extra["content"]
        assert "3 of 12 cases kept, the lowest-scoring first" in extra["content"]
        assert entry["score"] in ("1.000", "0.000"), nodeid
        assert "string_match_all (0–1)" in extra["content"]
    page = report.read_text(encoding="utf-8")
    assert "<h2>Suite toy</h2>" in page and "Comparison with baseline base" in page
    assert 'alt="heatmap-toy-toy.png"' in page and 'alt="badge.svg"' in page
    # markdown from the run folder is rendered, its tables as tables, its markup escaped
    assert "<h4>haystack-toy-diagnostic.md</h4><div class=\"md scroll\"><h1>Diagnostic</h1>" \
        in page
    assert "<td>a</td>\n<td>&lt;b&gt;x&lt;/b&gt;</td>" in page
    assert "<h2>Task Haystack</h2>" in page and 'alt="haystack-niah.png"' in page
    assert "<h2>LongScore</h2>" in page and "<td>8k</td><td>-12.5</td>" in page


def test_a_model_output_with_markup_stays_inert_text(suite: pytest.Pytester) -> None:
    report = suite.path / "report.html"
    suite.runpytest("--model", f"mock:constant?text={HOSTILE}", "--lengths", "256", "--depths",
                    "0", "--samples", "2", f"--html={report}").assert_outcomes(failed=1)
    [[entry]] = html_tests(report).values()
    content = entry["extras"][0]["content"]
    assert html.escape(HOSTILE) in content
    assert "<script" not in content and "<img src=x" not in content
    assert "alert(1)</script>" not in report.read_text(encoding="utf-8")


def test_artifacts_go_to_the_suite_they_name_else_their_group(tmp_path: Path) -> None:
    for name in ("heatmap-recall-json_kv.png", "haystack-task_haystack-niah.png",
                 "haystack-diagnostic.md", "longscore-recall.csv", "longscore-table.md",
                 "longscore-raw.json", "heatmap-recall_extra-x.png"):
        (tmp_path / name).write_text("x")
    sections = {k: sorted(p.name for p in v)
                for k, v in assign_artifacts(tmp_path, ["recall", "recall_extra",
                                                        "task_haystack"], GROUPS).items()}
    assert sections == {
        "recall": ["heatmap-recall-json_kv.png", "longscore-recall.csv"],
        "recall_extra": ["heatmap-recall_extra-x.png"],
        "task_haystack": ["haystack-diagnostic.md", "haystack-task_haystack-niah.png"],
        "LongScore": ["longscore-table.md"],
    }


def test_clip_and_labels() -> None:
    assert clip("abcdef", 10) == "abcdef"
    assert clip("a" * 30, 10) == "aaaaa\n[... 20 characters ...]\naaaaa"
    assert cell_label("suites/test_recall.py::test_recall[json_kv-8k-50]") == "json_kv-8k-50"
    assert cell_label("t.py::test_plain") == "test_plain"


# -- what to look at first, skip reasons, tables and figures made to be read -----------------


def cell(label: str, score: float, outcome: str = "passed", reason: str = "",
         depth: float | None = 50.0, **metrics: Any) -> CellResult:
    """A recall-like cell from its parameter id 'task-length[-depth]'."""
    task, length = label.split("-")[:2]
    result = CellResult(nodeid=f"suites/test_recall.py::test_recall[{label}]", suite="recall",
                        task=task, length=parse_length(length), depth=depth, extra={},
                        model="mock:grep", fingerprint="f", seed=42, source="fixtures",
                        score=score, outcome=outcome, reason=reason, metric="accuracy")
    result.metrics = dict(metrics)
    return result


LONGSCORE = [longscore_finding]
WITH_LONGSCORE = SimpleNamespace(hook=SimpleNamespace(pytest_lceval_undefined=longscore_undefined))
"""A session's config as the report's session-end hooks read it, with the LongScore plugin."""
"""LongScore's plugin reads its long cells for the report (pytest_lceval_finding)."""


def test_look_first_names_failed_cells_then_longscore_drops_then_the_rest() -> None:
    cells = [cell("json_kv-1k-0", 1.0), cell("json_kv-2k-50", 0.25, "failed"),
             cell("json_kv-4k-50", 0.5, longscore_role="long", longscore=-40.0),
             cell("json_kv-4k-0", 0.0, "failed"), cell("json_kv-8k-0", math.nan, "skipped"),
             cell("json_kv-8k-50", 0.375, "failed", longscore_role="long", longscore=-62.5)]
    assert look_first(cells, verdicts=LONGSCORE) == (
        "Look first at: json_kv-8k-50 (FAIL, LongScore -62.5%, score 37.5%); json_kv-4k-0 "
        "(FAIL, score 0.0%); json_kv-2k-50 (FAIL, score 25.0%); and 1 more.")
    assert [f.result.nodeid[-14:] for f in worst_cells(cells, LONGSCORE)][-1] == "[json_kv-1k-0]"
    assert look_first(cells[:1] + cells[2:3], verdicts=LONGSCORE) == (
        "Look first at: json_kv-4k-50 (LongScore -40.0%, score 50.0%).")
    assert look_first([cell("a-1k-0", 0.9), cell("a-2k-0", 0.6), cell("a-4k-0", 1.0)],
                      limit=1) == "Nothing failed or dropped; lowest: a-2k-0 (score 60.0%)."
    assert look_first(cells[4:5], verdicts=LONGSCORE) == (
        "Look first at the skip reasons: no cell was measured (1 skipped).")


def test_skip_reasons_are_grouped_most_common_first_and_shown_per_suite() -> None:
    window = "cell length 8192 tokens exceeds the model's context window of 5000 tokens"
    cells = [cell(f"t{i}-8k-0", math.nan, "skipped", window) for i in range(8)]
    cells += [cell("q-1k", math.nan, "skipped", "all cases excluded <prior knowledge>", None),
              cell("t0-1k-0", 1.0)]
    assert [(g.reason, len(g.cells)) for g in skip_reasons(cells)] == [
        (window, 8), ("all cases excluded <prior knowledge>", 1)]
    html_text = skips_html(cells)
    assert "<h3>Skipped cells</h3>" in html_text
    assert (f"<td>{html.escape(window)}</td><td class=\"num\">8</td><td>t0-8k-0, t1-8k-0, "
            "t2-8k-0, t3-8k-0, t4-8k-0, t5-8k-0 and 2 more</td>") in html_text
    assert "all cases excluded &lt;prior knowledge&gt;" in html_text
    assert skips_html(cells[-1:]) == ""


def test_score_table_is_rulers_task_by_length_table_with_measured_scores_shown(
        tmp_path: Path) -> None:
    """Depth cells averaged, an Avg column, an average row over the tasks measured at every
    length; a cell whose LongScore is undefined shows its measured score, labelled."""
    undefined = "LongScore undefined at 4k: base ability 0.000 is below the floor 0.05"
    cells = [cell("kv_retrieval-2k", 2 / 3, depth=None),
             cell("kv_retrieval-4k", 0.125, "failed", depth=None),
             cell("counting_stars-2k", 1.0, depth=None),
             cell("counting_stars-4k", math.nan, "skipped", "too long <4k>", depth=None),
             cell("json_kv-2k-0", 1.0, depth=0.0), cell("json_kv-2k-50", 0.0, "failed"),
             cell("json_kv-4k-0", 0.5, "skipped", undefined, depth=0.0,
                  longscore_undefined=undefined),
             cell("json_kv-4k-50", 0.5, "skipped", undefined, longscore_undefined=undefined)]
    table = score_table_html(cells, longscore_undefined)
    assert "<th>task</th><th>metric</th><th>2k</th><th>4k</th><th>Avg</th>" in table
    assert ("<tr><td>counting_stars</td><td>accuracy (0–1)</td><td class=\"num\">100.0</td>"
            "<td class=\"num\"><span class=\"skipped\" title=\"too long &lt;4k&gt;\">skip</span>"
            "</td><td class=\"num\">100.0 (1 of 2 lengths)</td></tr>") in table
    assert ("<tr><td>json_kv</td><td>accuracy (0–1)</td><td class=\"num\">50.0 (1 FAIL)</td>"
            f"<td class=\"num\">50.0 <span class=\"undefined\" title=\"{undefined}\">LC "
            "undefined</span></td><td class=\"num\">50.0</td></tr>") in table
    assert ("<tr><td>kv_retrieval</td><td>accuracy (0–1)</td><td class=\"num\">66.7</td>"
            "<td class=\"num\">12.5 (FAIL)</td><td class=\"num\">39.6</td></tr>") in table
    assert ("<td><b>average of 2 tasks</b></td><td></td><td class=\"num\"><b>58.3</b></td>"
            "<td class=\"num\"><b>31.2</b></td><td class=\"num\"><b>44.8</b></td>") in table
    assert score_table_html([cell("a-1k-0", math.nan, "skipped", "no")]).count(">skip<") == 1
    heatmaps.pytest_lceval_session_finish(config=WITH_LONGSCORE,  # type: ignore[arg-type]
                                          run_dir=tmp_path,
                                          results=cells)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heatmap-recall-json_kv.png",
                                                          "heatmap-recall.png"]


def test_heatmaps_show_every_measured_score_with_n_and_fail_mark() -> None:
    """An undefined LongScore is a label on the measured score, never 'skip'."""
    undefined = "LongScore undefined at 4k"
    cells = [cell("json_kv-2k-50", 0.0, "failed"),
             cell("json_kv-4k-50", 0.5, "skipped", undefined, longscore_undefined=undefined),
             cell("json_kv-8k-50", math.nan, "skipped", "too long")]
    for result in cells:
        result.n = 3
    lengths, rows, grid, marks = heatmaps.score_grid(cells, lambda r: r.depth,
                                                      heatmaps.score_marks(longscore_undefined))
    assert grid[0][:2] == [0.0, 0.5] and math.isnan(grid[0][2])
    assert [m.note() for m in marks[0][:2]] == ["N=3 ✗", "N=3\nLC undef."]
    figure = heatmaps.heatmap_figure(lengths, ["50%"], grid, "depth", "json_kv", "m", marks)
    texts = [(t.get_text(), t.get_color()) for t in figure.axes[0].texts]
    assert ("0", "white") in texts and ("50", "black") in texts and ("skip", "black") in texts
    assert ("N=3\nLC undef.", "black") in texts
    plt.close(figure)


def test_labels_are_white_on_dark_cells_and_black_on_light_ones() -> None:
    colours = matplotlib.colormaps["RdYlGn"]
    assert figure_style.label_colour(tuple(colours(0.0))) == "white"  # dark red
    assert figure_style.label_colour(tuple(colours(1.0))) == "white"  # dark green
    assert figure_style.label_colour(tuple(colours(0.5))) == "black"  # pale yellow


def test_csv_tables_are_rounded_and_fit_the_page(tmp_path: Path) -> None:
    write_reports(tmp_path, HAYSTACK_CELLS)  # the Task Haystack resamples table
    with (tmp_path / "haystack-resamples.csv").open(newline="") as handle:
        page = csv_html("haystack-resamples.csv", list(csv.reader(handle)))
    assert ("<p class='muted'>Every row: setting recall, length_setting 3t1s, n_task 3, n_shot 1, "
            "l_acc 0.6, test_size 4, prompt_tokens_mean 1000, t -3.0, p 0.01</p>") in page
    assert '<div class="scroll"><table class="lc data"><tr><th>task</th><th>permutation</th>' \
           "<th>stream_index</th><th>depth</th><th>resample</th><th>s_acc</th><th>verdict</th>" \
           "<th>test</th></tr><tr class=\"fail\"><td>a</td><td>0</td><td>0</td><td>0.0</td>" \
           "<td>0</td><td>0.8</td><td>FAIL</td><td>a-3t1s-p0-recall</td></tr>" in page
    tests = re.findall(r"<tr( class=\"fail\")?><td>.*?<td>([^<]*)</td></tr>", page)
    assert [test for _, test in tests][:7] == ["a-3t1s-p0-recall"] * 3 + ["a-3t1s-p1-recall"] * 3 \
        + ["b-3t1s-p0-recall"]  # FAIL rows first
    assert [bool(fail) for fail, _ in tests] == [True] * 6 + [False] * 12
    assert "<td>0.85</td>" in page and "0.8500000000000001" not in page
    assert [rounded(v) for v in ("0.75", "-0.9999999999999999", "33.333333333336", "0.0",
                                 "5000", "nan", "PASS", "-0.6546536707079771")] == [
        "0.75", "-1.0", "33.3", "0.0", "5000", "nan", "PASS", "-0.655"]


@pytest.mark.parametrize("lengths, rows", [(1, 1), (2, 5), (6, 3)])
def test_heatmap_title_stays_clear_of_axis_labels(lengths: int, rows: int) -> None:
    model = "hf:/home/someone/checkpoints/llama-3.1-8b-instruct-rope-extended-128k-final"
    figure = heatmaps.heatmap_figure([1024 * 2**i for i in range(lengths)],
                                     [f"{25 * i}%" for i in range(rows)],
                                     [[0.5] * lengths for _ in range(rows)],
                                     "depth of key information", "niah_multikey_3 (recall)",
                                     model)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    [axes, _colorbar] = figure.axes
    title = axes.title.get_window_extent(renderer)
    page = figure.bbox
    assert page.x0 <= title.x0 and title.x1 <= page.x1 and title.y1 <= page.y1
    for label in [axes.yaxis.label, *axes.get_yticklabels(), axes.xaxis.label]:
        assert not title.overlaps(label.get_window_extent(renderer)), label.get_text()
    assert axes.get_title().split("\n") == ["niah_multikey_3 (recall)",
                                            "hf:/home/someone/checkpoints/…ruct-rope-extended"
                                            "-128k-final"]
    plt.close(figure)


def test_html_report_shows_look_first_skip_reasons_and_skipped_rows(
        suite: pytest.Pytester) -> None:
    report = suite.path / "report.html"
    suite.runpytest("--model", "mock:grep?miss=40-60&window=1500", "--lengths", "1k,2k",
                    "--depths", "0,50", "--samples", "4", f"--html={report}"
                    ).assert_outcomes(passed=1, failed=1, skipped=2)
    page = report.read_text(encoding="utf-8")
    assert '<p class="look-first">Look first at: toy-1k-50 (FAIL, score 0.0%).</p>' in page
    reason = "cell length 2048 tokens exceeds the model's context window of 1500 tokens"
    assert (f"<td>{html.escape(reason)}</td><td class=\"num\">2</td><td>toy-2k-0, toy-2k-50"
            "</td>") in page
    rows = {nodeid: "".join(entry["resultsTableRow"][2:4])
            for nodeid, [entry] in html_tests(report).items()}
    assert rows["test_suite.py::test_cell[toy-2k-0]"] == \
        f'<td class="col-score">skipped: {html.escape(reason)}</td>' \
        '<td class="col-metric">string_match_all</td>'
    assert rows["test_suite.py::test_cell[toy-1k-0]"] == \
        '<td class="col-score">1.000</td><td class="col-metric">string_match_all</td>'


def test_longbench100_section_has_look_first_score_table_figures_and_longscore_table(
        tmp_path: Path) -> None:
    base = {"longscore_base": 0.75, "longscore_window": 8192, "longscore_floor": 0.05,
            "longscore_base_on": "2k"}
    cells = [
        cell("kv_retrieval-2k", 0.75, depth=None, longscore_role="base", **base),
        cell("kv_retrieval-4k", 0.375, "failed", depth=None, longscore_role="long",
             longscore=-50.0, longscore_ci_low=-75.0, longscore_ci_high=-25.0, **base),
        cell("kv_retrieval-8k", math.nan, "skipped", "too long for the window", depth=None),
    ]
    for result in cells:
        result.suite = "longbench100"
    heatmaps.pytest_lceval_session_finish(config=WITH_LONGSCORE,  # type: ignore[arg-type]
                                          run_dir=tmp_path,
                                          results=cells)
    write_summaries(tmp_path, cells, "2k", None)
    [section] = suite_sections(tmp_path, summarize("run", cells), cells, GROUPS, LONGSCORE)
    assert ('<p class="look-first">Look first at: kv_retrieval-4k (FAIL, LongScore -50.0%, '
            "score 37.5%).</p>") in section
    assert "<td>too long for the window</td><td class=\"num\">1</td>" in section
    assert '<td>kv_retrieval</td><td>accuracy (0–1)</td><td class="num">75.0</td>' \
           '<td class="num">37.5 (FAIL)</td>' in section
    assert 'alt="heatmap-longbench100.png"' in section and 'alt="longscore-longbench100.png"' \
        in section
    # LongScore's Table 7 layout, from its markdown, as HTML tables; its CSV only named
    assert "<td>kv_retrieval</td>\n<td>2k</td>\n<td>75.0</td>\n<td>0</td>\n<td>37.5</td>\n" \
           "<td>-50.0</td>\n<td>-50.0 [-75.0, -25.0]</td>" in section
    assert "The same table for scripts: longscore-longbench100.csv" in section
    assert "<th>suite</th>" not in section
