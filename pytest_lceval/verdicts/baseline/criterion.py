"""The comparison with a saved run, cell by cell: the baseline criterion (its paired test of a
cell's cases, recorded as evidence), the words and properties of its judgement, the status it
leaves on a cell (which the coverage and pooled gates read), and the options it runs under
(resolved by ``baseline_plugin.py``, read by the gates and the effective-length rows)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ...foundation.criterion import Assessment, Evidence, Need
from ...results.cells import CellResult, Judgement
from ...settings import Settings
from ..stats import PairedComparison, fewest_decisive, paired_comparison
from .saved import CasesDiffer, SavedCell, SavedRun, pair_scores

DEFAULT_MIN_DROP = 0.05
DEFAULT_MIN_COVERAGE = 1.0
"""Every measured cell must be in the baseline: a comparison that compares less fails."""
CRITERION = "baseline"


@dataclass(frozen=True)
class BaselineOptions:
    save: Path | None
    compare: SavedRun | None
    min_drop: float
    any_judge: bool = False
    """--lceval-compare-any-judge: pair judged cells even when another judge scored them."""
    min_coverage: float = DEFAULT_MIN_COVERAGE
    """--lceval-compare-min-coverage: the share of a suite's measured cells the baseline must
    hold, or the suite gate fails."""


OPTIONS = pytest.StashKey[BaselineOptions]()


# -- the verdict ----------------------------------------------------------------------------


def describe(comparison: PairedComparison, name: str) -> str:
    """The judgement message: what was measured, and why it passed or failed."""
    c = comparison
    level = round(100 * (1 - c.alpha))
    if c.test == "mcnemar-exact":
        evidence = (f"exact McNemar p={c.p_value:.3g} on {c.worse + c.better} discordant cases "
                    f"({c.worse} worse, {c.better} better)")
    else:
        evidence = f"sign-flip test p={c.p_value:.3g} ({c.worse} worse, {c.better} better)"
    head = (f"vs baseline {name!r}: {c.current:.3f} vs {c.baseline:.3f}, difference "
            f"{c.difference:+.3f} ({level}% CI {c.ci_low:+.3f} to {c.ci_high:+.3f}), {evidence}, "
            f"N={c.n}")
    return verdict(c, head, f"{c.min_drop:.3f}", detectable(c))


def verdict(comparison: PairedComparison, head: str, min_drop: str, otherwise: str) -> str:
    """``head`` and what it concludes: a significant drop of at least ``--lceval-min-drop``
    (written ``min_drop``), a significant but smaller one, or its status and ``otherwise``."""
    if comparison.regressed:
        return f"{head}: significant drop of at least --lceval-min-drop {min_drop}"
    if comparison.status == "small-drop":
        return f"{head}: significant but smaller than --lceval-min-drop {min_drop}"
    return f"{head}: {comparison.status} ({otherwise})"


def detectable(comparison: PairedComparison) -> str:
    """The minimum detectable drop in words; when it is infinite, why."""
    c = comparison
    if math.isinf(c.mde):
        return (f"no drop is detectable at N={c.n}: the exact test needs at least "
                f"{fewest_decisive(c.alpha)} cases moving the same way")
    return f"smallest detectable drop {c.mde:.3f} at this N"


def properties(comparison: PairedComparison, name: str, saved: SavedCell) -> dict[str, Any]:
    """What reaches JUnit XML and the reports; prefixed so it never clashes with a metric.
    An infinite detectable drop is written with its reason (strict JSON has no infinity)."""
    c = comparison
    found = {
        "baseline": name, "baseline_status": c.status, "baseline_test": c.test,
        "baseline_score": round(c.baseline, 6), "baseline_diff": round(c.difference, 6),
        "baseline_ci_low": round(c.ci_low, 6), "baseline_ci_high": round(c.ci_high, 6),
        "baseline_p": c.p_value, "baseline_mde": round(c.mde, 6), "baseline_n": c.n,
        "baseline_worse": c.worse, "baseline_better": c.better,
        "baseline_min_drop": c.min_drop, "baseline_outcome": saved.outcome,
    }
    if math.isinf(c.mde):
        found["baseline_mde_why"] = "infinite: " + detectable(c)
    return found


class BaselineCriterion:
    """Compares each measured cell with the saved run (active only with --lceval-compare): the
    cell's paired test is recorded as evidence and never fails the cell (the suite and task
    gates over the pooled cases decide, ``pooled.py``); a cell that cannot be compared (other
    prompts, another judge) fails."""

    name = CRITERION

    def __init__(self, saved: SavedRun, min_drop: float, settings: Settings,
                 any_judge: bool = False) -> None:
        self.saved = saved
        self.min_drop = min_drop
        self.settings = settings
        self.any_judge = any_judge

    def needs(self, result: CellResult) -> Sequence[Need]:
        return ()

    def judge(self, result: CellResult, evidence: Evidence) -> Assessment | None:
        judgement = self._judgement(result)
        return None if judgement is None else Assessment(judgement)

    def _judgement(self, result: CellResult) -> Judgement | None:
        if not result.scores:
            return None
        name = self.saved.name
        cell = self.saved.cells.get(result.nodeid)
        if cell is None or not cell.scores or not result.case_keys:
            why = "the baseline has no scores for this cell" if result.case_keys else \
                "this cell records no case keys"
            return Judgement(CRITERION, True, f"not compared with baseline {name!r}: {why}",
                             {"baseline": name, "baseline_status": "not-compared"})
        if cell.judge != result.judge and not self.any_judge:
            return Judgement(CRITERION, False, (
                f"cannot compare with baseline {name!r}: its cell was judged by "
                f"{cell.judge or 'no judge'} and this one by {result.judge or 'no judge'}; "
                f"scores of different judges do not pair. Rerun with the baseline's judge, or "
                f"pass --lceval-compare-any-judge to compare anyway"),
                {"baseline": name, "baseline_status": "other-judge"})
        try:
            base, current = pair_scores(self.saved, cell, result, self.settings)
        except CasesDiffer as exc:
            return Judgement(CRITERION, False, str(exc),
                             {"baseline": name, "baseline_status": "unpaired"})
        comparison = paired_comparison(base, current, self.min_drop)
        message = describe(comparison, name)
        if comparison.n < len(result.scores):
            message += (f" (paired {comparison.n} of this cell's {len(result.scores)} cases; "
                        f"the others are not in the baseline)")
        # Evidence, not the verdict: each cell tests its own cases at alpha, so failing every
        # cell that regressed would fail an unchanged model's run of 48 cells of 50 sampled
        # cases half of the time; the pooled suite and task gates decide (pooled.py).
        return Judgement(CRITERION, True, message, properties(comparison, name, cell))


def cell_status(result: CellResult) -> str | None:
    """The cell's baseline status; None when the criterion did not judge it."""
    for judgement in result.judgements:
        if judgement.criterion == CRITERION:
            return str(judgement.properties.get("baseline_status", ""))
    return None
