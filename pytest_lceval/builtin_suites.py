"""The built-in suites of generation tasks, each declared by its benchmark package (benchmarks/);
Task Haystack registers its own (benchmarks/task_haystack/task_haystack_plugin.py)."""

from __future__ import annotations

import pytest

from .benchmarks.helmet.suites import helmet_suites
from .benchmarks.longbench100.suite import longbench100_suite
from .benchmarks.ruler.suite import recall_suite
from .run.generation_suite import GenerationSuite
from .run.suite import Suite
from .tasks.base import GenerationTask


def builtin_suites(config: pytest.Config | None = None) -> list[GenerationSuite]:
    """New suite objects for one session, each declared by its benchmark package, which reads
    its own options from ``config`` (None: their defaults, for tests and benchmarks)."""
    return [recall_suite(config), longbench100_suite(), *helmet_suites(config)]


def builtin_task(name: str) -> GenerationTask:
    """A built-in task by name, for tests and benchmarks that build cases without a session."""
    for suite in builtin_suites():
        if name in suite.tasks:
            return suite.tasks[name]
    raise KeyError(f"no built-in task named {name!r}")


def builtin_tasks(suite: str) -> list[GenerationTask]:
    """The tasks of a built-in suite, for tests and benchmarks."""
    by_name = {s.name: s for s in builtin_suites()}
    return list(by_name[suite].tasks.values())


@pytest.hookimpl
def pytest_lceval_suites(config: pytest.Config) -> list[Suite]:
    return list(builtin_suites(config))
