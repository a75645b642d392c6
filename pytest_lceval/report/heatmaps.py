"""Score heatmaps of the run folder, cell scores written in as percent, red (0) to green (100):

- NIAH-style depth x length, one PNG per (suite, task) whose cells have a depth;
- task x length, one PNG per suite whose cells have no depth (100-LongBench), so such a suite
  gets a figure too.

Titles sit on two lines (what, then the model, elided in the middle when long) and the figure
uses matplotlib's constrained layout, so a long model path or a one-column grid never makes the
title run into the axis labels.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..grid import format_depth, format_length
from ..results import CellResult

HEATMAP_PREFIX = "heatmap"
MIN_WIDTH = 4.8
"""Inches: room for a two-line title even with a single column."""
MIN_HEIGHT = 3.0
"""Inches: room for the y label beside the axes (not up into the title) even with one row."""
TITLE_CHARS = 60
"""A model name longer than this is shown as its head and tail."""


def score_grid(results: list[CellResult], row_of: Callable[[CellResult], Any]
               ) -> tuple[list[int], list[Any], list[list[float]]]:
    """(lengths, row keys, scores[row][length]) with rows keyed by ``row_of`` (a depth, a
    task); NaN where a cell was skipped or not run."""
    lengths = sorted({r.length for r in results})
    rows = sorted({row_of(r) for r in results})
    grid = [[math.nan] * len(lengths) for _ in rows]
    for result in results:
        if result.outcome != "skipped":
            grid[rows.index(row_of(result))][lengths.index(result.length)] = result.score
    return lengths, rows, grid


def short_model(model: str, limit: int = TITLE_CHARS) -> str:
    """Head and tail of a long model name (a path's tail tells models apart)."""
    if len(model) <= limit:
        return model
    keep = (limit - 1) // 2
    return f"{model[:keep]}…{model[-keep:]}"


def heatmap_figure(lengths: list[int], row_labels: list[str], grid: list[list[float]],
                   ylabel: str, title: str, model: str) -> Any:
    """The figure: scores written in each cell, grey 'skip' where there is none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    values = np.ma.masked_invalid(100.0 * np.array(grid, dtype=float))
    colormap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#d0d0d0")
    label_width = 0.07 * max((len(label) for label in row_labels), default=4)
    figure, axes = plt.subplots(
        figsize=(max(MIN_WIDTH, 1.8 + label_width + 0.85 * len(lengths)),
                 max(MIN_HEIGHT, 1.7 + 0.45 * len(row_labels))), layout="constrained")
    image = axes.imshow(values, cmap=colormap, vmin=0.0, vmax=100.0, aspect="auto")
    for row, scores in enumerate(grid):
        for column, score in enumerate(scores):
            text = "skip" if math.isnan(score) else f"{100 * score:.0f}"
            axes.text(column, row, text, ha="center", va="center", fontsize=9)
    axes.set_xticks(range(len(lengths)), [format_length(n) for n in lengths])
    axes.set_yticks(range(len(row_labels)), row_labels)
    axes.set_xlabel("context length (tokens)")
    axes.set_ylabel(ylabel)
    axes.set_title(f"{title}\n{short_model(model)}", fontsize=9, pad=8)
    figure.colorbar(image, ax=axes, label="score (%)")
    return figure


def draw_heatmap(lengths: list[int], row_labels: list[str], grid: list[list[float]],
                 ylabel: str, title: str, model: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    figure = heatmap_figure(lengths, row_labels, grid, ylabel, title, model)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def heatmap_path(run_dir: Path, suite: str, task: str | None = None) -> Path:
    """'heatmap-<suite>-<task>.png' (depth x length), or 'heatmap-<suite>.png' (task x length)."""
    return run_dir / f"{HEATMAP_PREFIX}-{suite}{'' if task is None else '-' + task}.png"


def draw_depth_heatmap(cells: list[CellResult], path: Path) -> Path:
    lengths, depths, grid = score_grid(cells, lambda r: r.depth)
    first = cells[0]
    return draw_heatmap(lengths, [format_depth(d) + "%" for d in depths], grid,
                        "depth of key information", f"{first.task} ({first.suite})",
                        first.model, path)


def draw_task_heatmap(cells: list[CellResult], path: Path) -> Path:
    lengths, tasks, grid = score_grid(cells, lambda r: r.task)
    first = cells[0]
    return draw_heatmap(lengths, [str(t) for t in tasks], grid, "task",
                        f"{first.suite}: score by task and length", first.model, path)


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
    for (suite, task), cells in sorted(by_task.items()):
        draw_depth_heatmap(cells, heatmap_path(run_dir, suite, task))
    for suite, cells in sorted(by_suite.items()):
        draw_task_heatmap(cells, heatmap_path(run_dir, suite))
