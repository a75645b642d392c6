"""The built-in suites of generation tasks, each declared by its benchmark package (benchmarks/);
Task Haystack registers its own (benchmarks/task_haystack/task_haystack_plugin.py)."""

from __future__ import annotations

import pytest

from .benchmarks.helmet.suites import helmet_suites
from .benchmarks.helmet.summ import WORDINGS
from .benchmarks.helmet.summ_plugin import summ_wording
from .benchmarks.longbench100.suite import longbench100_suite
from .benchmarks.ruler.common import HELMET_RULER
from .benchmarks.ruler.ruler_plugin import placement, ruler_code
from .benchmarks.ruler.suite import recall_suite
from .run.generation_suite import GenerationSuite
from .run.suite import Suite
from .tasks.base import GenerationTask


def builtin_suites(niah_placement: str = "depths", ruler: str = HELMET_RULER,
                   summ_prompts: str = WORDINGS[0]) -> list[GenerationSuite]:
    """New suite objects for one session, each declared by its benchmark package;
    ``niah_placement`` and ``ruler`` are RULER's options (benchmarks/ruler/ruler_plugin.py),
    ``summ_prompts`` HELMET's summarisation wording (benchmarks/helmet/summ_plugin.py)."""
    return [recall_suite(niah_placement, ruler), longbench100_suite(),
            *helmet_suites(summ_prompts)]


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
    return list(builtin_suites(placement(config), ruler_code(config), summ_wording(config)))
