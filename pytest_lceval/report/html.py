"""pytest-html integration: per-test extras and per-suite sections, through pytest-html's hooks.

- Per test: the cell's properties and verdicts, and its first prompts and answers, as an HTML
  extra. pytest-html reads extras from test reports, which xdist ships from the workers to the
  controller, so they are attached in ``pytest_runtest_makereport`` where the test ran.
- Per run (controller only, ``pytest_html_results_summary``): badges and headline (led by the
  regressions when the run is compared with a saved one), then one section per suite: a
  one-line "look first" naming its worst cells (its regressions first), the comparison with the
  saved run (regressed, improved, inconclusive; unchanged cells folded under their count), why
  cells were skipped, a RULER-style task x length score table (depths averaged, an Avg column),
  its heatmaps, and the Task Haystack and LongScore outputs found in the run folder by
  file-name prefix. The core's sessionfinish runs first (tryfirst), so results are merged and
  the session reports drawn by then.
- Markdown summaries are rendered as HTML (tables included) and preferred to a CSV of the same
  name, which is for scripts; numbers in a CSV shown as a table are rounded for reading. Every
  table sits in a horizontal scroll box, so a wide one never widens the page.

Everything that comes from a model or a data set is HTML-escaped: pytest-html inserts extras
with innerHTML, and a model output may well contain ``<script>`` or ``<img onerror=...>``.
"""

from __future__ import annotations

import base64
import csv
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from ..foundation.grid import format_depth, format_length
from ..results.cells import RUN_DIR, SUITE_VERDICTS, CellResult, read_results
from ..verdicts.effective.rows import effective_rows
from ..verdicts.verdict import INCOMPLETE, RUN_VERDICT
from .badge import badge_path
from .finding import OwnFinding
from .findings import SKIP_EXAMPLES, look_first, skip_reasons
from .heatmaps import Undefined, none_undefined
from .judged import judge_table
from .summary import (
    COUNTED_ONLY,
    DeltaRow,
    RunSummary,
    Tally,
    cell_label,
    comparison_headline,
    delta_counts,
    detectable,
    effective_legend,
    effective_table,
    headline,
    interval,
    metrics_label,
    number,
    percent,
    pvalue,
    samples_note,
    summarize,
)

PROMPT_CHARS = 4000
"""Cap on a prompt's characters shown per sample, head and tail, the middle elided (results
already keep an excerpt: head, a window around the gold answer and tail, see
results.cells.clip_sample; this only guards against suites that keep more)."""
OUTPUT_CHARS = 600
TABLE_ROWS = 40
"""Rows shown of a CSV table from the run folder."""
IMAGE_BYTES = 5_000_000
"""Larger images are linked by name, not embedded."""
ArtifactGroup = tuple[str, str, str | None]
"""(file-name prefix, title, the suite whose section shows it when the name names none)."""
HEATMAPS: ArtifactGroup = ("heatmap", "Depth × length heatmaps", None)
"""The core's own figures; plugins add theirs (``pytest_lceval_report_artifacts``)."""
FAIL = "FAIL"
"""How a table's 'verdict' column marks a failed row (Task Haystack's t-test tables)."""
SHOWN_SUFFIXES = (".png", ".svg", ".csv", ".md")
READING_ORDER = {".md": 0, ".png": 1, ".svg": 1, ".csv": 2}
"""Within a group: the verdict's tables (Task Haystack's per-test table, LongScore's Table 7),
then the figures, then the per-resample data, folded."""
STYLE = """<style>
.lceval h2 { margin-top: 1.5em; } .lceval h3 { margin: 1em 0 0.3em; }
.lceval img.plot { max-width: 100%; margin: 4px 8px 8px 0; border: 1px solid #ddd;
  vertical-align: top; }
.lceval .scroll { max-width: 100%; overflow-x: auto; }
.lceval table.lc, .lceval .md table { border-collapse: collapse; margin: 4px 0 10px;
  font-size: 12px; }
.lceval table.lc th, .lceval table.lc td, .lceval .md th, .lceval .md td {
  border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
.lceval table.data td { white-space: nowrap; }
.lceval table.lc td.num { text-align: right; font-variant-numeric: tabular-nums; }
.lceval table.lc, .lceval .md, .lceval h3, .lceval h4 { color: #222; }
.lceval .md h1 { font-size: 1.1em; } .lceval .md h2 { font-size: 1em; }
.lceval .look-first { font-weight: bold; }
.lceval .skipped { background: #eeeeee; color: #555; }
.lceval .regressed, .lceval .unpaired, .lceval .fail { background: #fde0dc; }
.lceval .small-drop, .lceval .inconclusive { background: #fff1d6; }
.lceval .improved { background: #dcecfd; } .lceval .pass { background: #e3f6df; }
.lceval pre { white-space: pre-wrap; word-break: break-word; max-height: 20em; overflow: auto;
  background: #f7f7f7; padding: 6px; margin: 2px 0 8px; }
.lceval .muted { color: #666; }
.lceval img.plot.heatmap { max-width: 32%; }
.lceval details > summary { cursor: pointer; color: #444; margin: 4px 0; }
.lceval .undefined { font-style: italic; color: #555; }
</style>"""


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters: head and tail kept, the middle replaced by a count."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters ...]\n{text[-half:]}"


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], row_classes: Iterable[str] = (),
           numeric: frozenset[int] = frozenset(), wrap: bool = True) -> str:
    """An HTML table of already-escaped cells; ``wrap=False`` keeps each row on one line."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = []
    classes = list(row_classes)
    for index, row in enumerate(rows):
        cls = f' class="{classes[index]}"' if index < len(classes) and classes[index] else ""
        cells = "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                        for i, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    kind = "lc" if wrap else "lc data"
    return f'<div class="scroll"><table class="{kind}"><tr>{head}</tr>{"".join(body)}</table></div>'


def rounded(text: str) -> str:
    """A CSV cell for reading: floats to one decimal, or three below 1 (so 0.75 stays 0.75
    and a p-value 0.004 does not become 0.0); integers and words as written."""
    try:
        value = float(text)
    except ValueError:
        return text
    if value.is_integer() and "." not in text or not math.isfinite(value):
        return text
    if abs(value) >= 1:
        return f"{value:.1f}"
    short = f"{value:.3f}".rstrip("0")
    return short + "0" if short.endswith(".") else short


def markdown_html(text: str) -> str:
    """Markdown with tables as HTML; raw HTML in it is escaped, not rendered."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    return f'<div class="md scroll">{renderer.render(text)}</div>'


