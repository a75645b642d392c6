"""Task Haystack's two pictures (paper Fig. 2 and Appendix E), coloured by verdict:
red = FAIL (-1), white = PASS (0), blue = EXCEL (+1), grey = no test there.

- NIAH-style heatmap: x = length setting, labelled with its measured context length; y = depth
  bins of the test task's stream position, as the reference notebook bins them
  (playground/analysis_niath.ipynb: ``np.array_split`` of the stream positions into 8 bins, so 2
  positions a bin for 16 tasks, rows labelled with the depth of each bin's last position: 6 %,
  19 %, ..., 94 %); colour = mean verdict.
- Diagnostic report: task x stream-index matrix (grey where a task never sat at that index in
  the sampled permutations), row means (by task) at the right, column means (by index) below,
  one strip per permutation at the bottom, and a colour bar naming the verdicts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from ...report.figure_style import MIN_WIDTH, label_colour, short_model
from .metrics import HaystackMetrics, Measured

GREY = "#bdbdbd"
DEPTH_BINS = 8
"""Rows of the NIAH heatmap (the reference's 8 bins; fewer when the stream is shorter)."""


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colormap() -> Any:
    import matplotlib

    return matplotlib.colormaps["RdBu"].with_extremes(bad=GREY)


def _index(metrics: HaystackMetrics) -> int:
    """The test task's stream position: only settings with a stream are drawn."""
    if metrics.stream_index is None:
        raise ValueError(f"Task Haystack {metrics.setting}: no stream position to draw")
    return metrics.stream_index


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def niah_grid(cells: list[Measured]) -> tuple[list[str], list[str], list[list[float]]]:
    """(column labels, row labels, mean verdict [bin][length]); NaN where no test fell."""
    by_length: dict[str, list[Measured]] = defaultdict(list)
    for cell in cells:
        by_length[cell.metrics.length_setting].append(cell)
    tokens = {k: _mean([r.input_tokens_mean for r, _ in group]) for k, group in by_length.items()}
    lengths = sorted(by_length, key=tokens.__getitem__)
    sizes = {m.n_task for _, m in cells}
    bins = min(DEPTH_BINS, max(sizes))
    values: list[list[list[float]]] = [[[] for _ in lengths] for _ in range(bins)]
    for column, length in enumerate(lengths):
        for _, m in by_length[length]:
            row = depth_bins(m.n_task, bins)[_index(m)]
            values[row][column].append(m.verdict_value)
    columns = [f"{k}\n{tokens[k]:.0f} tok" for k in lengths]  # the mean Lifelong prompt
    if len(sizes) == 1:  # the depth of each bin's last stream position, as the reference
        size = sizes.pop()
        last = {row: index for index, row in enumerate(depth_bins(size, bins))}
        rows = [f"{round(100 * last[b] / size)}%" for b in range(bins)]
    else:  # streams of several sizes share the rows: label the share of the stream
        rows = [f"{100 * b / bins:.0f}-{100 * (b + 1) / bins:.0f}%" for b in range(bins)]
    return columns, rows, [[_mean(v) for v in row] for row in values]


def depth_bins(size: int, bins: int) -> list[int]:
    """The row of each stream position 0..size-1: ``np.array_split`` of the positions into
    ``bins`` nearly equal runs (the first ones one longer when ``bins`` does not divide); a
    stream shorter than ``bins`` (beside longer ones) spreads its positions over the rows."""
    import numpy as np

    if size < bins:
        return [index * bins // size for index in range(size)]
    rows = [0] * size
    for row, chunk in enumerate(np.array_split(np.arange(size), bins)):
        for index in chunk:
            rows[int(index)] = row
    return rows


def draw_niah(cells: list[Measured], path: Path) -> Path:
    import numpy as np

    plt = _plt()
    columns, rows, grid = niah_grid(cells)
    data = np.ma.masked_invalid(np.array(grid, dtype=float))
    figure, axes = plt.subplots(figsize=(max(MIN_WIDTH, 2.0 + 1.3 * len(columns)),
                                         1.5 + 0.4 * len(rows)), layout="constrained")
    colormap = _colormap()
    image = axes.imshow(data, cmap=colormap, vmin=-1, vmax=1, aspect="auto")
    for r, row in enumerate(grid):
        for c, value in enumerate(row):
            if not math.isnan(value):
                axes.text(c, r, f"{value:+.2f}", ha="center", va="center", fontsize=8,
                          color=label_colour(tuple(colormap((value + 1) / 2))))
    axes.set_xticks(range(len(columns)), columns, fontsize=8)
    axes.set_yticks(range(len(rows)), rows, fontsize=8)
    axes.set_xlabel("length setting (tasks x shots) and measured context length")
    axes.set_ylabel("depth of the test task in the stream")
    first, metrics = cells[0]
    axes.set_title(f"Task Haystack ({metrics.setting}): red fail, white pass, blue "
                   f"excel\n{short_model(first.model)}", fontsize=9, pad=8)
    figure.colorbar(image, ax=axes, label="mean verdict")
    return _save(figure, path)


def diagnostic_matrices(cells: list[Measured]) -> dict[str, Any]:
    """The report's matrices: main[task][index], strip[permutation][index], row/column means."""
    tasks = sorted({r.task for r, _ in cells})
    size = max(m.n_task for _, m in cells)
    perms = sorted({m.permutation for _, m in cells})
    at: dict[tuple[int, int], list[float]] = defaultdict(list)
    strip = [[math.nan] * size for _ in perms]
    for result, m in cells:
        index = _index(m)
        at[(tasks.index(result.task), index)].append(m.verdict_value)
        strip[perms.index(m.permutation)][index] = m.verdict_value
    main = [[_mean(at.get((t, i), [])) for i in range(size)] for t in range(len(tasks))]
    by_task = [_mean([v for i in range(size) for v in at.get((t, i), [])])
               for t in range(len(tasks))]
    by_index = [_mean([v for t in range(len(tasks)) for v in at.get((t, i), [])])
                for i in range(size)]
    return {"tasks": tasks, "permutations": perms, "main": main, "strip": strip,
            "by_task": by_task, "by_index": by_index}


def draw_diagnostic(cells: list[Measured], path: Path) -> Path:
    return _save(diagnostic_figure(cells), path)


def diagnostic_figure(cells: list[Measured]) -> Any:
    """The diagnostic report's figure (see the module docstring)."""
    import numpy as np

    plt = _plt()
    m = diagnostic_matrices(cells)
    n_tasks, size, n_perms = len(m["tasks"]), len(m["by_index"]), len(m["permutations"])
    figure = plt.figure(figsize=(max(MIN_WIDTH, 3.5 + 0.35 * size),
                                 2.0 + 0.3 * (n_tasks + n_perms + 1)))
    grid = figure.add_gridspec(3, 2, width_ratios=[size, 1.2], wspace=0.05, hspace=0.15,
                               height_ratios=[n_tasks, 1, n_perms])
    cmap = _colormap()

    def show(axes: Any, values: Any, xlabels: list[str] | None, ylabels: list[str]) -> Any:
        image = axes.imshow(np.ma.masked_invalid(np.array(values, dtype=float)), cmap=cmap,
                            vmin=-1, vmax=1, aspect="auto")
        axes.set_yticks(range(len(ylabels)), ylabels, fontsize=7)
        if xlabels is None:
            axes.set_xticks([])
        else:
            axes.set_xticks(range(len(xlabels)), xlabels, fontsize=7)
        return image

    indices = [str(i) for i in range(size)]
    main = figure.add_subplot(grid[0, 0])
    show(main, m["main"], None, m["tasks"])
    first, metrics = cells[0]
    main.set_title(f"Task Haystack diagnostic ({metrics.setting}, {metrics.length_setting}); "
                   f"grey = never there\n{short_model(first.model)}", fontsize=9, pad=8)
    right = figure.add_subplot(grid[0, 1])
    show(right, [[v] for v in m["by_task"]], ["task\nmean"], [""] * n_tasks)
    right.set_yticks([])
    show(figure.add_subplot(grid[1, 0]), [m["by_index"]], None, ["index mean"])
    bottom = figure.add_subplot(grid[2, 0])
    image = show(bottom, m["strip"], indices, [f"perm {p}" for p in m["permutations"]])
    bottom.set_xlabel("stream index of the test task")
    bar = figure.colorbar(image, ax=figure.axes, fraction=0.04, pad=0.03, ticks=[-1, 0, 1])
    bar.ax.set_yticklabels(["-1 FAIL", "0 PASS", "+1 EXCEL"], fontsize=7)
    bar.set_label("verdict (mean where several)", fontsize=7)
    return figure


def _save(figure: Any, path: Path) -> Path:
    plt = _plt()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
