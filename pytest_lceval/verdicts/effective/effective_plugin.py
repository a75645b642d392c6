"""pytest wiring of the effective context length: its options and its gate (the rows the reports
show are ``rows.py``)."""

from __future__ import annotations

import pytest

from ...results.cells import CellResult, Judgement
from ...settings import bounded, option_value
from .length import DEFAULT_THRESHOLD, SUITE_ROW, changes, curves
from .rows import OPTIONS, EffectiveOptions, baseline_curves, baseline_of, scored

GATE = "effective_length"
GATE_CHOICES = ("off", "suite", "task")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-effective-threshold", dest="lceval_effective_threshold",
                    default=None, metavar="SCORE",
                    help=f"score 0..1 a length must reach to count in the effective context "
                         f"length (default {DEFAULT_THRESHOLD}: the reference's, Llama-2-7B's "
                         f"score at 4k)")
    group.addoption("--lceval-effective-gate", dest="lceval_effective_gate", default=None,
                    choices=GATE_CHOICES,
                    help="with --lceval-compare, fail the run when a suite's effective context "
                         "length fell below the baseline's (suite), or a suite's or any task's "
                         "(task); default off")
    parser.addini("lceval_effective_threshold", "default --lceval-effective-threshold",
                  type="string")
    parser.addini("lceval_effective_gate", "default --lceval-effective-gate", type="string")


def _gate(text: object) -> str:
    if str(text) not in GATE_CHOICES:
        raise ValueError(f"choose one of {', '.join(GATE_CHOICES)}")
    return str(text)


@pytest.hookimpl
def pytest_lceval_configure(config: pytest.Config) -> None:
    options = EffectiveOptions(
        option_value(config, "lceval_effective_threshold",
                     lambda v: bounded(float, v, 0.0, 1.0), DEFAULT_THRESHOLD,
                     "Give a score 0..1 such as --lceval-effective-threshold 0.856."),
        option_value(config, "lceval_effective_gate", _gate, "off",
                     "Use off, suite or task."))
    if options.gate != "off" and config.getoption("lceval_compare") is None:
        raise pytest.UsageError(
            f"pytest-lceval: --lceval-effective-gate {options.gate} compares the effective "
            f"context length with a saved run: give --lceval-compare NAME (saved with "
            f"--lceval-save NAME), or leave the gate off")
    config.stash[OPTIONS] = options


@pytest.hookimpl
def pytest_lceval_suite_verdict(config: pytest.Config, suite: str,
                                results: list[CellResult]) -> list[Judgement] | None:
    """--lceval-effective-gate: the suite fails when its effective length (or, for 'task', any
    of its tasks') fell below the baseline's on the lengths both runs measured."""
    options = config.stash.get(OPTIONS, None)
    saved = baseline_of(config)
    if options is None or options.gate == "off" or saved is None:
        return None
    tasks = " and of each task" if options.gate == "task" else ""
    rule = (f"the effective context length of the suite{tasks} does not fall below "
            f"baseline {saved.name!r}'s (--lceval-effective-gate {options.gate})")
    now = curves(scored(results), options.threshold)
    if not now:  # no cell of the suite in this run, or none with a token length (a stream suite)
        return [Judgement(GATE, True, (
            f"{suite}: not applied: no judged cell of the suite has a token length"),
            {"effective_status": "not-applied"}, rule=rule, applied=False)] if results else None
    moved = changes(now, baseline_curves(saved, options.threshold))
    watched = [c for c in now if c.task == SUITE_ROW or options.gate == "task"]
    compared = [moved[(c.suite, c.task)] for c in watched if (c.suite, c.task) in moved]
    if not compared:
        return [Judgement(GATE, False, (
            f"{suite}: cannot compare the effective context length with baseline "
            f"{saved.name!r}: it has no scored cells of this suite at this run's lengths"),
            {"effective_status": "not-compared"}, rule=rule)]
    fell = [change for change in compared if change.status == "fell"]
    suite_change = moved.get((suite, SUITE_ROW))
    properties = {"effective_status": "fell" if fell else "held",
                  "effective_length": suite_change.now.text if suite_change else None,
                  "effective_baseline": suite_change.before.text if suite_change else None,
                  "effective_threshold": options.threshold}
    if fell:
        message = "; ".join(change.describe(saved.name) for change in fell)
    else:
        held = suite_change or compared[0]
        message = (f"{held.describe(saved.name)}; {len(compared)} effective "
                   f"{'length' if len(compared) == 1 else 'lengths'} compared, none fell")
    return [Judgement(GATE, not fell, message, properties, rule=rule)]
