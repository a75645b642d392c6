"""What a reader should look at first in a suite, and why cells were skipped.

A new user opening a report of hundreds of cells needs two answers before any figure: which
cells are worst, and which cells did not run and why. Both are computed here from the results
alone (no files), so the HTML report and its tests agree on them. Cells are named by their
test parameter id ('json_kv-8k-50'): what pytest prints and ``-k`` selects.

"Worst" follows each suite's own verdict, which the plugin that gives it reads
(``pytest_lceval_finding``: Task Haystack's t-test, LongScore's drops), on one scale of kinds
(lower is worse): 0 regressed against the saved run, 1 not comparable with it, 2 a FAIL of a
suite's own test, 3 a failed cell with a verdict of its own, 4 a failed cell (one that measured
nothing first: its test raised, or its suite refused it), 5 a drop in a cell that passed, 6 the
lowest scores, 7 a PASS of a suite's own test. A failure the saved run had too ranks after the
new ones of its kind.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ..results.cells import CellResult
from .finding import BASELINE, FAILING_STATUSES, Finding, OwnFinding, cell_label, percent

LOOK_FIRST = 3
"""Cells named in a suite's 'look first' line."""
SKIP_EXAMPLES = 6
"""Cells listed per skip reason; the rest are counted."""


def judge_cell(result: CellResult, verdicts: Sequence[OwnFinding] = ()) -> Finding | None:
    """The cell's finding by its suite's own verdict; None when nothing was measured."""
    compared = _comparison(result)
    if compared is not None:
        return compared
    finding = _own_verdict(result, verdicts)
    if finding is None or not _failed_before(result):
        return finding
    kind, _, value = finding.rank
    return Finding(result, finding.why + ", also failed in the baseline", finding.bad,
                   (kind, 1, value))


def _comparison(result: CellResult) -> Finding | None:
    """A regression against the saved run, or a cell that could not be compared with it."""
    found = [j for j in result.judgements if j.criterion == BASELINE]
    if not found or found[0].properties.get("baseline_status") not in FAILING_STATUSES:
        return None
    p = found[0].properties
    name = p.get("baseline", "the baseline")
    if p["baseline_status"] != "regressed":
        return Finding(result, f"could not be compared with {name}", True, (1, 0, 0.0))
    diff = float(p["baseline_diff"])
    return Finding(result, f"regressed against {name}: {percent(p['baseline_score'])} → "
                           f"{percent(float(p['baseline_score']) + diff)}, Δ {100 * diff:+.1f} "
                           f"points, p {_p(p.get('baseline_p'))}", True, (0, 0, diff))


def _failed_before(result: CellResult) -> bool:
    return result.outcome == "failed" and any(
        j.criterion == BASELINE and j.properties.get("baseline_outcome") == "failed"
        for j in result.judgements)


def _own_verdict(result: CellResult, verdicts: Sequence[OwnFinding]) -> Finding | None:
    for verdict in verdicts:
        finding = verdict(result)
        if finding is not None:
            return finding
    failed = result.outcome == "failed"
    if math.isnan(result.score):  # a failed cell that measured nothing (its test raised) is
        return Finding(result, "not measured", True, (4, 0, -math.inf)) if failed else None
    return Finding(result, ("FAIL, " if failed else "") + f"score {percent(result.score)}", failed,
                   (4 if failed else 6, 0, result.score))


def worst_cells(results: list[CellResult], verdicts: Sequence[OwnFinding] = ()
                ) -> list[Finding]:
    """Every measured or failed cell, worst first (see the module docstring)."""
    found = [f for r in results
             if r.outcome != "skipped" and (f := judge_cell(r, verdicts)) is not None]
    return sorted(found, key=lambda f: (f.rank, f.result.nodeid))


def look_first(results: list[CellResult], limit: int = LOOK_FIRST,
               verdicts: Sequence[OwnFinding] = ()) -> str:
    """One line naming the worst cells of a suite; says so when nothing failed or dropped.
    ``verdicts``: the plugins' readings of their own verdicts (``pytest_lceval_finding``)."""
    worst = worst_cells(results, verdicts)
    if not worst:
        skipped = sum(r.outcome == "skipped" for r in results)
        return f"Look first at the skip reasons: no cell was measured ({skipped} skipped)."
    bad = [f for f in worst if f.bad]
    shown = (bad or worst)[:limit]
    names = "; ".join(f"{cell_label(f.result.nodeid)} ({f.why})" for f in shown)
    if not bad:
        return f"Nothing failed or dropped; lowest: {names}."
    more = len(bad) - len(shown)
    return f"Look first at: {names}" + (f"; and {more} more." if more else ".")


@dataclass(frozen=True)
class SkipGroup:
    reason: str
    cells: list[str]


def skip_reasons(results: list[CellResult]) -> list[SkipGroup]:
    """Skipped cells grouped by their reason, the most common reason first."""
    groups: dict[str, list[str]] = defaultdict(list)
    for result in results:
        if result.outcome == "skipped":
            groups[result.reason or "(no reason recorded)"].append(cell_label(result.nodeid))
    return [SkipGroup(reason, cells)
            for reason, cells in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


def _p(value: object) -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3g}"