# -- per test -------------------------------------------------------------------------------


def model_time(result: CellResult) -> str:
    """The cell's model time; a cell with no request of its own says where its answers came
    from instead of 'model 0.00s (0 requests)'."""
    if result.model_requests == 0 and result.scores:
        return ("model: shared call (no request of its own: its answers came from a call "
                "another cell made, or from the store)")
    return f"model {result.seconds_model:.2f}s ({result.model_requests} requests)"


def cell_html(result: CellResult, samples_href: str = "") -> str:
    """The verdict of one cell in view (score, metric, outcome, every criterion's message), its
    other properties and its kept cases folded under a line each, so that a run with many
    failed tests (whose rows pytest-html opens) stays a page to scroll, not a book; with
    ``samples_href``, a link to every case of the cell (--lceval-log-samples); every value
    escaped."""
    ci = f"{number(result.ci_low)}–{number(result.ci_high)}"
    where = result.task + (f" · {format_length(result.length)} tokens" if result.length else "") \
        + ("" if result.depth is None else f" · depth {format_depth(result.depth)}%") \
        + (f" · {result.extra}" if result.extra else "")
    rows = [("score", f"{number(result.score)} (95% CI {ci}), N={result.n}"),
            ("metric", f"{result.metric_label}: {result.metric_about}" if result.metric
             else "–"),
            ("outcome", result.outcome + (f": {result.reason}" if result.reason else "")),
            ("cell", where)]
    classes = [""] * len(rows) + ["pass" if j.passed else "fail" for j in result.judgements]
    rows += [(f"verdict: {j.criterion}", ("PASS: " if j.passed else "FAIL: ") + j.message)
             for j in result.judgements]
    more = [
        ("input tokens", f"mean {result.input_tokens_mean:.0f}, max {result.input_tokens_max}"),
        ("model", f"{result.model} (fingerprint {result.fingerprint[:12]})"),
        ("source", result.source),
        ("time", f"build {result.seconds_build:.2f}s, {model_time(result)}, "
                 f"score {result.seconds_score:.2f}s"),
        *((name, str(value)) for name, value in sorted(result.metrics.items())
          if isinstance(value, (int, float, str, bool)) or value is None),
    ]
    parts = [_table(("property", "value"), [(escape(k), escape(v)) for k, v in rows], classes),
             f"<details><summary>{len(more)} more properties</summary>"
             + _table(("property", "value"), [(escape(k), escape(v)) for k, v in more])
             + "</details>"]
    if samples_href:
        parts.append(f'<p><a href="{escape(samples_href)}">Every case of this cell</a> '
                     f"<span class='muted'>(prompts as sent, whole outputs, gold, scores, "
                     f"request keys: gzipped JSONL, {escape(result.samples_file)})</span></p>")
    if result.samples:
        parts.append(f"<details><summary>{len(result.samples)} of {result.n} cases kept, the "
                     f"lowest-scoring first</summary>{_samples_html(result)}</details>")
    return "".join(parts)


