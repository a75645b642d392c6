"""The session's LongScore summary per suite, in the layout of 100-LongBench's Table 7 (Base
Ability, Avg score and Avg LC over the long lengths), as markdown and CSV, plus small multiples
of LC_l against length, one panel per task, so that many tasks stay readable.

The markdown's header states the rules the verdicts used, read from what the cells recorded:
how each base length's cases were taken, that a task with depths pools them into one base, the
bound and the floor. A task whose LongScore is undefined keeps its measured scores in the table
and gets a panel that says why.

Everything is read back from the cells' recorded metrics, so the controller needs no model and
the summary of a run can be redrawn from its results.jsonl alone. Scores and LC are percentages,
as in the paper. Avg LC is LongScore of the averages, (Avg score - Base) / Base: per task that
equals the mean of LC_l over the long lengths, and for the model row it is how the paper's
Table 7 is computed (its Avg LC column is exactly (Avg score - Base Ability) / Base Ability of the
task-averaged columns), so a task whose own LC is undefined still counts in the model's.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ....foundation.grid import format_depth, format_length
from ....report.finding import cell_label
from ....report.section import SummarySection, listed
from ....results.cells import CellResult
from .config import RELEASED
from .criterion import CRITERION
from .formula import longscore

PREFIX = "longscore"


@dataclass
class TaskRow:
    """One task's line: its base ability and, per long length, its cells."""

    task: str
    base: float | None
    """Base ability 0..1 (None when undefined)."""
    window: int
    floor: float
    base_on: str = ""
    """'alone' (the gold passages alone) or the base lengths, e.g. '2k,4k,6k'."""
    long_cells: dict[int, list[CellResult]] = field(default_factory=dict)
    base_n: int = 0
    """Cases behind the base ability."""
    base_strata: tuple[str, ...] = ()
    """Its strata, e.g. ('1k@0', '1k@50'): a task with depths pools them."""
    base_rules: str = ""
    """How each base length's cases were taken, as recorded ('1k:all cases of ...')."""

    def score_at(self, length: int) -> float:
        return float(np.mean([c.score for c in self.long_cells[length]]))

    def lc_at(self, length: int) -> float | None:
        """Mean LC over the length's cells; None when any of them is undefined."""
        values = [c.metrics.get("longscore") for c in self.long_cells[length]]
        defined = [float(v) for v in values if v is not None]
        return float(np.mean(defined)) if len(defined) == len(values) else None

    def worst_at(self, length: int) -> CellResult | None:
        """The length's depth cell with the lowest LC, when it has several and LC is defined."""
        cells = self.long_cells[length]
        if len(cells) < 2 or self.lc_at(length) is None:
            return None
        return min(cells, key=lambda c: float(c.metrics["longscore"]))

    @property
    def depths(self) -> list[str]:
        """The depths the base pools ('0', '50'); empty for a task without depth."""
        return sorted({stratum.partition("@")[2] for stratum in self.base_strata
                       if "@" in stratum}, key=float)

    @property
    def avg_score(self) -> float | None:
        return _mean([self.score_at(n) for n in self.long_cells])

    @property
    def avg_lc(self) -> float | None:
        score = self.avg_score
        return None if score is None or self.base is None else \
            longscore(score, self.base, self.floor)


def task_rows(results: list[CellResult]) -> dict[str, list[TaskRow]]:
    """Rows by suite, for cells that LongScore judged (role 'base' or 'long')."""
    rows: dict[tuple[str, str], TaskRow] = {}
    for result in results:
        role = result.metrics.get("longscore_role")
        if role not in ("base", "long"):
            continue
        key = (result.suite, result.task)
        if key not in rows:
            metrics = result.metrics
            strata = str(metrics.get("longscore_base_strata", ""))
            rows[key] = TaskRow(result.task, metrics.get("longscore_base"),
                                int(metrics.get("longscore_window", 0)),
                                float(metrics.get("longscore_floor", 0.0)),
                                str(metrics.get("longscore_base_on", "")),
                                base_n=int(metrics.get("longscore_base_n", 0)),
                                base_strata=tuple(s for s in strata.split(",") if s),
                                base_rules=str(metrics.get("longscore_base_rules", "")))
        if role == "long" and not math.isnan(result.score):
            rows[key].long_cells.setdefault(result.length, []).append(result)
    by_suite: dict[str, list[TaskRow]] = defaultdict(list)
    for (suite, _), row in sorted(rows.items()):
        by_suite[suite].append(row)
    return dict(by_suite)


