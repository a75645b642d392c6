"""The session's LongScore summary per suite, in the layout of 100-LongBench's Table 7 (Base
Ability, Avg score and Avg LC over the long lengths), as markdown and CSV, plus a plot of LC_l
against length per task.

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

import numpy as np

from ..grid import format_length
from ..results import CellResult
from ..stats import longscore
from .config import RELEASED

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

    def score_at(self, length: int) -> float:
        return float(np.mean([c.score for c in self.long_cells[length]]))

    def lc_at(self, length: int) -> float | None:
        """Mean LC over the length's cells; None when any of them is undefined."""
        values = [c.metrics.get("longscore") for c in self.long_cells[length]]
        defined = [float(v) for v in values if v is not None]
        return float(np.mean(defined)) if len(defined) == len(values) else None

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
            rows[key] = TaskRow(result.task, result.metrics.get("longscore_base"),
                                int(result.metrics.get("longscore_window", 0)),
                                float(result.metrics.get("longscore_floor", 0.0)),
                                str(result.metrics.get("longscore_base_on", "")))
        if role == "long" and not math.isnan(result.score):
            rows[key].long_cells.setdefault(result.length, []).append(result)
    by_suite: dict[str, list[TaskRow]] = defaultdict(list)
    for (suite, _), row in sorted(rows.items()):
        by_suite[suite].append(row)
    return dict(by_suite)


def long_lengths(rows: list[TaskRow]) -> list[int]:
    return sorted({length for row in rows for length in row.long_cells})


def overall(rows: list[TaskRow]) -> tuple[float | None, float | None, float | None]:
    """The model's (Base, Avg score, Avg LC): means over the tasks measured at long lengths
    with a base, and LongScore of those means (see the module docstring)."""
    measured = [r for r in rows if r.base is not None and r.avg_score is not None]
    if not measured:
        return _mean([r.base for r in rows if r.base is not None]), None, None
    base = float(np.mean([r.base for r in measured]))
    score = float(np.mean([r.avg_score for r in measured]))
    return base, score, longscore(score, base, max(r.floor for r in measured))


def markdown(suite: str, model: str, base_lengths: str, rows: list[TaskRow],
             mode: str = RELEASED) -> str:
    lengths = long_lengths(rows)
    base, score, lc = overall(rows)
    window = max((r.window for r in rows), default=0)
    measured = sum(r.base is not None and r.avg_score is not None for r in rows)
    on = (f"the gold passages alone (no distractors) for the tasks marked 'alone' in the Base "
          f"column and the mean score at {base_lengths} for the others, as 100-LongBench's "
          f"released code measures it" if mode == RELEASED else
          f"the mean score at {base_lengths} for every task, as 100-LongBench's paper states it")
    lines = [
        f"# LongScore: {suite}, {model}", "",
        f"Base Ability (--longscore-base {mode}): {on} (the run's cells of a base length, else "
        f"N/3 cases per length). Avg score: mean over "
        f"the long lengths {', '.join(format_length(n) for n in lengths) or '(none)'}. Avg LC: "
        "(Avg score - Base) / Base. The model row averages the "
        f"{measured} task{'' if measured == 1 else 's'} measured at "
        "long lengths, as the paper's Table 7 does. Scores and LC (LongScore x 100) in percent.",
        "",
        "| Model | Claimed Length | Base Ability | Avg score | Avg LC |",
        "| --- | --- | --- | --- | --- |",
        f"| {model} | {format_length(window) if window else '?'} | {_pct(base)} | {_pct(score)} "
        f"| {_num(lc) if lengths else 'n/a'} |", "", "## Per task", "",
        "| Task | Base on | Base Ability | Avg score | Avg LC | "
        + " | ".join(f"LC@{format_length(n)}" for n in lengths) + " |",
        "| --- " * (5 + len(lengths)) + "|",
    ]
    for row in rows:
        cells = [_lc_cell(row, n) for n in lengths]
        avg_lc = _num(row.avg_lc) if row.long_cells else "n/a"
        lines.append(f"| {row.task} | {row.base_on or '?'} | {_pct(row.base)} | "
                     f"{_pct(row.avg_score)} | {avg_lc} | " + " | ".join(cells) + " |")
    lines += ["", "n/a: not measured; undefined: base ability below the floor "
              "(--longscore-floor). LC@length shows the 95% bootstrap interval when the length "
              "has one cell (tasks without depth), else the mean over its depth cells."]
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


