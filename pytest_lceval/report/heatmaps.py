"""NIAH-style depth x length heatmaps of cell scores, one PNG per (suite, task)."""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from ..grid import format_depth, format_length
from ..results import CellResult

HEATMAP_PREFIX = "heatmap"


def score_grid(results: list[CellResult]) -> tuple[list[int], list[float], list[list[float]]]:
    """(lengths, depths, scores[depth][length]); NaN where a cell was skipped or not run."""
    lengths = sorted({r.length for r in results})
    depths = sorted({r.depth for r in results if r.depth is not None})
    grid = [[math.nan] * len(lengths) for _ in depths]
    for result in results:
        if result.depth is None or result.outcome == "skipped":
            continue
        grid[depths.index(result.depth)][lengths.index(result.length)] = result.score
    return lengths, depths, grid


def draw_heatmap(results: list[CellResult], title: str, path: Path) -> Path:
    """Red (0) to green (1) cells with the score written in; grey 'skip' where no score."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    lengths, depths, grid = score_grid(results)
    values = np.ma.masked_invalid(np.array(grid, dtype=float))
    colormap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#d0d0d0")
    figure, axes = plt.subplots(figsize=(1.4 + 1.1 * len(lengths), 1.2 + 0.55 * len(depths)))
    image = axes.imshow(values, cmap=colormap, vmin=0.0, vmax=1.0, aspect="auto")
    for row, depth_scores in enumerate(grid):
        for column, score in enumerate(depth_scores):
            text = "skip" if math.isnan(score) else f"{100 * score:.0f}"
            axes.text(column, row, text, ha="center", va="center", fontsize=9)
    axes.set_xticks(range(len(lengths)), [format_length(n) for n in lengths])
    axes.set_yticks(range(len(depths)), [format_depth(d) + "%" for d in depths])
    axes.set_xlabel("context length (tokens)")
    axes.set_ylabel("depth of key information")
    axes.set_title(textwrap.fill(title, width=28 + 9 * len(lengths)), fontsize=9)
    figure.colorbar(image, ax=axes, label="score")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def heatmap_path(run_dir: Path, suite: str, task: str) -> Path:
    return run_dir / f"{HEATMAP_PREFIX}-{suite}-{task}.png"


@pytest.hookimpl
def pytest_lceval_session_finish(config: pytest.Config, run_dir: Path,
                                 results: list[CellResult]) -> None:
    by_task: dict[tuple[str, str], list[CellResult]] = defaultdict(list)
    for result in results:
        if result.depth is not None and not result.extra:
            by_task[(result.suite, result.task)].append(result)
    for (suite, task), cells in sorted(by_task.items()):
        model = cells[0].model
        draw_heatmap(cells, f"{task} ({suite}) - {model}", heatmap_path(run_dir, suite, task))