def long_lengths(rows: list[TaskRow]) -> list[int]:
    return sorted({length for row in rows for length in row.long_cells})


def overall(rows: list[TaskRow], length: int | None = None
            ) -> tuple[float | None, float | None, float | None]:
    """The model's (Base, Avg score, Avg LC): means over the tasks measured at long lengths
    with a base, and LongScore of those means (see the module docstring); with ``length``, the
    same at that long length alone (the model's score and LC there)."""
    def score_of(row: TaskRow) -> float | None:
        if length is None:
            return row.avg_score
        return row.score_at(length) if length in row.long_cells else None

    measured = [(r, base, score) for r in rows
                if (base := r.base) is not None and (score := score_of(r)) is not None]
    if not measured:
        return _mean([r.base for r in rows if r.base is not None]), None, None
    base = float(np.mean([b for _, b, _ in measured]))
    score = float(np.mean([s for _, _, s in measured]))
    return base, score, longscore(score, base, max(r.floor for r, _, _ in measured))


def rules(rows: list[TaskRow], base_lengths: str, minimum: float | None, mode: str) -> str:
    """The paragraph that says how the base and the verdicts were computed in this run."""
    recorded = next((row.base_rules for row in rows if row.base_rules), "")
    taken = "; ".join(f"{length} {rule}" for length, _, rule in
                      (part.partition(":") for part in recorded.split(",") if part))
    depths = next((row.depths for row in rows if row.depths), [])
    floor = max((row.floor for row in rows), default=0.0)
    on = (f"the gold passages alone (no distractors) for the tasks whose Base on is 'alone', "
          f"and for the others the mean over the base lengths {base_lengths} of each length's "
          f"mean score, as 100-LongBench's released code measures it" if mode == RELEASED else
          f"the mean over the base lengths {base_lengths} of each length's mean score, for "
          f"every task, as 100-LongBench's paper states it")
    text = (f"Base Ability (--longscore-base {mode}): {on}"
            f"{f' (cases: {taken})' if taken else ''}; Base N is its number of cases.")
    if depths:
        text += (f" A task with depths pools them into one base (depths "
                 f"{', '.join(depths)} %), so each of its depth cells at a long length is "
                 f"compared with the task's whole short-context ability; LC@length is the mean "
                 f"over the depth cells, with the lowest depth cell in brackets.")
    bound = "recorded, not asserted" if minimum is None else \
        f"a long cell fails when its LC is below --longscore-min {minimum:+g}%"
    return (text + f" Verdicts: {bound}. LC is undefined where the base ability is below the "
            f"floor {floor:g} (--longscore-floor): the score threshold judges such a cell "
            f"instead, and its score is shown.")


def markdown(suite: str, model: str, base_lengths: str, rows: list[TaskRow],
             minimum: float | None = None, mode: str = RELEASED) -> str:
    lengths = long_lengths(rows)
    base, score, lc = overall(rows)
    window = max((r.window for r in rows), default=0)
    measured = sum(r.base is not None and r.avg_score is not None for r in rows)
    lines = [
        f"# LongScore: {suite}, {model}", "",
        rules(rows, base_lengths, minimum, mode) + " Avg score: mean over the long lengths "
        f"{', '.join(format_length(n) for n in lengths) or '(none)'}. Avg LC: "
        "(Avg score - Base) / Base. The model row averages the "
        f"{measured} task{'' if measured == 1 else 's'} measured at "
        "long lengths, as the paper's Table 7 does. Scores and LC (LongScore x 100) in percent.",
        "",
        "| Model | Claimed Length | Base Ability | Avg score | Avg LC |",
        "| --- | --- | --- | --- | --- |",
        f"| {model} | {format_length(window) if window else '?'} | {_pct(base)} | {_pct(score)} "
        f"| {_num(lc) if lengths else 'n/a'} |", "", "## Per task", "",
        "| Task | Base on | Base Ability | Base N | Avg score | Avg LC | "
        + " | ".join(f"LC@{format_length(n)}" for n in lengths) + " |",
        "| --- " * (6 + len(lengths)) + "|",
    ]
    for row in rows:
        cells = [_lc_cell(row, n) for n in lengths]
        avg_lc = _num(row.avg_lc) if row.long_cells else "n/a"
        lines.append(f"| {row.task} | {row.base_on or '?'} | {_pct(row.base)} | {row.base_n} | "
                     f"{_pct(row.avg_score)} | {avg_lc} | " + " | ".join(cells) + " |")
    lines += ["", "n/a: not measured; undefined: base ability below the floor "
              "(--longscore-floor). LC@length shows the 95% interval (the base and the long "
              "cell both redrawn) when the length has one cell (tasks without depth)."]
    return "\n".join(lines) + "\n"


