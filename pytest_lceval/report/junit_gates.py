"""The run's verdict in pytest's JUnit XML (``--junitxml``): each suite gate a test case of its
own (``lceval-gates.<suite>`` / ``<gate>``), failed when the gate failed, and an incomplete run
one failed test case ``lceval-run`` / ``complete``, so that a CI's test tab counts what failed
the run and never shows a gate-failed or interrupted run as all green.

The test cases go to pytest's own JUnit writer (its ``LogXML`` plugin) as test reports, before
it writes the file at session end; they do not pass through pytest's other hooks, so the
terminal's test counts stay the tests' own (the lceval verdict line says the rest).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
from _pytest.junitxml import xml_key

from ..verdicts.verdict import INCOMPLETE, GateResult, RunVerdict

RUN_TEST = "lceval-run::complete"


Outcome = Literal["passed", "failed", "skipped"]


def _reports(nodeid: str, outcome: Outcome, message: str,
             properties: list[tuple[str, object]]) -> list[pytest.TestReport]:
    """The call and teardown reports of one synthetic test case (JUnit writes a case from its
    call report, and closes it and writes its properties at teardown)."""
    path, _, name = nodeid.rpartition("::")
    location = (path, None, name)
    longrepr: Any = None
    if outcome == "failed":
        longrepr = message
    elif outcome == "skipped":
        longrepr = (path, 0, f"Skipped: {message}")
    return [pytest.TestReport(nodeid, location, {}, outcome, longrepr, "call",
                              user_properties=properties),
            pytest.TestReport(nodeid, location, {}, "passed", None, "teardown",
                              user_properties=properties)]


def gate_reports(gate: GateResult) -> list[pytest.TestReport]:
    """A gate's test case: passed or failed as the gate; a gate asked for but not applied that
    did not fail is skipped, with its message."""
    outcome: Outcome = "passed" if gate.passed else "failed"
    if gate.passed and not gate.judgement.applied:
        outcome = "skipped"
    properties: list[tuple[str, object]] = [("rule", gate.rule), ("status", gate.status),
                                            *gate.judgement.properties.items()]
    return _reports(gate.test_name, outcome, f"{gate.rule}: {gate.judgement.message}",
                    properties)


def verdict_reports(verdict: RunVerdict) -> list[pytest.TestReport]:
    reports = [report for gate in verdict.gates for report in gate_reports(gate)]
    if verdict.outcome == INCOMPLETE:
        reports += _reports(RUN_TEST, "failed", "; ".join(verdict.reasons()),
                            [("not_run", verdict.not_run), ("selected", verdict.selected)])
    return reports


@pytest.hookimpl
def pytest_lceval_verdict_reports(config: pytest.Config, run_dir: Path,
                                  verdict: RunVerdict) -> None:
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for report in verdict_reports(verdict):
        xml.pytest_runtest_logreport(report)
