"""The effective lengths a run's reports show (summary.md, the HTML report), with the
baseline's beside them, and the options they and the gate are computed under (resolved by
``effective_plugin.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ...results.cells import CellResult
from ..baseline.criterion import OPTIONS as BASELINE
from ..baseline.saved import SavedRun
from .length import Curve, EffectiveRow, Scored, changes, curves, report_rows


@dataclass(frozen=True)
class EffectiveOptions:
    threshold: float
    gate: str
    """'off', 'suite' (fail a suite whose effective length fell) or 'task' (also any task's)."""


OPTIONS = pytest.StashKey[EffectiveOptions]()


def scored(results: list[CellResult]) -> list[Scored]:
    """The run's cells with scores, as effective length reads them."""
    return [Scored(r.suite, r.task, r.length, tuple(r.scores)) for r in results
            if r.outcome != "skipped"]


def baseline_of(config: pytest.Config) -> SavedRun | None:
    """The saved run this run compares with (``--lceval-compare``); None without one."""
    options = config.stash.get(BASELINE, None)
    return None if options is None else options.compare


def baseline_curves(saved: SavedRun, threshold: float) -> list[Curve]:
    return curves([Scored(c.suite, c.task, c.length, c.scores) for c in saved.cells.values()
                   if c.outcome != "skipped"], threshold)


def effective_rows(config: pytest.Config, results: list[CellResult]) -> list[EffectiveRow]:
    """The run's effective lengths, per suite then its tasks, with the baseline's when the run
    compares with one; [] before the plugin is configured."""
    options = config.stash.get(OPTIONS, None)
    if options is None:
        return []
    now = curves(scored(results), options.threshold)
    saved = baseline_of(config)
    moved = changes(now, baseline_curves(saved, options.threshold)) if saved else {}
    window = max((r.context_window for r in results), default=0)
    return report_rows(now, window, moved, saved.name if saved else "")
