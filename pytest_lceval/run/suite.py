"""What a suite is: one object with its grid, its measurement, its verdict policy and its
session summary, registered through ``pytest_lceval_suites`` (as pytest-xdist lets a plugin
supply a scheduler). A test module names it with ``pytest.mark.lceval(suite=...)``.

Adding a suite is one module: subclass :class:`Suite` (its ``measure`` returns a
:class:`~pytest_lceval.foundation.measurement.Measurement`), or instantiate
:class:`~pytest_lceval.run.generation_suite.GenerationSuite` for generation tasks; return it from a
``pytest_lceval_suites`` hook in a plugin or conftest, and write a test module with the marker.
``docs/examples/row_lookup/`` is a complete one.
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..foundation.criterion import VerdictPolicy
from ..foundation.data import ESSAY_FOLDER, Fallbacks
from ..foundation.grid import Cell
from ..foundation.measurement import Measurement
from ..results.cells import CellResult
from ..results.score_metric import ScoreMetric
from ..settings import Settings
from .named import by_name

if TYPE_CHECKING:
    from .evaluation import Evaluator


class CellStopped(Exception):
    """A measurement that ended without a score; ``measured`` is what it measured before it
    stopped (the filter's counts, the chat template used), which the result line keeps."""

    def __init__(self, reason: str, measured: Measurement | None = None) -> None:
        super().__init__(reason)
        self.measured = measured or Measurement()


class CellSkipped(CellStopped):
    """The cell cannot be measured (it does not fit the window, nothing is left to score...):
    the test is skipped with this reason, and the result line says so."""


class CellRefused(CellStopped):
    """The cell must not be measured as asked (e.g. options the backend cannot tell apart): the
    test fails with this reason without a score."""


class Suite(ABC):
    """One suite. Instances are created in ``pytest_configure`` (they may hold resolved
    options) and live for the session, in every process."""

    name: str
    """The name the marker uses; also the category marker of its cells."""
    description: str = ""
    policy: VerdictPolicy = VerdictPolicy(("threshold", "baseline"))
    metric: ScoreMetric | None = None
    """What the cells' scores are, for a suite whose cells are not generation tasks' (Task
    Haystack's accuracy); a generation suite names each task's own (``metric_for``)."""
    own_grid: bool = False
    """True for a suite whose cells are not the run's lengths x depths x samples (it says its
    own grid in ``header``); the report header's grid line names the suites it is for."""
    measures_ahead: bool = False
    """Whether ``measure`` may run for the cells after the running one, together with it, so
    that their requests share the engine's batches (``lookahead``). It may when measuring
    touches nothing but the evaluator, the cell and its result, and waits for nothing but
    the models."""

    @abstractmethod
    def grid(self, settings: Settings) -> list[Cell]:
        """The suite's cells; raising ``pytest.UsageError`` or ``DataError`` reports one line."""

    @abstractmethod
    def measure(self, cell: Cell, evaluator: Evaluator) -> Measurement:
        """What ``cell`` measures (scores, case keys, timings, metrics, samples); the core makes
        the cell's result from it. Raise :class:`CellSkipped` or :class:`CellRefused`. Judging
        comes after, elsewhere."""

    def source(self, evaluator: Evaluator) -> str:
        """Where the suite's text comes from, until measuring says otherwise."""
        return evaluator.data.origin(ESSAY_FOLDER)

    def metric_for(self, task: str) -> ScoreMetric:
        """The metric of ``task``'s cell scores, which every result names."""
        if self.metric is None:
            raise pytest.UsageError(
                f"pytest-lceval: suite {self.name!r} declares no metric: give it `metric = "
                f"ScoreMetric(name, about, low, high)` (pytest_lceval.results.score_metric), so "
                f"that its results say what their scores are")
        return self.metric

    def declares_metrics(self) -> bool:
        """Whether every cell's score has a declared metric (checked at start-up)."""
        return self.metric is not None

    def task_names(self) -> list[str]:
        """The tasks this suite knows, so that ``--lceval-tasks`` and per-task thresholds are
        checked against every suite."""
        return []

    def task(self, name: str) -> Any:
        """The task object named ``name``; KeyError for a suite whose tasks are not objects."""
        raise KeyError(f"suite {self.name!r} has no task object {name!r}")

    def with_tasks(self, tasks: Iterable[Any]) -> Suite:
        """This suite with the tasks another plugin adds (:class:`MoreTasks`)."""
        raise pytest.UsageError(f"pytest-lceval: suite {self.name!r} does not take tasks from "
                                f"other plugins")

    def why_empty(self, settings: Settings) -> str:
        """Why the grid has no cell with these settings (shown when nothing is left to run)."""
        if settings.tasks:
            return (f"--lceval-tasks {','.join(settings.tasks)} selects no cell of suite "
                    f"{self.name!r}")
        return f"suite {self.name!r} has no cells with these settings"

    def left_out(self, settings: Settings) -> dict[str, str]:
        """Tasks that have no cells with these settings, and the data each needs."""
        return {}

    def header(self) -> list[str]:
        """Start-up lines, printed before the run's plan when the suite has cells in it."""
        return []

    def fallbacks(self, tasks: Collection[str]) -> Fallbacks:
        """What the cells of ``tasks`` read from the offline fixtures where the data directory
        lacks a folder (``Fallbacks``); the start-up lines say each one that is missing."""
        return ()

    def summarize(self, run_dir: Path, results: list[CellResult]) -> list[str]:
        """Write the suite's session reports from its cells' results (on the controller, once);
        returns lines for the terminal."""
        return []


@dataclass(frozen=True)
class MoreTasks:
    """Tasks a plugin adds to a suite that another plugin declares (a task of your own in the
    built-in ``recall`` suite): returned from ``pytest_lceval_suites`` beside suites."""

    suite: str
    tasks: tuple[Any, ...]


SUITES = pytest.StashKey[dict[str, Suite]]()


def suites_of(config: pytest.Config) -> dict[str, Suite]:
    """Every suite by name with the tasks plugins add to it, gathered once per session from
    ``pytest_lceval_suites`` (the answers are the session's own objects)."""
    if SUITES not in config.stash:
        answers = [list(group or ()) for group in config.hook.pytest_lceval_suites(config=config)]
        suites = by_name([[item for item in group if isinstance(item, Suite)]
                          for group in answers], "suite")
        for more in (item for group in answers for item in group if isinstance(item, MoreTasks)):
            if more.suite not in suites:
                raise pytest.UsageError(
                    f"pytest-lceval: tasks {', '.join(t.name for t in more.tasks)} are added to "
                    f"suite {more.suite!r}, which no plugin declares. Known: "
                    f"{', '.join(sorted(suites))}")
            suites[more.suite] = suites[more.suite].with_tasks(more.tasks)
        for suite in suites.values():
            if not suite.declares_metrics():
                suite.metric_for("")  # raises the UsageError that says how to declare it
        config.stash[SUITES] = suites
    return config.stash[SUITES]


def get_suite(config: pytest.Config, name: str) -> Suite:
    suites = suites_of(config)
    if name not in suites:
        close = difflib.get_close_matches(name, sorted(suites), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise pytest.UsageError(
            f"pytest-lceval: no suite named {name!r} is registered.{hint} Known: "
            f"{', '.join(sorted(suites))}. A suite of your own is registered by a "
            f"pytest_lceval_suites hook in a conftest.py or plugin")
    return suites[name]
