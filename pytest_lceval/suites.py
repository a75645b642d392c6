"""Which cells a suite has: the default grid is task x length x depth over generation tasks."""

from __future__ import annotations

import pytest

from .grid import Cell
from .settings import Settings
from .tasks.base import tasks_of_suite


def grid_for_suite(config: pytest.Config, suite: str, settings: Settings) -> list[Cell]:
    """Suites with their own axes answer pytest_lceval_grid; the rest use task x length x depth."""
    custom = config.hook.pytest_lceval_grid(suite=suite, settings=settings)
    if custom is not None:
        return list(custom)
    tasks = tasks_of_suite(suite)
    if not tasks:
        raise pytest.UsageError(f"pytest-lceval: suite {suite!r} has no registered tasks")
    if settings.tasks:
        tasks = [task for task in tasks if task.name in settings.tasks]
    return [
        Cell(suite, task.name, length, depth, settings.samples)
        for task in tasks
        for length in settings.lengths
        for depth in (settings.depths if task.uses_depth else (None,))
    ]