def plot(path: Path, suite: str, model: str, rows: list[TaskRow], minimum: float | None) -> None:
    """LC_l against length, one line per task; faint dots are the depth cells, bars the
    bootstrap interval where a length has a single cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7.0, 4.2))
    for row in rows:
        points = [(n, lc) for n in sorted(row.long_cells) if (lc := row.lc_at(n)) is not None]
        if not points:
            continue
        lengths, means = [n for n, _ in points], [lc for _, lc in points]
        (line,) = axes.plot(lengths, means, marker="o", label=row.task)
        for n in lengths:
            cells = row.long_cells[n]
            if len(cells) == 1:
                low, high = cells[0].metrics.get("longscore_ci_low"), \
                    cells[0].metrics.get("longscore_ci_high")
                if low is not None and high is not None:
                    axes.vlines(n, low, high, color=line.get_color(), alpha=0.6)
            else:
                axes.scatter([n] * len(cells), [c.metrics["longscore"] for c in cells],
                             color=line.get_color(), alpha=0.3, s=12)
    undefined = [row.task for row in rows if row.long_cells and row.avg_lc is None]
    if undefined:
        axes.text(0.01, 0.01, "LC undefined (base below the floor): " + ", ".join(undefined),
                  transform=axes.transAxes, fontsize=7, color="grey")
    axes.axhline(0.0, color="grey", linewidth=0.8)
    if minimum is not None:
        axes.axhline(minimum, color="red", linestyle="--", linewidth=0.8,
                     label=f"--longscore-min {minimum:g}%")
    axes.set_xscale("log", base=2)
    ticks = long_lengths(rows)
    axes.set_xticks(ticks, [format_length(n) for n in ticks])
    axes.set_xlabel("context length (tokens)")
    axes.set_ylabel("LongScore LC (%)")
    axes.set_title(f"LongScore by length: {suite} - {model}", fontsize=10)
    if axes.get_legend_handles_labels()[0]:  # no line when every task's LC is undefined
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_summaries(run_dir: Path, results: list[CellResult], base_lengths: str,
                    minimum: float | None, mode: str = RELEASED) -> list[Path]:
    """Markdown, CSV and plot per suite; returns the markdown files written."""
    written = []
    model = results[0].model if results else "?"
    for suite, rows in task_rows(results).items():
        stem = run_dir / f"{PREFIX}-{suite}"
        stem.with_suffix(".md").write_text(markdown(suite, model, base_lengths, rows, mode),
                                           encoding="utf-8")
        write_csv(stem.with_suffix(".csv"), suite, model, rows)
        if long_lengths(rows):
            plot(stem.with_suffix(".png"), suite, model, rows, minimum)
        written.append(stem.with_suffix(".md"))
    return written


def _lc_cell(row: TaskRow, length: int) -> str:
    if length not in row.long_cells:
        return "n/a"
    lc, cells = row.lc_at(length), row.long_cells[length]
    if lc is None:
        return "undefined"
    low, high = cells[0].metrics.get("longscore_ci_low"), cells[0].metrics.get("longscore_ci_high")
    if len(cells) == 1 and low is not None and high is not None:
        return f"{_num(lc)} [{_num(low)}, {_num(high)}]"
    return _num(lc)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _num(value: float | None) -> str:
    return "undefined" if value is None else f"{round(value, 1) + 0.0:+.1f}"  # no "-0.0"


def _csv(value: float | None, scale: float = 100.0) -> str:
    return "" if value is None else f"{scale * value:.2f}"
