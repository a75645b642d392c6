"""What a comparison can detect, said before the first cell: per suite, per task, per cell.

At 2 cases per cell no cell can ever report a regression, and nothing said so. With the plan
(which cells run, how many cases each) and the saved run (each cell's per-case scores), the
smallest drop each level detects with power 0.8 is known before any model runs
(``stats.planned_detectable_drop``: the number of paired cases and the baseline's per-case
variance). Each level is planned at the share of alpha it starts with in the weighted Holm
procedure of ``pooled.py`` (the suite at alpha / 2, a task at alpha / (2 x tasks); a suite of
one task at alpha), a cell at alpha (its own test, evidence only); the power of the suite's and
of the tasks' tests at ``--lceval-min-drop`` is stated beside.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ...run.plan import PlannedCell
from ..stats import ALPHA, POWER, planned_detectable_drop, planned_power
from .pooled import levels_alpha
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
    """One per task, at the task's starting share of alpha; empty with one task."""
    cell_drops: tuple[float, ...]
    level: Level
    """The suite's own level (for the --samples that would reach a drop)."""
    suite_alpha: float = ALPHA
    task_alpha: float = ALPHA
    """The levels the suite's and each task's tests start at (``pooled.levels_alpha``)."""
    task_levels: tuple[Level, ...] = ()

    def suite_power(self, drop: float) -> float:
        """The suite test's planned power for a drop of ``drop``."""
        return planned_power(self.level.variance, self.level.n, drop, self.suite_alpha)

    def task_powers(self, drop: float) -> tuple[float, ...]:
        """Each task test's planned power for a drop of ``drop`` (on that task alone)."""
        return tuple(planned_power(level.variance, level.n, drop, self.task_alpha)
                     for level in self.task_levels)


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
        suite_alpha, task_alpha = levels_alpha(len(tasks), alpha)
        task_levels = tuple(_level(cells) for cells in tasks.values()) if len(tasks) > 1 else ()
        found.append(SuitePower(
            suite, _drop(whole, suite_alpha),
            tuple(_drop(level, task_alpha) for level in task_levels),
            tuple(_drop(_level([cell]), alpha) for cell in every), whole, suite_alpha,
            task_alpha, task_levels))
    return found


def _level(cells: list[list[float]]) -> Level:
    values = np.array([score for cell in cells for score in cell], dtype=float)
    return Level(len(cells), len(values), float(values.var()) if len(values) else 0.0)


def _drop(level: Level, alpha: float) -> float:
    return planned_detectable_drop(level.variance, level.n, alpha)


def samples_reaching(power: SuitePower, min_drop: float) -> int | None:
    """The fewest cases per cell at which the suite detects ``min_drop`` (the baseline's
    variance held), by bisection; None when no --samples up to MOST_SAMPLES would."""
    level = power.level

    def reaches(samples: int) -> bool:
        return planned_detectable_drop(level.variance, level.cells * samples,
                                       power.suite_alpha) <= min_drop

    if min_drop <= 0 or not reaches(MOST_SAMPLES):
        return None
    low, high = 0, MOST_SAMPLES  # reaches(high); not reaches(low)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def drop_text(drop: float) -> str:
    return "none" if math.isinf(drop) else f"{drop:.2f}"


def span(values: tuple[float, ...], shown: Callable[[float], str] = drop_text) -> str:
    """'0.25' or '0.25 to 0.61' or 'none': the lowest and the highest of a level's members
    (their detectable drops, or their powers)."""
    low, high = shown(min(values)), shown(max(values))
    return low if low == high else f"{low} to {high}"


def power_lines(powers: list[SuitePower], name: str,
                min_drop: float) -> tuple[list[str], list[str]]:
    """(the plan's lines, one per suite; the warnings: suites that cannot detect
    --lceval-min-drop, with the --samples that would)."""
    lines, warnings = [], []
    for power in powers:
        suite = "no drop" if math.isinf(power.suite_drop) else \
            f"a drop of {drop_text(power.suite_drop)}"
        at_min = f"power at --lceval-min-drop {min_drop:g}: suite {power.suite_power(min_drop):.2f}"
        tasks = ""
        if power.task_drops:
            tasks = (f"; each task (alpha {power.task_alpha:.2g}, {len(power.task_drops)} "
                     f"tasks): {span(power.task_drops)}")
            at_min += f", a task {span(power.task_powers(min_drop), '{:.2f}'.format)}"
        lines.append(
            f"lceval: compared with baseline {name!r}, {power.suite} can detect (power "
            f"{POWER:g}) {suite} over its {power.level.n} paired cases (alpha "
            f"{power.suite_alpha:.2g}){tasks}; per cell: {span(power.cell_drops)}; {at_min}")
        if power.suite_drop > min_drop:
            reach = samples_reaching(power, min_drop)
            fix = (f"--samples {reach} would reach it (with a baseline saved at as many)"
                   if reach is not None else f"no --samples up to {MOST_SAMPLES:,} would")
            detects = "no drop at all" if math.isinf(power.suite_drop) else \
                f"only {drop_text(power.suite_drop)}"
            warnings.append(
                f"{power.suite} cannot detect a drop of --lceval-min-drop {min_drop:g} at "
                f"these samples ({detects}): {fix}")
    return lines, warnings
