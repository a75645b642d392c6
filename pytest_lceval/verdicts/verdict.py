"""The run's one verdict, decided once after the last cell: every output reads it.

The exit status, the terminal's last lceval line, the badges, ``summary.md``/``summary.json``,
the HTML report's Gates section, the suite gates' JUnit test cases and ``reports/latest`` each
used to judge the run for themselves, and told different stories in one run (a failed suite gate
under a green badge, an interrupted run reported as passed). Now they only render this object.

A run is one of three outcomes:

- ``passed``: every selected cell ran, none failed, every suite gate passed;
- ``failed``: a cell or a suite gate failed (``reasons`` says which); a cell whose test raised
  before it was judged (a server's HTTP 500, a store that cannot write) is a failed cell
  (``run/errored.py``), never one left out;
- ``incomplete``: the run stopped before its end (Ctrl-C, SIGTERM, ``-x``, a lost xdist worker)
  and selected cells never ran, or a signal came before the verdict was decided (Ctrl-C while
  the reports were written). Never green, whatever the cells that did run say: a verdict on
  part of the grid is not a verdict on the grid. It exits 2 whatever pytest's own status
  (``-x`` ends pytest's run with 1).

Suite gates come from one list: every ``pytest_lceval_suite_verdict`` hook's judgements, for
every suite the session knows (those without cells too, so that a gate asked for a suite that
had none can say it was not applied). A new gate is one more judgement in that list.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import pytest

from ..results.cells import CellResult, Judgement

PASSED = "passed"
FAILED = "failed"
INCOMPLETE = "incomplete"
EXIT_STATUS = {PASSED: pytest.ExitCode.OK, FAILED: pytest.ExitCode.TESTS_FAILED,
               INCOMPLETE: pytest.ExitCode.INTERRUPTED}
LOST_SHOWN = 3
"""Lost tests the reasons name before 'and N more'."""


@dataclass(frozen=True)
class GateResult:
    """One suite gate's judgement of one suite."""

    suite: str
    judgement: Judgement

    @property
    def name(self) -> str:
        return self.judgement.criterion

    @property
    def passed(self) -> bool:
        return self.judgement.passed

    @property
    def status(self) -> str:
        """'passed', 'FAILED', 'not applied' or 'not applied, FAILED' (the option named a
        suite that had no cells)."""
        status = PASSED if self.passed else "FAILED"
        if not self.judgement.applied:
            return "not applied" + ("" if self.passed else ", FAILED")
        return status

    @property
    def rule(self) -> str:
        return self.judgement.rule or self.name

    @property
    def test_name(self) -> str:
        """The gate's JUnit test case: 'lceval-gates/<suite>::<gate>'."""
        return f"lceval-gates/{self.suite}::{self.name}"


@dataclass(frozen=True)
class RunVerdict:
    """What the run came to; built by :func:`decide`."""

    passed: int
    """Cells that passed."""
    failed: int
    """Cells that failed."""
    skipped: int
    """Cells skipped (measured or not): neither passed nor failed."""
    gates: tuple[GateResult, ...]
    """Every suite gate, suite by suite, in the order of the one list they come from."""
    selected: int = 0
    """Cells (tests) selected for this run; 0 when not known."""
    not_run: int = 0
    """Selected cells that never finished: the run stopped before them."""
    stopped: str = ""
    """Why the run stopped early ('interrupted: SIGTERM', pytest's 'stopping after 1
    failures'); '' when it ran to its end."""
    signalled: bool = False
    """A signal (Ctrl-C, SIGTERM) reached the run before its verdict was decided: while its
    cells ran, or while its reports were written."""
    lost: tuple[str, ...] = ()
    """Tests whose xdist worker crashed while running them (they are among ``not_run``)."""

    @property
    def judged(self) -> int:
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float:
        """Share of judged cells that passed; NaN when none was judged."""
        return self.passed / self.judged if self.judged else math.nan

    @property
    def failed_gates(self) -> list[GateResult]:
        return [gate for gate in self.gates if not gate.passed]

    @property
    def not_applied(self) -> list[GateResult]:
        return [gate for gate in self.gates if not gate.judgement.applied]

    @property
    def outcome(self) -> str:
        if self.not_run or self.signalled or (self.stopped and not self.selected):
            return INCOMPLETE
        if self.failed or self.failed_gates:
            return FAILED
        return PASSED

    @property
    def ok(self) -> bool:
        return self.outcome == PASSED

    def gates_of(self, suite: str) -> list[GateResult]:
        return [gate for gate in self.gates if gate.suite == suite]

    def reasons(self) -> list[str]:
        """Why the run is not green, the most basic first: cells that never ran, failed cells,
        then each failed gate by name and suite."""
        reasons = []
        if self.outcome == INCOMPLETE:
            notes = [self.stopped] if self.stopped else []
            if self.lost:
                more = len(self.lost) - LOST_SHOWN
                notes.append("lost with a crashed worker: " + ", ".join(self.lost[:LOST_SHOWN])
                             + (f" and {more} more" if more > 0 else ""))
            why = f" ({'; '.join(notes)})" if notes else ""
            reasons.append(f"incomplete, {self.not_run} of {self.selected} selected tests not "
                           f"run{why}" if self.not_run else f"incomplete{why}")
        if self.failed:
            reasons.append(f"{self.failed} of {self.judged} cells failed")
        failed = self.failed_gates
        if failed:
            reasons.append(f"{len(failed)} suite {'gate' if len(failed) == 1 else 'gates'} "
                           f"failed: " + ", ".join(f"{gate.name} ({gate.suite})"
                                                   for gate in failed))
        return reasons

    def exit_status(self, current: int | pytest.ExitCode) -> int | pytest.ExitCode:
        """pytest's exit status, made to agree: failed exits at least 1, incomplete at least 2
        (pytest's own for an interruption), whatever pytest said: ``-x`` and a lost worker end
        pytest's run with 1. A higher status of pytest's own (an internal or usage error)
        stands."""
        own = EXIT_STATUS[self.outcome]
        return current if int(current) >= int(own) else own


def decide(results: list[CellResult], gates: list[GateResult], selected: int = 0,
           not_run: int = 0, stopped: str = "", signalled: bool = False,
           lost: tuple[str, ...] = ()) -> RunVerdict:
    """The verdict from the cells' outcomes, the suite gates and how far the run got."""
    counts = Counter(r.outcome for r in results)
    return RunVerdict(counts[PASSED], counts[FAILED], counts["skipped"], tuple(gates),
                      selected, not_run, stopped, signalled, lost)


def suite_gates(config: pytest.Config, suites: list[str],
                results: list[CellResult]) -> list[GateResult]:
    """The one list of suite gates: each hook's judgements for each suite (``results`` empty
    for a suite without cells in this run), sorted by suite then gate."""
    gates = []
    for suite in sorted(suites):
        mine = [r for r in results if r.suite == suite]
        found = config.hook.pytest_lceval_suite_verdict(config=config, suite=suite,
                                                        results=mine)
        judgements = sorted((j for group in found for j in (group or ())),
                            key=lambda j: j.criterion)
        gates += [GateResult(suite, judgement) for judgement in judgements]
    return gates


RUN_VERDICT = pytest.StashKey[RunVerdict]()
"""The run's verdict (controller only, set at session finish)."""