def _samples_html(result: CellResult) -> str:
    parts = []
    for sample in result.samples:
        gold = ", ".join(str(g) for g in sample.get("gold", []))
        index = sample.get("index")
        case = "" if index is None else f" (case {escape(str(index))})"
        parts.append(
            f"<h4>Sample{case}: score {escape(str(sample.get('score')))}, "
            f"gold {escape(clip(gold, 200))}</h4>"
            f"<div class='muted'>prompt</div><pre>"
            f"{escape(clip(str(sample.get('prompt', '')), PROMPT_CHARS))}</pre>"
            f"<div class='muted'>output</div><pre>"
            f"{escape(clip(str(sample.get('output', '')), OUTPUT_CHARS)) or '(empty)'}</pre>")
    return "".join(parts)


def cell_extras_html(results: list[CellResult], run_dir: Path | None = None,
                     html_dir: Path | None = None) -> str:
    """The extras of one test's cells; their samples files are linked relative to the report's
    folder ``html_dir``."""
    def href(result: CellResult) -> str:
        if not result.samples_file or run_dir is None or html_dir is None:
            return ""
        return quote(os.path.relpath(run_dir / result.samples_file, html_dir))

    return ('<div class="lceval">' + "".join(cell_html(r, href(r)) for r in results)
            + "</div>")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    html_path = item.config.getoption("htmlpath", None)
    if report.when != "call" or not html_path:
        return report
    run = getattr(item, "funcargs", {}).get("lc_eval")
    results: list[CellResult] = getattr(run, "results", [])
    if results:
        from pytest_html import extras

        html_dir = Path(html_path).expanduser().absolute().parent
        page = cell_extras_html(results, item.config.stash.get(RUN_DIR, None), html_dir)
        report.extras = [*getattr(report, "extras", []), extras.html(page)]
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_table_header(cells: list[str]) -> None:
    cells.insert(2, '<th class="sortable" data-column-type="score">Score</th>')
    cells.insert(3, '<th class="sortable" data-column-type="metric">Metric</th>')


def skip_reason(report: pytest.TestReport) -> str:
    """The reason pytest recorded for a skipped test ('' otherwise)."""
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return ""
    return str(report.longrepr[2]).removeprefix("Skipped: ")


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
    """The score; a skipped test shows its reason, after the score it was measured at when it
    has one (an undefined LongScore skips the verdict, not the measurement)."""
    properties = dict(getattr(report, "user_properties", []))
    score, metric = properties.get("score"), properties.get("metric")
    text = number(float(score)) if isinstance(score, (int, float)) \
        and math.isfinite(score) else ""
    reason = skip_reason(report)
    if reason:
        text = (f"{text} · " if text else "") + f"skipped: {escape(reason)}"
    cells.insert(2, f'<td class="col-score">{text}</td>')
    cells.insert(3, f'<td class="col-metric">{escape(str(metric or ""))}</td>')


# -- per run --------------------------------------------------------------------------------


def _data_uri(path: Path) -> str:
    mime = "image/svg+xml" if path.suffix == ".svg" else "image/png"
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def csv_html(name: str, rows: list[list[str]]) -> str:
    """The first TABLE_ROWS rows of a CSV, made to fit the page: numbers rounded, columns that
    hold one value in every row stated once above the table, test ids cut to their
    parameters; with a 'verdict' column, FAIL rows first and marked."""
    if not rows:
        return ""
    header, body = rows[0], [[rounded(c) for c in row] for row in rows[1:]]
    if "nodeid" in header:
        at = header.index("nodeid")
        header[at] = "test"
        for row in body:
            row[at] = cell_label(row[at])
    failed = [False] * len(body)
    if "verdict" in header:
        at = header.index("verdict")
        body.sort(key=lambda row: at >= len(row) or row[at] != FAIL)
        failed = [at < len(row) and row[at] == FAIL for row in body]
    constant = [i for i in range(len(header))
                if len(body) > 1 and len({row[i] for row in body if i < len(row)}) == 1]
    kept = [i for i in range(len(header)) if i not in constant]
    same = ", ".join(f"{header[i]} {body[0][i]}" for i in constant)
    more = len(body) - TABLE_ROWS
    return (f"<h4>{escape(name)}</h4>"
            + (f"<p class='muted'>Every row: {escape(same)}</p>" if same else "")
            + _table((escape(header[i]) for i in kept),
                     ([escape(row[i]) if i < len(row) else "" for i in kept]
                      for row in body[:TABLE_ROWS]),
                     ["fail" if flag else "" for flag in failed[:TABLE_ROWS]], wrap=False)
            + (f"<p class='muted'>{more} more rows in {escape(name)}</p>" if more > 0 else ""))


