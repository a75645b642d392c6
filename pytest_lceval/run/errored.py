"""A cell whose test raised is a failed cell of the run, with its error as the reason.

pytest fails a test whose cell raised before its verdict was recorded (a served model answering
HTTP 500 past its retries, a store that cannot write, an I/O error on the results file), but the
cell left no line in ``results.jsonl``: the verdict counted the cells that had one, and a run
that pytest counted "7 failed, 2 passed" read "passed: pass rate 100% (2/2)" under a green
badge. The process that ran the test now makes the cell's row (outcome failed, no score, the
error's first line as its reason) and hands it to the controller on the test's report rather
than through the run folder, whose disk may be what failed; the controller adds the rows to the
run's results before the verdict, so every report counts and names them. A test that failed
after its cell passed (an assert of its own, an error in teardown) makes its row failed too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any

import pytest

from ..foundation.grid import Cell
from ..results import strict_json
from ..results.cells import CellResult
from ..settings import SETTINGS
from .evaluation import Evaluator, cell_result
from .suite import suites_of

ROW = "lceval_errored_row"
"""The report attribute that carries the row (xdist sends a report's attributes along)."""
OUTCOME = "lceval_outcome"
"""The test's property that tells the cell's outcome in the JUnit XML."""
ERRORED = pytest.StashKey["ErroredCells"]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo[None],
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and call.excinfo is not None:
        row = errored_row(item, call.when, call.excinfo)
        if row is not None:
            setattr(report, ROW, strict_json.dumps(row.to_json()))
            item.user_properties[:] = [(name, value) for name, value in item.user_properties
                                       if name != OUTCOME] + [(OUTCOME, "failed")]
    return report


def errored_row(item: pytest.Item, when: str,
                excinfo: pytest.ExceptionInfo[BaseException]) -> CellResult | None:
    """The failed row of ``item``'s cell, or None when the item measures no cell or its cell
    failed its verdict already (the row says why)."""
    callspec = getattr(item, "callspec", None)
    cell = callspec.params.get("lc_cell") if callspec is not None else None
    if not isinstance(cell, Cell):
        return None
    fixtures: dict[str, Any] = getattr(item, "funcargs", None) or {}
    recorded: list[CellResult] = getattr(fixtures.get("lc_eval"), "results", [])
    if any(result.outcome == "failed" for result in recorded):
        return None
    reason = f"errored{'' if when == 'call' else f' in {when}'}: {error_line(excinfo)}"
    if recorded:
        return dataclasses.replace(recorded[-1], outcome="failed", reason=reason)
    evaluator = fixtures.get("lc_evaluator")
    model = evaluator.model if isinstance(evaluator, Evaluator) else None
    row = cell_result(item.nodeid, cell, item.config.stash[SETTINGS], "",
                      model.fingerprint if model else "", model.context_window if model else 0)
    row.name_metric(suites_of(item.config)[cell.suite].metric_for(cell.task))
    row.outcome, row.reason = "failed", reason
    return row


def error_line(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """'StoreError: pytest-lceval store s.sqlite: disk I/O error': the type and the first line
    of its message."""
    lines = str(excinfo.value).strip().splitlines()
    return f"{excinfo.typename}: {lines[0]}" if lines else excinfo.typename


class ErroredCells:
    """The controller (or the single process): the rows that reports of failed tests carry."""

    def __init__(self) -> None:
        self.rows: dict[str, CellResult] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = getattr(report, ROW, None)
        if isinstance(row, str):  # the first error of a test is why it failed
            self.rows.setdefault(report.nodeid, CellResult.from_json(strict_json.loads(row)))


@pytest.hookimpl
def pytest_lceval_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        collector = config.stash[ERRORED] = ErroredCells()
        config.pluginmanager.register(collector, "lceval-errored-cells")


def with_errored(config: pytest.Config, results: list[CellResult]) -> list[CellResult]:
    """The run's results with each errored cell's row in place of the one its test wrote (or
    none), in test id order as ``read_results`` gives them."""
    collector = config.stash.get(ERRORED, None)
    by_node = {result.nodeid: result for result in results}
    by_node.update(collector.rows if collector is not None else {})
    return [by_node[nodeid] for nodeid in sorted(by_node)]
