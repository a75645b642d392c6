"""The comparison with a saved run decided per suite and per task, with cell rows as evidence.

A cell of 2 or 10 cases can detect no drop, or only a huge one (the exact tests need six cases
moving the same way), so a model that lost 15 points everywhere passed every cell. The paired
design holds over every cell of a task and of a suite: each case pairs with the baseline's case
of the same request hash, whatever its length and depth, so the pairs of all compared cells pool
into one paired test (the same McNemar / sign-flip test as a cell's, ``stats.paired_comparison``).

The family-wise error of the gate stays at alpha by a fixed sequence: the suite's pooled test is
tested first at alpha; only when it rejects are the suite's tasks tested, with Holm's correction
over the tasks at alpha. A level fails when its drop is significant (Holm-adjusted for tasks) and
at least ``--lceval-min-drop``. The price of the sequence: a task that lost while the suite's
other tasks gained as much (the suite's pooled mean unchanged) is shown in its row, but fails
nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ...results.cells import CellResult, Judgement
from ...settings import Settings
from ..stats import ALPHA, PairedComparison, holm, paired_comparison
from .criterion import cell_status, verdict
from .saved import SavedRun, pair_scores

SUITE_GATE = "baseline_suite"
TASK_GATE = "baseline_tasks"
COMPARED = frozenset({"regressed", "small-drop", "improved", "inconclusive", "unchanged"})
"""Cell statuses of the baseline criterion that paired the cell's cases (the others did not)."""
TASKS_NAMED = 4
"""Tasks the task gate's message names before "and N more"."""


@dataclass
class Pairs:
    """The paired cases of one level (a suite, or a task), pooled over its compared cells."""

    baseline: list[float]
    current: list[float]
    cells: int = 0

    def add(self, baseline: list[float], current: list[float]) -> None:
        self.baseline += baseline
        self.current += current
        self.cells += 1


def task_pairs(saved: SavedRun, results: list[CellResult], settings: Settings
               ) -> dict[str, Pairs]:
    """Each task's paired cases over the cells the baseline criterion compared (by task)."""
    by_task: dict[str, Pairs] = defaultdict(lambda: Pairs([], []))
    for result in results:
        if cell_status(result) not in COMPARED:
            continue
        base, current = pair_scores(saved, saved.cells[result.nodeid], result, settings)
        by_task[result.task].add(base, current)
    return dict(sorted(by_task.items()))


def pooled_gates(saved: SavedRun, suite: str, results: list[CellResult], settings: Settings,
                 min_drop: float, alpha: float = ALPHA) -> list[Judgement]:
    """The suite's gate, and with more than one task the gate over its tasks; none when no cell
    was compared (the coverage gate says so)."""
    tasks = task_pairs(saved, results, settings)
    return decide(saved.name, suite, tasks, min_drop, alpha) if tasks else []


def decide(name: str, suite: str, tasks: dict[str, Pairs], min_drop: float,
           alpha: float = ALPHA) -> list[Judgement]:
    """The gates on one suite's paired cases, by task (bench/bench_compare_power.py measures
    their error rates through this function)."""
    everything = Pairs([], [])
    for pairs in tasks.values():
        everything.baseline += pairs.baseline
        everything.current += pairs.current
        everything.cells += pairs.cells
    whole = paired_comparison(everything.baseline, everything.current, min_drop, alpha)
    gates = [Judgement(SUITE_GATE, not whole.regressed,
                       f"{suite} pooled over {everything.cells} compared cells: "
                       + _said(whole, name),
                       {"baseline": name, **_numbers(whole, everything.cells)},
                       rule=f"the suite's paired cases, pooled over its cells, did not drop "
                            f"significantly (alpha {alpha:g}) by at least {min_drop:g} "
                            f"(--lceval-compare, --lceval-min-drop)")]
    if len(tasks) > 1:
        gates.append(_task_gate(name, suite, tasks, whole, min_drop, alpha))
    return gates