def _artifact_html(path: Path, siblings: set[str]) -> str:
    """One output file of the run folder: images embedded, CSV as a table, markdown rendered."""
    name = escape(path.name)
    if path.suffix in (".png", ".svg"):
        if path.stat().st_size > IMAGE_BYTES:
            return f"<p class='muted'>{name} (too large to embed)</p>"
        kind = "plot heatmap" if path.name.startswith("heatmap-") else "plot"
        return f'<img class="{kind}" alt="{name}" title="{name}" src="{_data_uri(path)}">'
    if path.suffix == ".csv":
        if path.stem + ".md" in siblings:
            return f"<p class='muted'>The same table for scripts: {name}</p>"
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
        return (f"<details><summary>{name}: {max(0, len(rows) - 1)} rows of data: show</summary>"
                f"{csv_html(path.name, rows)}</details>")
    if path.suffix == ".md":
        text = clip(path.read_text(encoding="utf-8"), 20_000)
        return f"<h4>{name}</h4>{markdown_html(text)}"
    return ""


def assign_artifacts(run_dir: Path, suites: list[str], groups: Sequence[ArtifactGroup]
                     ) -> dict[str, list[Path]]:
    """Output files by section: a suite's name, or a group title when no suite claims them.

    A file belongs to suite S if its name starts with '<prefix>-S' (longest S wins), else to the
    group's home suite when that suite ran, else to a section of its own. A group's files read
    in READING_ORDER: its markdown tables first, then its figures, then its data tables.
    """
    sections: dict[str, list[Path]] = {}
    for prefix, title, home in groups:
        for path in sorted(run_dir.glob(f"{prefix}-*"),
                           key=lambda found: (READING_ORDER.get(found.suffix, 0), found.name)):
            if path.suffix not in SHOWN_SUFFIXES:
                continue
            named = [s for s in suites if path.name.startswith(f"{prefix}-{s}")]
            owner = max(named, key=len) if named else home if home in suites else title
            sections.setdefault(owner, []).append(path)
    return sections


def _tally_line(summary: RunSummary, tally: Tally) -> str:
    """The suite's counts, led by its comparison and followed by its failed gates."""
    compared = comparison_headline(summary, tally.name, code=False)
    failed = [gate.name for gate in summary.verdict.gates_of(tally.name) if not gate.passed]
    gates = f"; suite {'gate' if len(failed) == 1 else 'gates'} failed: {', '.join(failed)}" \
        if failed else ""
    return (f"<p>{escape(compared) + '; ' if compared else ''}{tally.passed} passed, "
            f"{tally.failed} failed, {tally.skipped} skipped: pass rate "
            f"{percent(tally.pass_rate)}{escape(gates)}</p>")


def comparison_table(deltas: list[DeltaRow]) -> str:
    """Regressed, then improved, then inconclusive rows (the order of ``deltas``); the cells
    that did not change, or were not compared, folded away under their count."""
    listed = [d for d in deltas if d.status not in COUNTED_ONLY]
    folded = [d for d in deltas if d.status in COUNTED_ONLY]
    html = _delta_rows(listed) if listed else ""
    if folded:
        counts = ", ".join(f"{sum(d.status == s for d in folded)} {s}"
                           for s in sorted({d.status for d in folded}))
        html += (f"<details><summary>{counts} (every case scored the same in both runs, or the "
                 f"cell was not compared): show</summary>{_delta_rows(folded)}</details>")
    return html