def write_csv(path: Path, suite: str, model: str, rows: list[TaskRow]) -> None:
    lengths = long_lengths(rows)
    header = ["suite", "model", "task", "claimed_length", "base_on", "base_ability", "avg_score",
              "avg_lc"]
    header += [f"score_{format_length(n)}" for n in lengths]
    header += [f"lc_{format_length(n)}" for n in lengths]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in rows:
            writer.writerow(
                [suite, model, row.task, row.window, row.base_on, _csv(row.base),
                 _csv(row.avg_score), _csv(row.avg_lc, 1.0)]
                + [_csv(row.score_at(n)) if n in row.long_cells else "" for n in lengths]
                + [_csv(row.lc_at(n), 1.0) if n in row.long_cells else "" for n in lengths])
        base, score, lc = overall(rows)
        window = max((r.window for r in rows), default=0)
        writer.writerow([suite, model, "overall", window, "", _csv(base), _csv(score),
                         _csv(lc, 1.0)]
                        + [""] * (2 * len(lengths)))


def verdict_section(results: list[CellResult], minimum: float | None,
                    mode: str = RELEASED) -> SummarySection | None:
    """summary.md's LongScore block: per suite with long cells, its Table-7 row (base ability,
    the model's LC at each long length, Avg score, Avg LC) and the cells LongScore failed,
    lowest LC first; None when no suite has a long cell (LongScore does not apply)."""
    by_suite = {suite: rows for suite, rows in task_rows(results).items() if long_lengths(rows)}
    if not by_suite:
        return None
    lengths = sorted({n for rows in by_suite.values() for n in long_lengths(rows)})
    bound = "recorded, not asserted (--longscore-min unset)" if minimum is None else \
        f"a long cell fails below --longscore-min {minimum:+g}%"
    files = ", ".join(f"`{PREFIX}-{suite}.md`" for suite in by_suite)
    lines = [f"100-LongBench's Table 7 per suite, in percent (--longscore-base {mode}; "
             f"{bound}); per task: {files}.", "",
             "| suite | claimed length | base ability | "
             + "".join(f"LC@{format_length(n)} | " for n in lengths)
             + "avg score | avg LC | failed on LongScore |",
             "|---|--:|--:|" + "--:|" * len(lengths) + "--:|--:|--:|"]
    suites, failed_lines = [], []
    for suite, rows in by_suite.items():
        base, score, lc = overall(rows)
        at = {n: overall(rows, n)[2] if n in long_lengths(rows) else None for n in lengths}
        cells = [c for row in rows for group in row.long_cells.values() for c in group]
        failed = sorted((c for c in cells if _failed_on_longscore(c)),
                        key=lambda c: (float(c.metrics["longscore"]), c.nodeid))
        window = max(r.window for r in rows)
        lines.append(f"| {suite} | {format_length(window) if window else '?'} | {_pct(base)} | "
                     + "".join(f"{_num(at[n]) if n in long_lengths(rows) else 'n/a'} | "
                               for n in lengths)
                     + f"{_pct(score)} | {_num(lc)} | {len(failed)} of {len(cells)} |")
        if failed:
            failed_lines.append(f"{suite}: " + listed([_failed_text(c) for c in failed],
                                                       PREFIX))
        suites.append({
            "suite": suite, "claimed_length": window, "base": base, "avg_score": score,
            "avg_lc": lc, "long_cells": len(cells),
            "lc_by_length": [{"length": format_length(n), "tokens": n, "lc": at[n]}
                             for n in lengths if n in long_lengths(rows)],
            "failed": [{"nodeid": c.nodeid, "lc": c.metrics["longscore"],
                        "ci_low": c.metrics.get("longscore_ci_low"),
                        "ci_high": c.metrics.get("longscore_ci_high"), "score": c.score,
                        "n": c.n} for c in failed]})
    if failed_lines:
        lines += ["", "Failed on LongScore, lowest LC first:", "",
                  *(f"- {line}" for line in failed_lines)]
    return SummarySection(PREFIX, "LongScore", tuple(lines),
                          {"minimum": minimum, "base_mode": mode, "suites": suites})


def _failed_on_longscore(result: CellResult) -> bool:
    return any(j.criterion == CRITERION and not j.passed for j in result.judgements)


