"""The comparison with a saved run decided per suite and per task, with cell rows as evidence.

A cell of 2 or 10 cases can detect no drop, or only a huge one (the exact tests need six cases
moving the same way), so a model that lost 15 points everywhere passed every cell. The paired
design holds over every cell of a task and of a suite: each case pairs with the baseline's case
of the same request hash, whatever its length and depth, so the pairs of all compared cells pool
into one paired test (the same McNemar / sign-flip test as a cell's, ``stats.paired_comparison``).

The suite's pooled test and one test per task form one family, tested by Holm's weighted
procedure (``stats.holm``): the suite starts with half of alpha, the tasks share the other half
equally, and each level rejected hands its share on to the others. The family-wise error stays
at alpha, and a task is tested at alpha / (2 x tasks) or better whatever the suite's net change:
a task that collapsed while the others gained as much fails its gate although the suite's
pooled mean did not move. Once the suite's test rejects, the tasks are tested as plain Holm over
the tasks at alpha. A level fails when its drop is significant (Holm-adjusted) and at least
``--lceval-min-drop``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ...results.cells import CellResult, Judgement
from ...settings import Settings
from ..stats import ALPHA, PairedComparison, holm, paired_comparison
from ..verdict import GateResult
from .criterion import cell_status, verdict
from .saved import SavedRun, pair_scores

SUITE_GATE = "baseline_suite"
TASK_GATE = "baseline_tasks"
COMPARED = frozenset({"regressed", "small-drop", "improved", "inconclusive", "unchanged"})
"""Cell statuses of the baseline criterion that paired the cell's cases (the others did not)."""
TASKS_NAMED = 4
"""Tasks the task gate's message names before "and N more"."""
SUITE_SHARE = 0.5
"""The suite test's share of alpha before any level is rejected; the tasks share the rest."""


def levels_alpha(tasks: int, alpha: float = ALPHA) -> tuple[float, float]:
    """(the suite's, each task's) level before any rejection: what the plan's power is stated
    at. A suite of one task is its task: the suite is tested at alpha, and no task apart."""
    if tasks <= 1:
        return alpha, alpha
    return alpha * SUITE_SHARE, alpha * (1 - SUITE_SHARE) / tasks


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
    compared = {task: paired_comparison(p.baseline, p.current, min_drop, alpha)
                for task, p in tasks.items()} if len(tasks) > 1 else {}
    suite_alpha, task_alpha = levels_alpha(len(tasks), alpha)
    adjusted = holm([whole.p_value, *(c.p_value for c in compared.values())],
                    [suite_alpha, *(task_alpha for _ in compared)])
    tested = replace(whole, p_value=adjusted[0]) if compared else whole
    rule = (f"the suite's paired cases, pooled over its cells, did not drop significantly "
            f"({_family(len(compared), alpha)}) by at least {min_drop:g} (--lceval-compare, "
            f"--lceval-min-drop)")
    gates = [Judgement(SUITE_GATE, not tested.regressed,
                       f"{suite} pooled over {everything.cells} compared cells: "
                       + _said(whole, tested, name),
                       {"baseline": name, **_numbers(whole, everything.cells, tested)},
                       rule=rule)]
    if compared:
        gates.append(_task_gate(name, suite, tasks, {
            task: (c, replace(c, p_value=p)) for (task, c), p in zip(compared.items(),
                                                                     adjusted[1:], strict=True)},
            min_drop, alpha))
    return gates


def _family(tasks: int, alpha: float) -> str:
    """How the suite's levels share alpha, in words."""
    if not tasks:
        return f"alpha {alpha:g}"
    suite_alpha, task_alpha = levels_alpha(tasks, alpha)
    return (f"Holm over the suite and its {tasks} tasks at alpha {alpha:g}: the suite from "
            f"{suite_alpha:.2g}, each task from {task_alpha:.2g}")