def _delta_rows(deltas: list[DeltaRow]) -> str:
    rows = [(escape(d.label), escape(d.metric), number(d.baseline), number(d.current),
             number(d.difference, True), interval(d), pvalue(d.p_value), detectable(d),
             str(d.n), escape(d.status)) for d in deltas]
    return _table(("cell", "metric", "baseline", "now", "Δ", "95% CI of Δ", "p",
                   "min. detectable drop", "N paired", "status"), rows,
                  [d.status for d in deltas], frozenset(range(2, 9)))


def _badge(path: Path) -> str:
    return f'<img alt="{escape(path.name)}" src="{_data_uri(path)}"> ' if path.exists() else ""


def gates_html(summary: RunSummary) -> str:
    """The Gates section: every suite gate of the run's verdict with its rule, what it measured
    and its verdict, failed ones first; '' when the run had none."""
    if not summary.gates:
        return ""
    gates = sorted(summary.gates, key=lambda gate: gate.passed)
    rows = [(escape(gate.name), escape(gate.suite), escape(gate.rule),
             escape(gate.judgement.message), escape(gate.status)) for gate in gates]
    return ('<div class="lceval gates"><h2>Gates</h2><p class="muted">Suite gates: a failed '
            "one fails the run; each is a test case of its own in the JUnit XML.</p>"
            + _table(("gate", "suite", "rule", "measured", "verdict"), rows,
                     ["pass" if gate.passed else "fail" for gate in gates]) + "</div>")


def run_header(run_dir: Path, summary: RunSummary) -> str:
    outcome = summary.verdict.outcome
    kind = "pass" if summary.ok else "inconclusive" if outcome == INCOMPLETE else "fail"
    return (f'{STYLE}<div class="lceval">{_badge(badge_path(run_dir))}'
            f"<p class='{kind}'><b>"
            f"{escape(headline(summary, marks=False, code=False))}</b></p>"
            f"<p class='muted'>model {escape(summary.model)} · seed {summary.seed} · run folder "
            f"{escape(str(run_dir))}</p>"
            + (f"<p class='muted'>{escape(summary.samples)}</p>" if summary.samples else "")
            + "</div>" + gates_html(summary))


def look_first_html(results: list[CellResult], verdicts: Sequence[OwnFinding] = ()) -> str:
    return f'<p class="look-first">{escape(look_first(results, verdicts=verdicts))}</p>'


def skips_html(results: list[CellResult]) -> str:
    """Why cells were skipped: one row per reason, with the cells (the first few named)."""
    groups = skip_reasons(results)
    if not groups:
        return ""
    rows = []
    for group in groups:
        more = len(group.cells) - SKIP_EXAMPLES
        cells = ", ".join(group.cells[:SKIP_EXAMPLES]) + (f" and {more} more" if more > 0 else "")
        rows.append((escape(group.reason), str(len(group.cells)), escape(cells)))
    return "<h3>Skipped cells</h3>" + _table(("reason", "cells", "which"), rows,
                                             numeric=frozenset({1}))


def score_table_html(results: list[CellResult], undefined: Undefined = none_undefined) -> str:
    """Task x length scores in percent, as RULER's tables: a task with depths is the mean over
    its depth cells (each depth weighs the same), an Avg column over the lengths, and an
    average row over the tasks measured at every length. A measured cell whose verdict was
    skipped (an undefined LongScore) shows its score, labelled; a cell never measured shows
    'skip' with its reason as a tooltip; '(2 FAIL)' counts the failed cells behind a value."""
    cells = [r for r in results if not r.extra and r.length > 0]
    if not cells:
        return ""
    lengths = sorted({r.length for r in cells})
    tasks = sorted({r.task for r in cells})
    means: dict[tuple[str, int], float] = {}
    rows = []
    for task in tasks:
        row = [escape(task), escape(metrics_label([r for r in cells if r.task == task]))]
        for length in lengths:
            group = [r for r in cells if (r.task, r.length) == (task, length)]
            scored = [r for r in group if r.measured]
            if scored:
                means[(task, length)] = sum(r.score for r in scored) / len(scored)
            row.append(_score_cell(group, scored, means.get((task, length)), undefined))
        mine = [means[(task, n)] for n in lengths if (task, n) in means]
        avg = f"{100 * sum(mine) / len(mine):.1f}" if mine else ""
        if mine and len(mine) < len(lengths):
            avg += f" ({len(mine)} of {len(lengths)} lengths)"
        rows.append([*row, avg])
    complete = [t for t in tasks if all((t, n) in means for n in lengths)]
    if len(complete) > 1:
        per_length = [sum(means[(t, n)] for t in complete) / len(complete) for n in lengths]
        rows.append([f"<b>average of {len(complete)} tasks</b>", "",
                     *(f"<b>{100 * v:.1f}</b>" for v in per_length),
                     f"<b>{100 * sum(per_length) / len(per_length):.1f}</b>"])
    depths = any(r.depth is not None for r in cells)
    header = ["task", "metric", *(format_length(n) for n in lengths), "Avg"]
    return ("<h3>Scores by task and length</h3><p class='muted'>Score in percent"
            + (", the mean over the depth cells" if depths else "")
            + "; Avg: the mean over the lengths; the average row: the tasks measured at every "
              "length.</p>"
            + _table(header, rows, numeric=frozenset(range(2, len(lengths) + 3))))


