"""Score heatmaps of the run folder, cell scores written in as percent, red (0) to green (100):

- NIAH-style depth x length, one PNG per (suite, task) whose cells have a depth;
- task x length, one PNG per suite whose cells have no depth (100-LongBench), so such a suite
  gets a figure too;
- in a run compared with a saved one (``--lceval-compare``), beside each of them a Δ heatmap
  ('...-delta.png'): each cell's paired difference, current minus baseline, in points, blue
  where it gained and red where it lost, so where (depth x length) a model lost shows at once.

Every measured cell shows its score, whatever its verdict (an undefined LongScore skips the
verdict, not the measurement: the cell says 'LC undef.'); under the score, its N and a cross
with a dark frame when the cell failed; 'skip' only where nothing was measured. Labels are white
on dark colours and black on light ones, whichever contrasts more (WCAG's relative luminance).

Titles sit on two lines (what, then the model, elided in the middle when long) and the figure
uses matplotlib's constrained layout, so a long model path or a one-column grid never makes the
title run into the axis labels.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..foundation.grid import format_depth, format_length
from ..results.cells import CellResult
from .figure_style import MIN_WIDTH, label_colour, short_model

HEATMAP_PREFIX = "heatmap"
MIN_HEIGHT = 3.0
"""Inches: room for the y label beside the axes (not up into the title) even with one row."""


@dataclass(frozen=True)
class Mark:
    """What a heatmap cell says under its score."""

    n: int = 0
    failed: bool = False
    undefined: str = ""
    """Measured, but a plugin's verdict could not compute its value, named here (see
    ``Undefined``)."""
    status: str = ""
    """A compared cell's status against the baseline (Δ heatmaps)."""

    def note(self) -> str:
        text = f"N={self.n}" + (" ✗" if self.failed else "")
        return text + (f"\n{self.undefined} undef." if self.undefined else "") + \
            (f"\n{self.status}" if self.status else "")


@dataclass(frozen=True)
class Scale:
    """How a heatmap colours and writes its values (given as fractions, shown x 100)."""

    colormap: str = "RdYlGn"
    low: float = 0.0
    high: float = 100.0
    label: str = "score (%)"
    signed: bool = False
    """Write '+5' and '-25' (a difference) rather than '5'."""
    missing: str = "skip"
    """What a cell without a value says."""


SCORES = Scale()
COMPARISON = "baseline"
"""The criterion of the comparison with a saved run (verdicts/baseline), whose properties
hold each cell's paired difference."""


def delta_scale(grid: list[list[float]]) -> Scale:
    """Red for a loss, blue for a gain, white for none; symmetric, in steps of 10 points, so
    a small change is not drawn as a large one."""
    largest = max((abs(v) for row in grid for v in row if not math.isnan(v)), default=0.0)
    high = max(10.0, 10.0 * math.ceil(100.0 * largest / 10.0 - 1e-9))
    return Scale("RdBu", -high, high, "current − baseline (points)", signed=True,
                 missing="not compared")


Undefined = Callable[[CellResult], "str | None"]
"""The name of the value a plugin's verdict could not compute for a cell, None when there is
none (``pytest_lceval_undefined``)."""


def none_undefined(result: CellResult) -> str | None:
    """The ``Undefined`` of a run whose plugins compute every value they judge by."""
    return None


def score_marks(undefined: Undefined = none_undefined) -> Callable[[CellResult],
                                                                  tuple[float, Mark]]:
    """A cell's score (NaN when nothing was measured) and what it says under it."""
    def mark(result: CellResult) -> tuple[float, Mark]:
        return (result.score if result.measured else math.nan,
                Mark(result.n, result.outcome == "failed", undefined(result) or ""))
    return mark


def delta_mark(result: CellResult) -> tuple[float, Mark]:
    """A compared cell's paired difference from the baseline (NaN when it was not compared)
    and its status under it."""
    found = [j.properties for j in result.judgements if j.criterion == COMPARISON]
    diff = found[0].get("baseline_diff") if found else None
    if diff is None:
        return math.nan, Mark()
    status = str(found[0].get("baseline_status", ""))
    return float(diff), Mark(int(found[0].get("baseline_n", 0)), status == "regressed",
                             status=status)


def score_grid(results: list[CellResult], row_of: Callable[[CellResult], Any],
               value_of: Callable[[CellResult], tuple[float, Mark]] | None = None
               ) -> tuple[list[int], list[Any], list[list[float]], list[list[Mark]]]:
    """(lengths, row keys, values[row][length], marks[row][length]) with rows keyed by
    ``row_of`` (a depth, a task) and values from ``value_of`` (the score, or the difference
    from the baseline); NaN where a cell has none."""
    value_of = value_of or score_marks()
    lengths = sorted({r.length for r in results})
    rows = sorted({row_of(r) for r in results})
    grid = [[math.nan] * len(lengths) for _ in rows]
    marks = [[Mark() for _ in lengths] for _ in rows]
    for result in results:
        row, column = rows.index(row_of(result)), lengths.index(result.length)
        grid[row][column], marks[row][column] = value_of(result)
    return lengths, rows, grid, marks


