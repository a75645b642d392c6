"""Reports: summary.md/json, badges, and the pytest-html report (with -n 2 and hostile outputs)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_baseline import DEGRADED, GOOD, SMALL, make_suite, save_base

from pytest_lceval.report.badge import FAIL_COLOUR, PASS_COLOUR
from pytest_lceval.report.html import assign_artifacts, clip
from pytest_lceval.report.summary import cell_label

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
ONE_PIXEL_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKm"
                 "MIQAAAABJRU5ErkJggg==")
OTHER_REPORTS = f"""
import base64

import pytest


@pytest.hookimpl
def pytest_lceval_session_finish(config, run_dir, results):
    # Stand-ins for the Task Haystack and LongScore outputs, found by file-name prefix.
    (run_dir / "haystack-toy-diagnostic.md").write_text("| task | 0% |\\n| a | <b>x</b> |\\n")
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
                    "base").assert_outcomes(passed=2, failed=2)
    run = suite.path / "reports" / "cmp"
    text = (run / "summary.md").read_text()
    assert len(text) < 4000
    assert text.startswith("### pytest-lceval ❌ 2 of 4 cells failed: pass rate 50% (2/4), "
                           "0 skipped")
    assert "| toy | 2 | 2 | 0 | 50% |" in text
    assert "| toy · `toy-1k-50` | 0.000 (0.000–0.242) | 12 | FAIL: baseline |" in text
    assert "**Against baseline `base`:** 2 regressed, 2 unchanged" in text
    assert "| toy · `toy-2k-50` | 1.000 | 0.000 | -1.000 (-1.000 to -0.471) | <0.001 | 0.500 " \
           "| regressed |" in text
    data = json.loads((run / "summary.json").read_text())  # strict JSON: no NaN
    assert data["ok"] is False and data["total"] == {"name": "all", "passed": 2, "failed": 2,
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


def test_html_report_with_n_2_has_cell_extras_and_suite_sections(
        suite: pytest.Pytester) -> None:
    make_suite(suite, OTHER_REPORTS)
    save_base(suite)
    report = suite.path / "report.html"
    suite.runpytest("--model", DEGRADED, *SMALL, "--lceval-run", "cmp", "--lceval-compare",
                    "base", "-n", "2", f"--html={report}").assert_outcomes(passed=2, failed=2)
    tests = html_tests(report)
    assert len(tests) == 4
    for nodeid, [entry] in tests.items():
        [extra] = [e for e in entry["extras"] if e["format_type"] == "html"]
        assert "verdict: baseline" in extra["content"] and "Sample 1 of 12" in extra["content"]
        assert entry["score"] in ("1.000", "0.000"), nodeid
    page = report.read_text(encoding="utf-8")
    assert "<h2>Suite toy</h2>" in page and "Comparison with baseline base" in page
    assert 'alt="heatmap-toy-toy.png"' in page and 'alt="badge.svg"' in page
    assert "<h4>haystack-toy-diagnostic.md</h4><pre>| task | 0% |" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page  # markdown from the run folder is escaped too
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
                                                        "task_haystack"]).items()}
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