def _score_cell(group: list[CellResult], scored: list[CellResult], mean: float | None,
                undefined: Undefined) -> str:
    """One task-length value of the score table (see score_table_html)."""
    if mean is None:
        if not group:
            return ""
        reason = next((r.reason for r in group if r.outcome == "skipped"), "")
        return f'<span class="skipped" title="{escape(reason)}">skip</span>'
    text = f"{100 * mean:.1f}"
    failed = sum(r.outcome == "failed" for r in scored)
    if failed:
        text += " (FAIL)" if len(scored) == 1 else f" ({failed} FAIL)"
    named = [(r, name) for r in scored if (name := undefined(r))]
    if named:
        text += (f' <span class="undefined" title="{escape(named[0][0].reason)}">'
                 f"{escape(named[0][1])} undefined</span>")
    return text


def suite_sections(run_dir: Path, summary: RunSummary, results: list[CellResult],
                   groups: Sequence[ArtifactGroup] = (HEATMAPS,),
                   verdicts: Sequence[OwnFinding] = (),
                   undefined: Undefined = none_undefined) -> list[str]:
    """Per suite: what to act on first (the comparison, what to look at, skip reasons), then
    the tables and figures. ``groups``: the run folder's files to show; ``verdicts``: the
    plugins' readings of their own verdicts (both from hooks in the session)."""
    suites = [t.name for t in summary.suites]
    artifacts = assign_artifacts(run_dir, suites, groups)
    siblings = {p.name for paths in artifacts.values() for p in paths}
    html = []
    for tally in summary.suites:
        mine = [r for r in results if r.suite == tally.name]
        parts = [f"<h2>Suite {escape(tally.name)}</h2>", _badge(badge_path(run_dir, tally.name)),
                 _tally_line(summary, tally), look_first_html(mine, verdicts)]
        deltas = [d for d in summary.deltas if d.suite == tally.name]
        if deltas:
            counts = delta_counts(Counter(d.status for d in deltas))
            parts += [f"<h3>Comparison with baseline {escape(summary.baseline or '')}: "
                      f"{escape(counts)}</h3>", comparison_table(deltas)]
        parts += [skips_html(mine), score_table_html(mine, undefined)]
        parts += [_artifact_html(p, siblings) for p in artifacts.get(tally.name, [])]
        effective = [row for row in summary.effective if row.suite == tally.name]
        if effective:
            header, rows = effective_table(effective)
            parts += ["<h3>Claimed window vs effective length</h3>",
                      f"<p class='muted'>{escape(effective_legend(summary))}</p>",
                      _table(header, [[escape(text) for text in row] for row in rows],
                             ["fail" if row.change == "fell" else "" for row in effective],
                             frozenset({2, 3}))]
        judged = [row for row in summary.judged if row.suite == tally.name]
        if judged:
            header, rows = judge_table(judged)
            parts += ["<h3>Judged tasks</h3>",
                      _table(header, [[escape(text) for text in row] for row in rows])]
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
    if not results and RUN_VERDICT not in config.stash:  # a run interrupted before any cell
        return                                           # finished still has its verdict
    run = summarize(run_dir.name, results, config.stash.get(SUITE_VERDICTS, {}),
                    samples_note(run_dir), effective_rows(config, results),
                    config.stash.get(RUN_VERDICT, None))
    prefix.append(run_header(run_dir, run))
    groups = [HEATMAPS, *(group for found in config.hook.pytest_lceval_report_artifacts()
                          for group in found)]
    postfix.extend(suite_sections(run_dir, run, results, groups,
                                  [lambda r: config.hook.pytest_lceval_finding(result=r)],
                                  lambda r: config.hook.pytest_lceval_undefined(result=r)))

