"""What a comparison can detect, said before the first cell: per suite, per task, per cell.

At 2 cases per cell no cell can ever report a regression, and nothing said so. With the plan
(which cells run, how many cases each) and the saved run (each cell's per-case scores), the
smallest drop each level detects with power 0.8 is known before any model runs
(``stats.planned_detectable_drop``: the number of paired cases and the baseline's per-case
variance). A suite level is tested at alpha, a task at alpha / tasks (Holm's strictest step,
see ``pooled.py``), a cell at alpha (its own test, evidence only).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ...run.plan import PlannedCell
from ..stats import ALPHA, POWER, planned_detectable_drop
from .saved import SavedRun

MOST_SAMPLES = 100_000
"""The largest --samples the plan line looks for before saying none would do."""


@dataclass(frozen=True)
class Level:
    """The paired cases one level of the comparison would have (cases the baseline holds)."""

    cells: int
    n: int
    variance: float
    """Of the baseline's per-case scores over those cases."""


@dataclass(frozen=True)
class SuitePower:
    """What one suite's comparison can detect with this plan."""

    suite: str
    suite_drop: float
    task_drops: tuple[float, ...]
    """One per task, at Holm's strictest step (alpha / tasks); empty with one task."""
    cell_drops: tuple[float, ...]
    level: Level
    """The suite's own level (for the --samples that would reach a drop)."""


def suite_power(plan: Mapping[str, PlannedCell], saved: SavedRun,
                alpha: float = ALPHA) -> list[SuitePower]:
    """Per suite of the plan, what the comparison with ``saved`` detects (suites none of whose
    planned cells the baseline holds are left out: the coverage gate speaks of them)."""
    scores: dict[str, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    for nodeid, planned in plan.items():
        cell = saved.cells.get(nodeid)
        if cell is None or not cell.scores:
            continue
        scores[planned.suite][planned.task].append(list(cell.scores[:planned.cases]))
    found = []
    for suite, tasks in sorted(scores.items()):
        every = [cell for cells in tasks.values() for cell in cells]
        whole = _level(every)
        task_alpha = alpha / len(tasks)
        found.append(SuitePower(
            suite, planned_detectable_drop(whole.variance, whole.n, alpha),
            tuple(_drop(_level(cells), task_alpha) for cells in tasks.values())
            if len(tasks) > 1 else (),
            tuple(_drop(_level([cell]), alpha) for cell in every), whole))
    return found


def _level(cells: list[list[float]]) -> Level:
    values = np.array([score for cell in cells for score in cell], dtype=float)
    return Level(len(cells), len(values), float(values.var()) if len(values) else 0.0)


def _drop(level: Level, alpha: float) -> float:
    return planned_detectable_drop(level.variance, level.n, alpha)


def samples_reaching(power: SuitePower, min_drop: float, alpha: float = ALPHA) -> int | None:
    """The fewest cases per cell at which the suite detects ``min_drop`` (the baseline's
    variance held), by bisection; None when no --samples up to MOST_SAMPLES would."""
    level = power.level

    def reaches(samples: int) -> bool:
        return planned_detectable_drop(level.variance, level.cells * samples, alpha) <= min_drop

    if min_drop <= 0 or not reaches(MOST_SAMPLES):
        return None
    low, high = 0, MOST_SAMPLES  # reaches(high); not reaches(low)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def drop_text(drop: float) -> str:
    return "none" if math.isinf(drop) else f"{drop:.2f}"


def span(drops: tuple[float, ...]) -> str:
    """'0.25' or '0.25 to 0.61' or 'none': the best and the worst of a level's members."""
    low, high = drop_text(min(drops)), drop_text(max(drops))
    return low if low == high else f"{low} to {high}"


def power_lines(powers: list[SuitePower], name: str, min_drop: float,
                alpha: float = ALPHA) -> tuple[list[str], list[str]]:
    """(the plan's lines, one per suite; the warnings: suites that cannot detect
    --lceval-min-drop, with the --samples that would)."""
    lines, warnings = [], []
    for power in powers:
        tasks = (f"; per task (Holm over {len(power.task_drops)}): {span(power.task_drops)}"
                 if power.task_drops else "")
        suite = "no drop" if math.isinf(power.suite_drop) else \
            f"a drop of {drop_text(power.suite_drop)}"
        lines.append(
            f"lceval: compared with baseline {name!r}, {power.suite} can detect (power "
            f"{POWER:g}, alpha {alpha:g}) {suite} over its {power.level.n} paired "
            f"cases{tasks}; per cell: {span(power.cell_drops)}")
        if power.suite_drop > min_drop:
            reach = samples_reaching(power, min_drop, alpha)
            fix = (f"--samples {reach} would reach it (with a baseline saved at as many)"
                   if reach is not None else f"no --samples up to {MOST_SAMPLES:,} would")
            detects = "no drop at all" if math.isinf(power.suite_drop) else \
                f"only {drop_text(power.suite_drop)}"
            warnings.append(
                f"{power.suite} cannot detect a drop of --lceval-min-drop {min_drop:g} at "
                f"these samples ({detects}): {fix}")
    return lines, warnings