def heatmap_figure(lengths: list[int], row_labels: list[str], grid: list[list[float]],
                   ylabel: str, title: str, model: str,
                   marks: list[list[Mark]] | None = None, scale: Scale = SCORES) -> Any:
    """The figure: each value written in its cell with its mark, grey ``scale.missing`` where
    none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle

    values = np.ma.masked_invalid(100.0 * np.array(grid, dtype=float))
    colormap = matplotlib.colormaps[scale.colormap].with_extremes(bad="#d0d0d0")
    label_width = 0.07 * max((len(label) for label in row_labels), default=4)
    figure, axes = plt.subplots(
        figsize=(max(MIN_WIDTH, 1.8 + label_width + 0.85 * len(lengths)),
                 max(MIN_HEIGHT, 1.7 + 0.5 * len(row_labels))), layout="constrained")
    image = axes.imshow(values, cmap=colormap, vmin=scale.low, vmax=scale.high, aspect="auto")
    for row, scores in enumerate(grid):
        for column, score in enumerate(scores):
            mark = marks[row][column] if marks else None
            if math.isnan(score):
                axes.text(column, row, scale.missing, ha="center", va="center", fontsize=9)
                continue
            place = (100 * score - scale.low) / (scale.high - scale.low)
            colour = label_colour(tuple(colormap(float(place))))
            axes.text(column, row - (0.12 if mark else 0),
                      f"{100 * score:{'+' if scale.signed else ''}.0f}", ha="center",
                      va="center", fontsize=10, color=colour)
            if mark is not None:
                axes.text(column, row + 0.22, mark.note(), ha="center", va="center",
                          fontsize=7.5, color=colour, linespacing=0.9)
                if mark.failed:
                    axes.add_patch(Rectangle((column - 0.47, row - 0.47), 0.94, 0.94,
                                             fill=False, edgecolor="#222222", linewidth=1.6))
    axes.set_xticks(range(len(lengths)), [format_length(n) for n in lengths])
    axes.set_yticks(range(len(row_labels)), row_labels)
    axes.set_xlabel("context length (tokens)")
    axes.set_ylabel(ylabel)
    axes.set_title(f"{title}\n{short_model(model)}", fontsize=9, pad=8)
    figure.colorbar(image, ax=axes, label=scale.label)
    return figure


def draw_heatmap(lengths: list[int], row_labels: list[str], grid: list[list[float]],
                 ylabel: str, title: str, model: str, path: Path,
                 marks: list[list[Mark]] | None = None, scale: Scale = SCORES) -> Path:
    import matplotlib.pyplot as plt

    figure = heatmap_figure(lengths, row_labels, grid, ylabel, title, model, marks, scale)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def heatmap_path(run_dir: Path, suite: str, task: str | None = None) -> Path:
    """'heatmap-<suite>-<task>.png' (depth x length), or 'heatmap-<suite>.png' (task x length)."""
    return run_dir / f"{HEATMAP_PREFIX}-{suite}{'' if task is None else '-' + task}.png"


def delta_path(path: Path) -> Path:
    """The Δ heatmap beside a score heatmap: 'heatmap-recall-vt-delta.png'."""
    return path.with_name(f"{path.stem}-delta{path.suffix}")


def draw_depth_heatmap(cells: list[CellResult], path: Path, delta: bool = False,
                       undefined: Undefined = none_undefined) -> Path:
    lengths, depths, grid, marks = score_grid(cells, lambda r: r.depth,
                                              delta_mark if delta else score_marks(undefined))
    first = cells[0]
    what = f"{first.task} ({first.suite})"
    return draw_heatmap(lengths, [format_depth(d) + "%" for d in depths], grid,
                        "depth of key information", _delta_title(what, cells) if delta else what,
                        first.model, path, marks, delta_scale(grid) if delta else SCORES)


def draw_task_heatmap(cells: list[CellResult], path: Path, delta: bool = False,
                       undefined: Undefined = none_undefined) -> Path:
    lengths, tasks, grid, marks = score_grid(cells, lambda r: r.task,
                                             delta_mark if delta else score_marks(undefined))
    first = cells[0]
    what = f"{first.suite}: score by task and length"
    return draw_heatmap(lengths, [str(t) for t in tasks], grid, "task",
                        _delta_title(what, cells) if delta else what, first.model, path, marks,
                        delta_scale(grid) if delta else SCORES)


def _delta_title(what: str, cells: list[CellResult]) -> str:
    names = sorted({str(j.properties.get("baseline")) for r in cells for j in r.judgements
                    if j.criterion == COMPARISON})
    return f"Δ {what} vs baseline {', '.join(names)}"


def compared(cells: list[CellResult]) -> bool:
    """Whether any cell has a paired difference from a saved run."""
    return any(not math.isnan(delta_mark(r)[0]) for r in cells)


@pytest.hookimpl
def pytest_lceval_session_finish(config: pytest.Config, run_dir: Path,
                                 results: list[CellResult]) -> None:
    by_task: dict[tuple[str, str], list[CellResult]] = defaultdict(list)
    by_suite: dict[str, list[CellResult]] = defaultdict(list)
    for result in results:
        if result.extra:
            continue
        if result.depth is None:
            by_suite[result.suite].append(result)
        else:
            by_task[(result.suite, result.task)].append(result)
    def undefined(result: CellResult) -> str | None:
        return config.hook.pytest_lceval_undefined(result=result)

    for (suite, task), cells in sorted(by_task.items()):
        path = draw_depth_heatmap(cells, heatmap_path(run_dir, suite, task), undefined=undefined)
        if compared(cells):
            draw_depth_heatmap(cells, delta_path(path), delta=True)
    for suite, cells in sorted(by_suite.items()):
        path = draw_task_heatmap(cells, heatmap_path(run_dir, suite), undefined=undefined)
        if compared(cells):
            draw_task_heatmap(cells, delta_path(path), delta=True)
