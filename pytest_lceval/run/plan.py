"""The run's plan and its time estimate: what the collected cells cost, refined as they finish.

Cost is counted in prompt tokens, since a long-context run is prefill-dominated: a cell of
``samples`` cases at ``length`` tokens makes the model read about ``samples x length`` tokens.
Task Haystack's lengths are settings (tasks x shots) whose token length is only known once
measured, so its cells are timed per cell instead: remaining cells of a length setting cost the
model-seconds its finished cells took. Throughput is tokens per model-second of the cells the
model actually answered (cells served from the store would inflate it), times the number of
processes working at once. Before any cell is measured the estimate uses the throughput
remembered from the last run of the same model (``throughput.json`` next to the store).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..foundation.grid import Cell
from ..results.whole_file import write_whole

PRIOR_FILE = "throughput.json"
"""Remembered throughput per model, in the store's folder."""
PROGRESS_LINES = 20
"""Lines a non-interactive run prints about the whole run: one per 5 % of its cells."""


@dataclass(frozen=True)
class PlannedCell:
    """What one collected cell is expected to cost."""

    suite: str
    cases: int
    tokens: int | None
    """Prompt tokens the model reads; None when only measuring tells (Task Haystack)."""
    group: str
    """Cells expected to take alike when their tokens are unknown: suite and length label."""
    length: int = 0
    """The cell's context length in tokens; 0 when it is not one (Task Haystack's)."""
    task: str = ""

    @classmethod
    def of(cls, cell: Cell) -> PlannedCell:
        known = cell.length > 0
        return cls(cell.suite, cell.samples, cell.samples * cell.length if known else None,
                   f"{cell.suite}/{cell.length_label}", cell.length, cell.task)


def split_by_window(plan: Mapping[str, PlannedCell],
                    window: int | None) -> tuple[dict[str, PlannedCell], int]:
    """(the cells that can run, how many are longer than the model's ``window`` and will
    skip); every cell can run when the window is not known before loading."""
    fits = {nodeid: cell for nodeid, cell in plan.items()
            if window is None or cell.length <= window}
    return fits, len(plan) - len(fits)


def plan_of(items: Iterable[Any]) -> dict[str, PlannedCell]:
    """nodeid -> planned cell for the collected items that are lceval cells."""
    plan: dict[str, PlannedCell] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        cell = callspec.params.get("lc_cell") if callspec is not None else None
        if isinstance(cell, Cell):
            plan[item.nodeid] = PlannedCell.of(cell)
    return plan


