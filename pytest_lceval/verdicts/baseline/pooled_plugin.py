"""The pytest side of the pooled comparison: its suite gates (``pooled.py``), the plan's line of
what each level can detect (``power.py``) and ``--lceval-require-power``, which makes a
comparison that cannot detect ``--lceval-min-drop`` a start-up error for release jobs."""

from __future__ import annotations

import pytest

from ...results.cells import CellResult, Judgement
from ...run.plan import PlannedCell
from ...settings import SETTINGS
from .criterion import OPTIONS
from .pooled import pooled_gates
from .power import power_lines, suite_power


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-require-power", dest="lceval_require_power",
                    action="store_true", default=False,
                    help="under --lceval-compare, stop before the first cell when a suite "
                         "cannot detect a drop of --lceval-min-drop at this run's samples "
                         "(exit 4; for release jobs)")


@pytest.hookimpl
def pytest_lceval_suite_verdict(config: pytest.Config, suite: str,
                                results: list[CellResult]) -> list[Judgement] | None:
    options = config.stash.get(OPTIONS, None)
    if options is None or options.compare is None or not results:
        return None
    return pooled_gates(options.compare, suite, results, config.stash[SETTINGS],
                        options.min_drop)


@pytest.hookimpl
def pytest_lceval_plan(config: pytest.Config, plan: dict[str, PlannedCell]) -> list[str] | None:
    options = config.stash.get(OPTIONS, None)
    if options is None or options.compare is None:
        return None
    lines, warnings = power_lines(suite_power(plan, options.compare), options.compare.name,
                                  options.min_drop)
    if warnings and config.getoption("lceval_require_power"):
        raise pytest.UsageError(f"pytest-lceval: --lceval-require-power: {'; '.join(warnings)}")
    return lines + [f"lceval: warning: {warning}" for warning in warnings]
