"""The suite's grid and what each test measures: pure functions of the settings and the seed.

One test = (task, length setting, permutation, controlled setting). Cells are ordered setting ->
length -> permutation -> task, so the tests that share a stream prefix are neighbours; under
xdist they land on different workers, which start on different resamples (see
``resample_order``) and so compute different shared prefixes at the same time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...foundation.grid import Cell
from ...settings import Settings
from .config import HaystackSettings, LengthSetting
from .data import LliclTask, load_task
from .prompts import STREAM_SETTINGS, StreamSpec, depth_percent, permutations, stream_subset

SUITE = "task_haystack"


@dataclass(frozen=True)
class HaystackCell(Cell):
    """One Task Haystack test: its axes are a length *setting* (tasks x shots, whose token
    length only measuring tells, so ``length`` is 0), a permutation of the stream and a
    controlled setting."""

    n_task: int = 0
    n_shot: int = 0
    permutation: int = 0
    setting: str = "recall"

    @property
    def length_setting(self) -> LengthSetting:
        return LengthSetting(self.n_task, self.n_shot)

    @property
    def length_label(self) -> str:
        return self.length_setting.label

    def id_tail(self) -> list[str]:
        return [f"p{self.permutation}", self.setting]

    def axes(self) -> dict[str, Any]:
        return {"perm": f"p{self.permutation}", "setting": self.setting}


def tested_inputs(hs: HaystackSettings) -> dict[str, int]:
    """The test inputs each task is tested on: the first ``--haystack-test-size`` of its
    test.jsonl, or all it holds when it holds fewer (the plan counts these, not the option)."""
    return {name: min(hs.test_size, len(load_task(hs.root, name).test)) for name in hs.tasks}


def cells(hs: HaystackSettings, core: Settings) -> list[HaystackCell]:
    """Every test of the run; ``--lceval-tasks`` narrows which tasks are tested (the streams
    keep every task of the length setting)."""
    inputs = tested_inputs(hs)
    grid: list[HaystackCell] = []
    for setting in hs.settings:
        for length in hs.lengths:
            subset = stream_subset(hs.tasks, length.n_task, core.seed)
            tested = [t for t in subset if not core.tasks or t in core.tasks]
            for permutation in range(hs.permutations):
                grid.extend(
                    HaystackCell(SUITE, task, 0, None, inputs[task], n_task=length.n_task,
                                 n_shot=length.n_shot, permutation=permutation,
                                 setting=setting)
                    for task in tested)
    return grid


@dataclass(frozen=True)
class CellPlan:
    """What one test compares: its task, its stream and where the task sits in it."""

    task: LliclTask
    stream: tuple[LliclTask, ...]
    """Every task of the length setting, in this permutation's order."""
    length: LengthSetting
    setting: str
    permutation: int
    rows: tuple[Mapping[str, str], ...]
    """The test inputs (the first ``test_size`` of test.jsonl)."""
    resamples: tuple[int, ...]
    """Resample ids in the order this test computes them."""
    seed: int

    @property
    def index(self) -> int | None:
        """Stream position of the test task; None in settings without a stream."""
        if self.setting not in STREAM_SETTINGS:
            return None
        return [task.name for task in self.stream].index(self.task.name)

    @property
    def depth(self) -> float | None:
        index = self.index
        return None if index is None else depth_percent(index, len(self.stream))

    def spec(self, resample: int, setting: str | None = None) -> StreamSpec:
        return StreamSpec(setting or self.setting, self.stream, resample, self.length.n_shot,
                          self.permutation, self.seed)


def plan_cell(cell: HaystackCell, hs: HaystackSettings, seed: int) -> CellPlan:
    length, permutation = cell.length_setting, cell.permutation
    subset = stream_subset(hs.tasks, length.n_task, seed)
    order = permutations(subset, permutation + 1, seed)[permutation]
    stream = tuple(load_task(hs.root, name) for name in order)
    task = load_task(hs.root, cell.task)
    return CellPlan(task, stream, length, cell.setting, permutation,
                    task.test_cases(hs.test_size), resample_order(subset.index(cell.task),
                                                                  hs.resamples), seed)


def resample_order(task_index: int, resamples: int) -> tuple[int, ...]:
    """0..R-1 rotated by the task's index: neighbouring tests start on different resamples."""
    start = task_index % resamples
    return tuple((start + k) % resamples for k in range(resamples))
