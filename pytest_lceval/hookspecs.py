"""Hooks through which suites add verdicts and session-end reports without touching the core."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .evaluation import Evaluator
    from .grid import Cell
    from .results import CellResult, Judgement
    from .settings import Settings


@pytest.hookspec
def pytest_lceval_judge(result: CellResult, evaluator: Evaluator) -> Judgement | None:
    """Judge a measured cell; return None when the criterion does not apply to it.

    Every returned judgement is recorded; the cell fails if any judgement fails.
    """


@pytest.hookspec(firstresult=True)
def pytest_lceval_grid(suite: str, settings: Settings) -> list[Cell] | None:
    """The cells of a suite with its own axes (e.g. Task Haystack); None for the default grid."""


@pytest.hookspec
def pytest_lceval_session_finish(config: pytest.Config, run_dir: Path,
                                 results: list[CellResult]) -> None:
    """Write session-end reports. Called once, on the controller, after results are merged."""


@pytest.hookspec
def pytest_lceval_task_names(config: pytest.Config) -> list[str] | None:
    """Task names a suite plugin knows beyond the registered generation tasks (Task Haystack's
    task sets), so that --lceval-tasks and per-task thresholds are checked against every suite."""
