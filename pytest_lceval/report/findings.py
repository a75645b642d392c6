"""What a reader should look at first in a suite, and why cells were skipped.

A new user opening a report of hundreds of cells needs two answers before any figure: which
cells are worst, and which cells did not run and why. Both are computed here from the results
alone (no files), so the HTML report and its tests agree on them. Cells are named by their
test parameter id ('json_kv-8k-50'): what pytest prints and ``-k`` selects.

"Worst" follows each suite's own verdict: Task Haystack FAILs (the most negative t first), then
failed cells (the biggest LongScore drop, else the lowest score, first), then LongScore drops
of cells that passed, then the lowest scores. In a run compared with a saved one, the cells
that regressed against it come before all of these (the biggest drop first), then the cells
that could not be compared, and a failure the saved run had too ranks after the new ones.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from ..haystack.metrics import HaystackMetrics
from ..haystack.verdict import FAIL
from ..results import CellResult
from .summary import BASELINE, FAILING_STATUSES, cell_label

LOOK_FIRST = 3
"""Cells named in a suite's 'look first' line."""
SKIP_EXAMPLES = 6
"""Cells listed per skip reason; the rest are counted."""


@dataclass(frozen=True)
class Finding:
    """One cell with the number that makes it bad (or least good)."""

    result: CellResult
    why: str
    bad: bool
    """A regression, a FAIL, a failed cell or a LongScore drop: worth a look even when others
    are lower."""
    rank: tuple[int, int, float]
    """Sort key: the kind of problem (lower is worse), 1 for a failure the saved run had too,
    then its number (lower is worse)."""


def judge_cell(result: CellResult) -> Finding | None:
    """The cell's finding by its suite's own verdict; None when nothing was measured."""
    compared = _comparison(result)
    if compared is not None:
        return compared
    finding = _own_verdict(result)
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
    return Finding(result, f"regressed against {name}: {_pct(p['baseline_score'])} → "
                           f"{_pct(float(p['baseline_score']) + diff)}, Δ {100 * diff:+.1f} "
                           f"points, p {_p(p.get('baseline_p'))}", True, (0, 0, diff))


def _failed_before(result: CellResult) -> bool:
    return result.outcome == "failed" and any(
        j.criterion == BASELINE and j.properties.get("baseline_outcome") == "failed"
        for j in result.judgements)


def _own_verdict(result: CellResult) -> Finding | None:
    failed = result.outcome == "failed"
    haystack = HaystackMetrics.of(result)
    if haystack is not None:  # Task Haystack: the paired t-test decides
        fail = haystack.verdict == FAIL
        t = math.inf if math.isnan(haystack.t) else haystack.t  # an undefined t ranks last
        return Finding(result, f"{haystack.verdict}, stream index {haystack.stream_index}, "
                               f"L-acc {_pct(haystack.l_acc)} vs S-acc {_pct(haystack.s_acc)}, "
                               f"t {_fixed(haystack.t, 2)}", fail, (2 if fail else 7, 0, t))
    if math.isnan(result.score):
        return None
    lc = result.metrics.get("longscore")
    if result.metrics.get("longscore_role") == "long" and lc is not None and lc < 0:
        return Finding(result, ("FAIL, " if failed else "") + f"LongScore {lc:+.1f}%, score "
                               f"{_pct(result.score)}", True, (3 if failed else 5, 0, float(lc)))
    return Finding(result, ("FAIL, " if failed else "") + f"score {_pct(result.score)}", failed,
                   (4 if failed else 6, 0, result.score))


def worst_cells(results: list[CellResult]) -> list[Finding]:
    """Every measured cell, worst first (see the module docstring)."""
    found = [f for r in results if r.outcome != "skipped" and (f := judge_cell(r)) is not None]
    return sorted(found, key=lambda f: (f.rank, f.result.nodeid))


def look_first(results: list[CellResult], limit: int = LOOK_FIRST) -> str:
    """One line naming the worst cells of a suite; says so when nothing failed or dropped."""
    worst = worst_cells(results)
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


def _pct(value: object) -> str:
    text = _fixed(100 * value if isinstance(value, (int, float)) else value, 1)
    return text if text == "–" else text + "%"


def _p(value: object) -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3g}"


def _fixed(value: object, digits: int) -> str:
    """A number for a sentence: '–' when missing, '-∞' for a t of a zero-variance drop."""
    if not isinstance(value, (int, float)) or math.isnan(value):
        return "–"
    if math.isinf(value):
        return "-∞" if value < 0 else "∞"
    return f"{value:.{digits}f}"