def _failed_text(result: CellResult) -> str:
    """'`toy-3k-50` -100.0% (95% CI -100.0..-34.4), score 0.000 (N=5)'."""
    low, high = result.metrics.get("longscore_ci_low"), result.metrics.get("longscore_ci_high")
    ci = "" if low is None or high is None else f" (95% CI {_num(low)}..{_num(high)})"
    return (f"`{cell_label(result.nodeid)}` {_num(result.metrics['longscore'])}%{ci}, score "
            f"{result.score:.3f} (N={result.n})")


PANEL_COLUMNS = 4
"""Panels per row of the small multiples."""


def plot(path: Path, suite: str, model: str, rows: list[TaskRow], minimum: float | None) -> None:
    import matplotlib.pyplot as plt

    figure = longscore_figure(suite, model, rows, minimum)
    figure.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.15)
    plt.close(figure)


def longscore_figure(suite: str, model: str, rows: list[TaskRow], minimum: float | None) -> Any:
    """Small multiples, one panel per task on a shared LC axis: the mean LC per length (line),
    its depth cells (dots) or its 95% interval (bar, a length with one cell), the bound;
    a task whose LC is undefined gets a panel that says why and shows its measured scores, and
    when no task has one, the figure is that message alone. The lowest LC is named in the
    title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [row for row in rows if row.long_cells]
    values = [lc for row in shown for n in row.long_cells for lc in _cell_lcs(row, n)]
    if not values:
        return _nothing_defined(suite, model, shown)
    lengths = long_lengths(shown)
    columns = min(PANEL_COLUMNS, max(1, len(shown)))
    lines = -(-len(shown) // columns)
    figure, grid = plt.subplots(lines, columns, figsize=(0.6 + 2.6 * columns, 1.0 + 2.1 * lines),
                                sharey=True, squeeze=False, layout="constrained")
    bars = [bound for row in shown for n in row.long_cells for bound in _bar(row, n) or ()]
    low, high = _limits([*values, *bars], minimum)
    for axes, row in zip(grid.flat, shown, strict=False):
        _panel(axes, row, lengths, minimum, (low, high))
    for axes in list(grid.flat)[len(shown):]:
        axes.set_visible(False)
    key = "line: mean LC; dots: depth cells; bars: 95% interval" + (
        "" if minimum is None else f"; red dashes: --longscore-min {minimum:g}%, red panel: a "
                                   f"cell below it")
    figure.suptitle(f"LongScore by length: {suite} - {model}\n{_lowest(shown)}\n{key}",
                    fontsize=8.5)
    figure.supxlabel("context length (tokens)", fontsize=8)
    figure.supylabel("LongScore LC (%)", fontsize=8)
    return figure


def _nothing_defined(suite: str, model: str, rows: list[TaskRow]) -> Any:
    """One message instead of empty axes: why no LC exists, and what was measured."""
    import matplotlib.pyplot as plt

    floor = max((row.floor for row in rows), default=0.0)
    lines = [f"LongScore is undefined for every task of {suite}:",
             f"each base ability is below the floor {floor:g} (--longscore-floor),",
             "so no ratio to it is computed. What was measured:", ""]
    for row in rows:
        base = "none" if row.base is None else f"{100 * row.base:.1f}%"
        scores = ", ".join(f"{format_length(n)} {100 * row.score_at(n):.1f}%"
                           for n in sorted(row.long_cells))
        lines.append(f"{row.task}: base {base} (N={row.base_n}); score {scores}")
    figure = plt.figure(figsize=(6.0, 0.6 + 0.2 * len(lines)))
    figure.text(0.0, 1.0, f"LongScore by length: {suite} - {model}\n\n" + "\n".join(lines),
                fontsize=8, va="top", family="monospace")
    return figure


def _panel(axes: Any, row: TaskRow, lengths: list[int], minimum: float | None,
           limits: tuple[float, float]) -> None:
    positions = {n: i for i, n in enumerate(lengths)}
    axes.set_xticks(range(len(lengths)), [format_length(n) for n in lengths], fontsize=7)
    axes.set_xlim(-0.5, len(lengths) - 0.5)
    axes.set_ylim(*limits)
    axes.tick_params(axis="y", labelsize=7)
    base = "undefined" if row.base is None else f"{100 * row.base:.1f}%"
    axes.set_title(f"{row.task}\nbase {base}, N={row.base_n}", fontsize=7.5)
    points = [(n, lc) for n in sorted(row.long_cells) if (lc := row.lc_at(n)) is not None]
    if not points:
        scores = ", ".join(f"{format_length(n)} {100 * row.score_at(n):.0f}%"
                           for n in sorted(row.long_cells))
        axes.set_facecolor("#f2f2f2")
        axes.text(0.5, 0.5, f"LC undefined:\nbase {base} is below\nthe floor {row.floor:g}\n"
                            f"measured score: {scores}", transform=axes.transAxes,
                  ha="center", va="center", fontsize=7, color="#333333")
        return
    axes.axhline(0.0, color="grey", linewidth=0.8)
    if minimum is not None:
        axes.axhline(minimum, color="red", linestyle="--", linewidth=0.8)
    axes.plot([positions[n] for n, _ in points], [lc for _, lc in points], marker="o",
              color="#1f77b4", linewidth=1.4, markersize=4)
    for n in row.long_cells:
        bar = _bar(row, n)
        if bar is not None:
            axes.vlines(positions[n], *bar, color="#1f77b4", alpha=0.5, linewidth=2)
        elif len(row.long_cells[n]) > 1:
            lcs = _cell_lcs(row, n)
            axes.scatter([positions[n]] * len(lcs), lcs, color="#1f77b4", alpha=0.35, s=10)
    if minimum is not None and any(lc < minimum for n in row.long_cells
                                   for lc in _cell_lcs(row, n)):
        axes.set_facecolor("#fdecea")


def _bar(row: TaskRow, length: int) -> tuple[float, float] | None:
    """The interval bar drawn at a length with one cell (a task without depth), when it has
    one; the shared axis spans these too, so no bar is cut off."""
    cells = row.long_cells[length]
    if len(cells) != 1:
        return None
    low, high = cells[0].metrics.get("longscore_ci_low"), cells[0].metrics.get("longscore_ci_high")
    return None if low is None or high is None else (float(low), float(high))


def _cell_lcs(row: TaskRow, length: int) -> list[float]:
    return [float(c.metrics["longscore"]) for c in row.long_cells[length]
            if c.metrics.get("longscore") is not None]


def _limits(values: list[float], minimum: float | None) -> tuple[float, float]:
    """The shared LC axis: the values (LC points and interval bars), 0 and the bound, with a
    margin."""
    span = [*values, 0.0, *([] if minimum is None else [minimum])]
    low, high = min(span), max(span)
    margin = max(5.0, 0.08 * (high - low))
    return low - margin, high + margin


def _lowest(rows: list[TaskRow]) -> str:
    """'lowest LC: json_kv -100.0% at 4k (depth 40%)', or why there is none."""
    found = [(float(c.metrics["longscore"]), row.task, c) for row in rows
             for cells in row.long_cells.values() for c in cells
             if c.metrics.get("longscore") is not None]
    if not found:
        return "LC undefined for every task (base ability below the floor): see each panel"
    lc, task, cell = min(found, key=lambda item: (item[0], item[1]))
    depth = "" if cell.depth is None else f" (depth {format_depth(cell.depth)}%)"
    return f"lowest LC: {task} {lc:+.1f}% at {format_length(cell.length)}{depth}"


def write_summaries(run_dir: Path, results: list[CellResult], base_lengths: str,
                    minimum: float | None, mode: str = RELEASED) -> list[Path]:
    """Markdown, CSV and plot per suite; returns the markdown files written."""
    written = []
    model = results[0].model if results else "?"
    for suite, rows in task_rows(results).items():
        stem = run_dir / f"{PREFIX}-{suite}"
        stem.with_suffix(".md").write_text(markdown(suite, model, base_lengths, rows, minimum,
                                                    mode),
                                           encoding="utf-8")
        write_csv(stem.with_suffix(".csv"), suite, model, rows)
        if long_lengths(rows):
            plot(stem.with_suffix(".png"), suite, model, rows, minimum)
        written.append(stem.with_suffix(".md"))
    return written


def _lc_cell(row: TaskRow, length: int) -> str:
    if length not in row.long_cells:
        return "n/a"
    lc = row.lc_at(length)
    if lc is None:
        return "undefined"
    bar = _bar(row, length)
    if bar is not None:
        return f"{_num(lc)} [{_num(bar[0])}, {_num(bar[1])}]"
    worst = row.worst_at(length)
    if worst is not None and worst.depth is not None:
        return f"{_num(lc)} ({format_depth(worst.depth)}%: {_num(worst.metrics['longscore'])})"
    return _num(lc)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _num(value: float | None) -> str:
    return "undefined" if value is None else f"{round(value, 1) + 0.0:+.1f}"  # no "-0.0"


def _csv(value: float | None, scale: float = 100.0) -> str:
    return "" if value is None else f"{scale * value:.2f}"
