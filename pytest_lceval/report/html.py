"""pytest-html integration: per-test extras and per-suite sections, through pytest-html's hooks.

- Per test: the cell's properties and verdicts, and its first prompts and answers, as an HTML
  extra. pytest-html reads extras from test reports, which xdist ships from the workers to the
  controller, so they are attached in ``pytest_runtest_makereport`` where the test ran.
- Per run (controller only, ``pytest_html_results_summary``): badges and headline, then one
  section per suite with its heatmaps, the Task Haystack and LongScore outputs found in the run
  folder by file-name prefix, and the comparison with the saved run. The core's sessionfinish
  runs first (tryfirst), so results are merged and the session reports drawn by then.

Everything that comes from a model or a data set is HTML-escaped: pytest-html inserts extras
with innerHTML, and a model output may well contain ``<script>`` or ``<img onerror=...>``.
"""

from __future__ import annotations

import base64
import csv
from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

import pytest

from ..grid import format_depth, format_length
from ..plugin import RUN_DIR
from ..results import CellResult, read_results
from .badge import badge_path
from .summary import DeltaRow, RunSummary, Tally, headline, number, percent, pvalue, summarize

PROMPT_CHARS = 1500
"""Cap on a prompt's characters shown per sample, head and tail, the middle elided (results
already keep only 600 + 600 of each prompt: this only guards against suites that keep more)."""
OUTPUT_CHARS = 600
TABLE_ROWS = 40
"""Rows shown of a CSV table from the run folder."""
IMAGE_BYTES = 5_000_000
"""Larger images are linked by name, not embedded."""
ARTIFACT_GROUPS: tuple[tuple[str, str, str | None], ...] = (
    ("heatmap", "Depth × length heatmaps", None),
    ("haystack", "Task Haystack", "task_haystack"),
    ("longscore", "LongScore", "longbench100"),
)
"""(file-name prefix, title, the suite whose section shows it when the name names none)."""
SHOWN_SUFFIXES = (".png", ".svg", ".csv", ".md")
STYLE = """<style>
.lceval h2 { margin-top: 1.5em; } .lceval h3 { margin: 1em 0 0.3em; }
.lceval img.plot { max-width: 100%; margin: 4px 8px 8px 0; border: 1px solid #ddd; }
.lceval table.lc { border-collapse: collapse; margin: 4px 0 10px; font-size: 13px; }
.lceval table.lc th, .lceval table.lc td { border: 1px solid #ccc; padding: 2px 8px;
  text-align: left; vertical-align: top; }
.lceval table.lc td.num { text-align: right; font-variant-numeric: tabular-nums; }
.lceval .regressed, .lceval .unpaired, .lceval .fail { background: #fde0dc; }
.lceval .small-drop, .lceval .inconclusive { background: #fff1d6; }
.lceval .improved { background: #dcecfd; } .lceval .pass { background: #e3f6df; }
.lceval pre { white-space: pre-wrap; word-break: break-word; max-height: 20em; overflow: auto;
  background: #f7f7f7; padding: 6px; margin: 2px 0 8px; }
.lceval .muted { color: #666; }
</style>"""


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters: head and tail kept, the middle replaced by a count."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters ...]\n{text[-half:]}"


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], row_classes: Iterable[str] = (),
           numeric: frozenset[int] = frozenset()) -> str:
    """An HTML table of already-escaped cells."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = []
    classes = list(row_classes)
    for index, row in enumerate(rows):
        cls = f' class="{classes[index]}"' if index < len(classes) and classes[index] else ""
        cells = "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                        for i, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f'<table class="lc"><tr>{head}</tr>{"".join(body)}</table>'


# -- per test -------------------------------------------------------------------------------


def cell_html(result: CellResult) -> str:
    """Properties, verdicts and first samples of one cell, every value escaped."""
    ci = f"{number(result.ci_low)}–{number(result.ci_high)}"
    rows = [
        ("score", f"{number(result.score)} (95% CI {ci}), N={result.n}"),
        ("outcome", result.outcome + (f": {result.reason}" if result.reason else "")),
        ("cell", f"{result.task} · {format_length(result.length)} tokens"
                 + ("" if result.depth is None else f" · depth {format_depth(result.depth)}%")
                 + (f" · {result.extra}" if result.extra else "")),
        ("input tokens", f"mean {result.input_tokens_mean:.0f}, max {result.input_tokens_max}"),
        ("model", f"{result.model} (fingerprint {result.fingerprint[:12]})"),
        ("source", result.source),
        ("time", f"build {result.seconds_build:.2f}s, model {result.seconds_model:.2f}s "
                 f"({result.model_requests} requests), score {result.seconds_score:.2f}s"),
    ]
    classes = [""] * len(rows) + ["pass" if j.passed else "fail" for j in result.judgements]
    rows += [(f"verdict: {j.criterion}", ("PASS: " if j.passed else "FAIL: ") + j.message)
             for j in result.judgements]
    rows += [(name, str(value)) for name, value in sorted(result.metrics.items())
             if isinstance(value, (int, float, str, bool)) or value is None]
    parts = [_table(("property", "value"), [(escape(k), escape(v)) for k, v in rows], classes)]
    for index, sample in enumerate(result.samples):
        gold = ", ".join(str(g) for g in sample.get("gold", []))
        parts.append(
            f"<h4>Sample {index + 1} of {result.n}: score {escape(str(sample.get('score')))}, "
            f"gold {escape(clip(gold, 200))}</h4>"
            f"<div class='muted'>prompt</div><pre>"
            f"{escape(clip(str(sample.get('prompt', '')), PROMPT_CHARS))}</pre>"
            f"<div class='muted'>output</div><pre>"
            f"{escape(clip(str(sample.get('output', '')), OUTPUT_CHARS)) or '(empty)'}</pre>")
    return "".join(parts)


def cell_extras_html(results: list[CellResult]) -> str:
    return '<div class="lceval">' + "".join(cell_html(r) for r in results) + "</div>"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when != "call" or not item.config.getoption("htmlpath", None):
        return report
    run = getattr(item, "funcargs", {}).get("lc_eval")
    results: list[CellResult] = getattr(run, "results", [])
    if results:
        from pytest_html import extras

        report.extras = [*getattr(report, "extras", []), extras.html(cell_extras_html(results))]
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_table_header(cells: list[str]) -> None:
    cells.insert(2, '<th class="sortable" data-column-type="score">Score</th>')


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
    score = dict(getattr(report, "user_properties", [])).get("score")
    text = number(float(score)) if isinstance(score, (int, float)) else ""
    cells.insert(2, f'<td class="col-score">{text}</td>')


# -- per run --------------------------------------------------------------------------------


def _data_uri(path: Path) -> str:
    mime = "image/svg+xml" if path.suffix == ".svg" else "image/png"
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _artifact_html(path: Path, siblings: set[str]) -> str:
    """One output file of the run folder: images embedded, CSV as a table, markdown as text."""
    name = escape(path.name)
    if path.suffix in (".png", ".svg"):
        if path.stat().st_size > IMAGE_BYTES:
            return f"<p class='muted'>{name} (too large to embed)</p>"
        return f'<img class="plot" alt="{name}" title="{name}" src="{_data_uri(path)}">'
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
        if not rows:
            return ""
        more = len(rows) - 1 - TABLE_ROWS
        note = f"<p class='muted'>{more} more rows in {name}</p>" if more > 0 else ""
        body = ([escape(c) for c in row] for row in rows[1 : TABLE_ROWS + 1])
        return f"<h4>{name}</h4>" + _table(map(escape, rows[0]), body) + note
    if path.suffix == ".md" and path.stem + ".csv" not in siblings:
        text = clip(path.read_text(encoding="utf-8"), 20_000)
        return f"<h4>{name}</h4><pre>{escape(text)}</pre>"
    return ""


def assign_artifacts(run_dir: Path, suites: list[str]) -> dict[str, list[Path]]:
    """Output files by section: a suite's name, or a group title when no suite claims them.

    A file belongs to suite S if its name starts with '<prefix>-S' (longest S wins), else to the
    group's home suite when that suite ran, else to a section of its own.
    """
    sections: dict[str, list[Path]] = {}
    for prefix, title, home in ARTIFACT_GROUPS:
        for path in sorted(run_dir.glob(f"{prefix}-*")):
            if path.suffix not in SHOWN_SUFFIXES:
                continue
            named = [s for s in suites if path.name.startswith(f"{prefix}-{s}")]
            owner = max(named, key=len) if named else home if home in suites else title
            sections.setdefault(owner, []).append(path)
    return sections


def _tally_line(tally: Tally) -> str:
    return (f"<p>{tally.passed} passed, {tally.failed} failed, {tally.skipped} skipped: "
            f"pass rate {percent(tally.pass_rate)}</p>")


def comparison_table(deltas: list[DeltaRow]) -> str:
    rows = [(escape(d.label), number(d.baseline), number(d.current),
             number(d.difference, True), f"{number(d.ci_low, True)} to {number(d.ci_high, True)}",
             pvalue(d.p_value), number(d.mde), str(d.n),
             escape(d.status)) for d in deltas]
    return _table(("cell", "baseline", "now", "Δ", "95% CI of Δ", "p", "min. detectable drop",
                   "N paired", "status"), rows, [d.status for d in deltas],
                  frozenset(range(1, 8)))


def _badge(path: Path) -> str:
    return f'<img alt="{escape(path.name)}" src="{_data_uri(path)}"> ' if path.exists() else ""


def run_header(run_dir: Path, summary: RunSummary) -> str:
    return (f'{STYLE}<div class="lceval">{_badge(badge_path(run_dir))}'
            f"<p class='{'pass' if summary.ok else 'fail'}'><b>"
            f"{escape(headline(summary, marks=False))}</b></p>"
            f"<p class='muted'>model {escape(summary.model)} · seed {summary.seed} · run folder "
            f"{escape(str(run_dir))}</p></div>")


def suite_sections(run_dir: Path, summary: RunSummary) -> list[str]:
    suites = [t.name for t in summary.suites]
    artifacts = assign_artifacts(run_dir, suites)
    siblings = {p.name for paths in artifacts.values() for p in paths}
    html = []
    for tally in summary.suites:
        parts = [f"<h2>Suite {escape(tally.name)}</h2>", _badge(badge_path(run_dir, tally.name)),
                 _tally_line(tally)]
        parts += [_artifact_html(p, siblings) for p in artifacts.get(tally.name, [])]
        deltas = [d for d in summary.deltas if d.suite == tally.name]
        if deltas:
            parts += [f"<h3>Comparison with baseline {escape(summary.baseline or '')}</h3>",
                      comparison_table(deltas)]
        html.append('<div class="lceval">' + "".join(parts) + "</div>")
    for title, paths in artifacts.items():
        if title not in suites:
            html.append(f'<div class="lceval"><h2>{escape(title)}</h2>'
                        + "".join(_artifact_html(p, siblings) for p in paths) + "</div>")
    return html


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_summary(prefix: list[str], summary: list[str], postfix: list[str],
                                session: pytest.Session) -> None:
    config = session.config
    if RUN_DIR not in config.stash:
        return
    run_dir = config.stash[RUN_DIR]
    results = read_results(run_dir)
    if not results:
        return
    run = summarize(run_dir.name, results)
    prefix.append(run_header(run_dir, run))
    postfix.extend(suite_sections(run_dir, run))

