"""The foundation's criterion: a cell's score must reach its task's threshold."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..foundation.criterion import Assessment, Evidence, Need
from ..results.cells import CellResult, Judgement
from ..settings import Settings


class ThresholdCriterion:
    """score >= threshold (global or per task). A suite whose verdict is relative (Task
    Haystack's t-test) leaves it out of its policy; a default threshold (not set by the user)
    is marked as such, so LongScore's bound may replace it on long cells."""

    name = "threshold"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def needs(self, result: CellResult) -> Sequence[Need]:
        return ()

    def judge(self, result: CellResult, evidence: Evidence) -> Assessment | None:
        if math.isnan(result.score):
            return None
        threshold = self.settings.threshold_for(result.task)
        passed = result.score >= threshold
        relation = ">=" if passed else "<"
        message = (f"score {result.score:.3f} (95% CI {result.ci_low:.3f}-{result.ci_high:.3f}, "
                   f"N={result.n}) {relation} threshold {threshold:.3f}")
        return Assessment(Judgement("threshold", passed, message, {"threshold": threshold}),
                          default_bar=not self.settings.threshold_is_explicit(result.task))