def _task_gate(name: str, suite: str, tasks: dict[str, Pairs],
               compared: dict[str, tuple[PairedComparison, PairedComparison]],
               min_drop: float, alpha: float) -> Judgement:
    """The tasks of the suite, each at its Holm-adjusted p (``compared``: each task's own test
    and the same with its adjusted p), whatever the suite's own test found."""
    failed = [task for task, (_, tested) in compared.items() if tested.regressed]
    properties: dict[str, Any] = {"baseline": name, "regressed": failed, "tasks": {
        task: _numbers(c, tasks[task].cells, tested) for task, (c, tested) in compared.items()}}
    head = f"{suite} per task ({_family(len(tasks), alpha)})"
    rule = (f"no task's pooled cases dropped significantly ({_family(len(tasks), alpha)}) by "
            f"at least {min_drop:g} (--lceval-min-drop)")
    if not failed:
        worst = min(compared, key=lambda task: compared[task][0].difference)
        return Judgement(TASK_GATE, True, f"{head}: no task dropped significantly by at least "
                         f"--lceval-min-drop {min_drop:g}; the largest drop: {worst} "
                         f"{_change(*compared[worst])}", properties, rule=rule)
    named = ", ".join(f"{task} {_change(*compared[task])}" for task in failed[:TASKS_NAMED])
    more = f" and {len(failed) - TASKS_NAMED} more" if len(failed) > TASKS_NAMED else ""
    return Judgement(TASK_GATE, False, f"{head}: {len(failed)} regressed by at least "
                     f"--lceval-min-drop {min_drop:g}: {named}{more}", properties, rule=rule)


def regressions(gates: Iterable[GateResult]) -> dict[str, tuple[str, ...]]:
    """What the comparison's gates found regressed, by suite: the tasks its task gate failed,
    or () for a suite whose pooled drop failed its gate while no task's alone did."""
    found: dict[str, tuple[str, ...]] = {}
    for gate in gates:
        if gate.passed or gate.name not in (SUITE_GATE, TASK_GATE):
            continue
        tasks = tuple(gate.judgement.properties.get("regressed", ())) \
            if gate.name == TASK_GATE else ()
        found[gate.suite] = found.get(gate.suite, ()) + tasks
    return found


def _change(comparison: PairedComparison, tested: PairedComparison) -> str:
    c = comparison
    return (f"{c.baseline:.3f} -> {c.current:.3f} ({c.difference:+.3f}, N={c.n}, "
            f"p={_p(c.p_value)}, Holm p={_p(tested.p_value)})")


def _p(value: float) -> str:
    return "none" if math.isnan(value) else f"{value:.3g}"


def _said(comparison: PairedComparison, tested: PairedComparison, name: str) -> str:
    """What the pooled test measured, and its verdict at its Holm-adjusted p (``tested``)."""
    c = comparison
    level = round(100 * (1 - c.alpha))
    adjusted = "" if tested.p_value == c.p_value else f", Holm p={_p(tested.p_value)}"
    head = (f"{c.current:.3f} vs {c.baseline:.3f} in baseline {name!r}, difference "
            f"{c.difference:+.3f} ({level}% CI {c.ci_low:+.3f} to {c.ci_high:+.3f}), "
            f"{'exact McNemar' if c.test == 'mcnemar-exact' else 'sign-flip'} "
            f"p={c.p_value:.3g}{adjusted} ({c.worse} worse, {c.better} better), N={c.n}")
    detectable = "none" if math.isinf(c.mde) else f"{c.mde:.3f}"
    return verdict(tested, head, f"{c.min_drop:g}", f"smallest detectable drop: {detectable}")


def _numbers(comparison: PairedComparison, cells: int,
             tested: PairedComparison) -> dict[str, Any]:
    """The level's numbers for JUnit and summary.json (strict JSON: no inf, no NaN); its status
    at its Holm-adjusted p (``tested``)."""
    c = comparison
    return {"status": tested.status, "test": c.test, "cells": cells, "n": c.n,
            "baseline_score": round(c.baseline, 6), "score": round(c.current, 6),
            "diff": round(c.difference, 6), "ci_low": _finite(c.ci_low),
            "ci_high": _finite(c.ci_high), "p": _finite(c.p_value, None),
            "p_holm": _finite(tested.p_value, None), "mde": _finite(c.mde),
            "min_drop": c.min_drop}


def _finite(value: float, digits: int | None = 6) -> float | None:
    """None for NaN or inf (a single graded case has no interval; too few cases, no
    detectable drop)."""
    if not math.isfinite(value):
        return None
    return value if digits is None else round(value, digits)