def write_plan(path: Path, plan: Mapping[str, PlannedCell]) -> None:
    """Written by an xdist worker for the controller, which collects nothing itself."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, json.dumps({nodeid: asdict(cell) for nodeid, cell in plan.items()}))


def read_plan(path: Path, ids: Iterable[str]) -> dict[str, PlannedCell]:
    """The planned cells among ``ids`` (the ids a worker collected)."""
    stored = json.loads(path.read_text())
    return {nodeid: PlannedCell(**stored[nodeid]) for nodeid in ids if nodeid in stored}


@dataclass(frozen=True)
class Throughput:
    """Prompt tokens per second of the whole run (every process together)."""

    tokens_per_second: float
    workers: int
    date: str

    def describe(self) -> str:
        workers = f" with -n {self.workers}" if self.workers > 1 else ""
        return f"{self.tokens_per_second:,.0f} tok/s measured on {self.date}{workers}"


def load_prior(store_dir: Path, model: str) -> Throughput | None:
    """The throughput remembered for ``model``; None when none was, or the file is unreadable
    (it is only an estimate: a damaged file is ignored, and rewritten at the end of the run)."""
    try:
        entry = json.loads((store_dir / PRIOR_FILE).read_text())[model]
        return Throughput(float(entry["tokens_per_second"]), int(entry["workers"]),
                          str(entry["date"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_prior(store_dir: Path, model: str, throughput: Throughput) -> None:
    path = store_dir / PRIOR_FILE
    try:
        known = json.loads(path.read_text())
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    known[model] = asdict(throughput)
    store_dir.mkdir(parents=True, exist_ok=True)
    write_whole(path, json.dumps(known, indent=1, sort_keys=True) + "\n")


@dataclass
class RunTracker:
    """The plan, what has finished, and the estimate of what is left."""

    plan: dict[str, PlannedCell]
    prior: Throughput | None = None
    workers: int = 1
    too_long: int = 0
    """Selected cells left out of the plan: longer than the model's ``window``, they skip."""
    window: int | None = None
    done: set[str] = field(default_factory=set)
    tokens_measured: float = 0.0
    """Prompt tokens the model read in finished token-planned cells."""
    seconds_measured: float = 0.0
    """Model-seconds those cells took (summed over processes)."""
    group_seconds: dict[str, list[float]] = field(default_factory=dict)
    """Model-seconds of finished cells whose tokens were not planned, by group."""

    def finish(self, nodeid: str, properties: Mapping[str, Any]) -> None:
        """Count a finished cell; its recorded properties (run/evaluation.py's ``_record``) measure
        the model's throughput when the model answered some of its cases."""
        cell = self.plan.get(nodeid)
        if cell is None or nodeid in self.done:
            return
        self.done.add(nodeid)
        requests = int(properties.get("model_requests") or 0)
        seconds = float(properties.get("seconds_model") or 0.0)
        if requests <= 0 or seconds <= 0:
            return
        if cell.tokens is None:
            self.group_seconds.setdefault(cell.group, []).append(seconds)
            return
        answered = min(requests, int(properties.get("n") or requests))
        self.tokens_measured += answered * float(properties.get("input_tokens_mean") or 0.0)
        self.seconds_measured += seconds

    # -- numbers -----------------------------------------------------------------------------

    @property
    def measured(self) -> float | None:
        """Measured tokens/s of the run, all processes together."""
        if self.seconds_measured <= 0 or self.tokens_measured <= 0:
            return None
        return self.tokens_measured / self.seconds_measured * self.workers

    @property
    def rate(self) -> float | None:
        measured = self.measured
        return measured if measured is not None else (
            self.prior.tokens_per_second if self.prior else None)

    def remaining_seconds(self) -> tuple[float | None, int]:
        """(estimated seconds for the cells not done, how many cells cannot be estimated yet);
        None when nothing can be estimated."""
        rate = self.rate
        seconds, unknown, estimated = 0.0, 0, False
        for nodeid, cell in self.plan.items():
            if nodeid in self.done:
                continue
            if cell.tokens is not None and rate:
                seconds += cell.tokens / rate
                estimated = True
            elif cell.tokens is None and self.group_seconds.get(cell.group):
                timed = self.group_seconds[cell.group]
                seconds += sum(timed) / len(timed) / self.workers
                estimated = True
            else:
                unknown += 1
        return (seconds if estimated or unknown == 0 else None), unknown

    def step(self) -> int:
        """Cells between two progress lines in a log."""
        return max(1, math.ceil(len(self.plan) / PROGRESS_LINES))

    # -- lines -------------------------------------------------------------------------------

    def plan_line(self) -> str:
        longer = (f"longer than the model's {self.window or 0:,}-token window "
                  f"(they skip)")
        if not self.plan:
            return f"lceval: plan: no cell can run: all {self.too_long} selected cells are " \
                   + longer
        cells = self.plan.values()
        suites = sorted({cell.suite for cell in cells})
        tokens = sum(cell.tokens or 0 for cell in cells)
        unmeasured = sum(1 for cell in cells if cell.tokens is None)
        size = f"{_count(tokens)} tokens" if tokens or not unmeasured else ""
        if unmeasured:
            size += (" + " if size else "") + (
                f"{unmeasured} cell{_s(unmeasured)} whose length is measured as it runs")
        line = (f"lceval: plan: {len(suites)} suite{_s(len(suites))} ({', '.join(suites)}), "
                f"{len(self.plan):,} cell{_s(len(self.plan))}, "
                f"{sum(cell.cases for cell in cells):,} cases, {size}")
        if self.too_long:
            line += f"; {self.too_long} more selected cell{_s(self.too_long)} {longer}"
        seconds, unknown = self.remaining_seconds()
        if seconds is None or self.prior is None:
            return line + "; time: estimate after the first cell"
        line += f"; est. {duration(seconds)} (from {self.prior.describe()})"
        return line + (f", {unknown} cell{_s(unknown)} estimated once one of a kind is measured"
                       if unknown else "")

    def progress_line(self, elapsed: float) -> str:
        total = len(self.plan)
        cases_done = sum(self.plan[nodeid].cases for nodeid in self.done)
        cases = sum(cell.cases for cell in self.plan.values())
        parts = [f"lceval: {len(self.done):,}/{total:,} cells "
                 f"({100 * len(self.done) // max(total, 1)} %)",
                 f"{cases_done:,}/{cases:,} cases"]
        if self.measured is not None:
            parts.append(f"{self.measured:,.0f} tok/s")
        parts.append(f"{duration(elapsed)} elapsed")
        if len(self.done) < total:
            seconds, unknown = self.remaining_seconds()
            eta = "ETA after the first measured cell" if seconds is None else \
                f"ETA {duration(seconds)}" + (f" + {unknown} unmeasured cells" if unknown else "")
            parts.append(eta)
        return ", ".join(parts)


def duration(seconds: float) -> str:
    """45 s, 8 min, 2 h 50 min: as precise as an estimate deserves."""
    if seconds < 60:
        return f"{max(seconds, 0):.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def today() -> str:
    return time.strftime("%Y-%m-%d")


def _count(tokens: int) -> str:
    """4,100,000 -> '4.1M', 52,300 -> '52.3k'."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if tokens >= scale:
            return f"{tokens / scale:.1f}{unit}"
    return str(tokens)


def _s(count: int) -> str:
    return "" if count == 1 else "s"
