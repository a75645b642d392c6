"""One cell worth a look, as a report names it: the record plugins return from
``pytest_lceval_finding`` and the number formats of its sentence. It imports no plugin, so a
benchmark's plugin can import it wherever it stands in the plugin list."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..results.cells import CellResult


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


OwnFinding = Callable[[CellResult], "Finding | None"]
"""A plugin's reading of a cell by its own verdict; None when it does not apply."""
BASELINE = "baseline"
"""The criterion name of the paired comparison's judgements (see baseline.py)."""
FAILING_STATUSES = frozenset({"regressed", "unpaired", "other-judge"})
"""Comparison statuses whose judgement failed the cell."""


def cell_label(nodeid: str) -> str:
    """'suites/test_recall.py::test_recall[json_kv-8k-50]' -> 'json_kv-8k-50': what pytest
    prints and ``-k`` selects."""
    tail = nodeid.rpartition("::")[2]
    if tail.endswith("]") and "[" in tail:
        return tail[tail.index("[") + 1 : -1]
    return tail


def percent(value: object) -> str:
    text = fixed(100 * value if isinstance(value, (int, float)) else value, 1)
    return text if text == "–" else text + "%"


def fixed(value: object, digits: int) -> str:
    """A number for a sentence: '–' when missing, '-∞' for a t of a zero-variance drop."""
    if not isinstance(value, (int, float)) or math.isnan(value):
        return "–"
    if math.isinf(value):
        return "-∞" if value < 0 else "∞"
    return f"{value:.{digits}f}"
