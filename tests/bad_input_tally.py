"""The bad-input sweep's count: every test marked ``bad_input(ID, ...)`` tries those inputs, and
the end of the run says how many inputs were tried and how they fared ("bad-input sweep: 121
inputs, 120 handled, 1 skipped").

A plugin of tests/conftest.py, as conformance_tally is: under pytest-xdist the counts reach the
controller in each test's user properties.
"""

from __future__ import annotations

import json

import pytest

MARK = "bad_input"
PROPERTY = "bad_inputs"


def pytest_itemcollected(item: pytest.Item) -> None:
    """At collection, so that a test skipped before its fixtures run still counts."""
    ids = [name for mark in item.iter_markers(MARK) for name in mark.args]
    if ids:
        item.user_properties.append((PROPERTY, json.dumps(ids)))


class Summary:
    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        """Each input's worst outcome: a test trying several inputs counts for each."""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name != PROPERTY:
                continue
            for input_id in json.loads(str(value)):
                if report.when == "call" or report.outcome != "passed":
                    was = self.outcomes.get(input_id, "passed")
                    self.outcomes[input_id] = report.outcome if was == "passed" else was

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.outcomes:
            return
        counts = {outcome: sum(1 for value in self.outcomes.values() if value == outcome)
                  for outcome in ("passed", "failed", "skipped")}
        handled = f"{counts['passed']} handled"
        rest = "".join(f", {count} {outcome}" for outcome, count in counts.items()
                       if count and outcome != "passed")
        terminalreporter.write_line(
            f"bad-input sweep: {len(self.outcomes)} inputs, {handled}{rest}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARK}(*ids): the test tries these bad inputs (counted at the end)")
    config.pluginmanager.register(Summary(), "bad-input-tally")