def _task_gate(name: str, suite: str, tasks: dict[str, Pairs], whole: PairedComparison,
               min_drop: float, alpha: float) -> Judgement:
    """Holm over the suite's tasks, reached only when the suite's pooled test rejected."""
    compared = {task: paired_comparison(p.baseline, p.current, min_drop, alpha)
                for task, p in tasks.items()}
    adjusted = dict(zip(compared, holm([c.p_value for c in compared.values()]), strict=True))
    reached = whole.significant
    failed = [task for task, c in compared.items()
              if reached and adjusted[task] < alpha and -c.difference >= min_drop - 1e-12]
    properties: dict[str, Any] = {"baseline": name, "tested": reached, "tasks": {
        task: {**_numbers(c, tasks[task].cells), "p_holm": adjusted[task]}
        for task, c in compared.items()}}
    head = f"{suite} per task (Holm over {len(tasks)} tasks, alpha {alpha:g})"
    rule = (f"no task's pooled cases dropped significantly (Holm over the tasks, after the "
            f"suite's test rejected) by at least {min_drop:g} (--lceval-min-drop)")
    if not reached:
        return Judgement(TASK_GATE, True, f"{head}: not tested, the suite's pooled test found "
                         f"no significant change (tested first, so the error stays at alpha)",
                         properties, rule=rule)
    if not failed:
        worst = min(compared, key=lambda task: compared[task].difference)
        return Judgement(TASK_GATE, True, f"{head}: no task dropped significantly by at least "
                         f"--lceval-min-drop {min_drop:g}; the largest drop: {worst} "
                         f"{_change(compared[worst], adjusted[worst])}", properties, rule=rule)
    named = ", ".join(f"{task} {_change(compared[task], adjusted[task])}"
                      for task in failed[:TASKS_NAMED])
    more = f" and {len(failed) - TASKS_NAMED} more" if len(failed) > TASKS_NAMED else ""
    return Judgement(TASK_GATE, False, f"{head}: {len(failed)} regressed by at least "
                     f"--lceval-min-drop {min_drop:g}: {named}{more}", properties, rule=rule)


def _change(comparison: PairedComparison, adjusted: float) -> str:
    c = comparison
    return (f"{c.baseline:.3f} -> {c.current:.3f} ({c.difference:+.3f}, N={c.n}, "
            f"Holm p={adjusted:.3g})")


def _said(comparison: PairedComparison, name: str) -> str:
    """What the pooled test measured, and its verdict."""
    c = comparison
    level = round(100 * (1 - c.alpha))
    head = (f"{c.current:.3f} vs {c.baseline:.3f} in baseline {name!r}, difference "
            f"{c.difference:+.3f} ({level}% CI {c.ci_low:+.3f} to {c.ci_high:+.3f}), "
            f"{'exact McNemar' if c.test == 'mcnemar-exact' else 'sign-flip'} "
            f"p={c.p_value:.3g} ({c.worse} worse, {c.better} better), N={c.n}")
    detectable = "none" if math.isinf(c.mde) else f"{c.mde:.3f}"
    return verdict(c, head, f"{c.min_drop:g}", f"smallest detectable drop: {detectable}")


def _numbers(comparison: PairedComparison, cells: int) -> dict[str, Any]:
    """The level's numbers for JUnit and summary.json (strict JSON: no inf, no NaN)."""
    c = comparison
    return {"status": c.status, "test": c.test, "cells": cells, "n": c.n,
            "baseline_score": round(c.baseline, 6), "score": round(c.current, 6),
            "diff": round(c.difference, 6), "ci_low": _finite(c.ci_low),
            "ci_high": _finite(c.ci_high), "p": _finite(c.p_value, None),
            "mde": _finite(c.mde), "min_drop": c.min_drop}


def _finite(value: float, digits: int | None = 6) -> float | None:
    """None for NaN or inf (a single graded case has no interval; too few cases, no
    detectable drop)."""
    if not math.isfinite(value):
        return None
    return value if digits is None else round(value, digits)
