"""The foundation's criterion: a cell's score must reach its task's threshold."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from .results import CellResult, Judgement
from .settings import Settings

if TYPE_CHECKING:
    from .evaluation import Evaluator


class ThresholdCriterion:
    """score >= threshold (global or per task). Task Haystack cells opt out: their verdict is
    the paired t-test, and an absolute bar would punish tasks that are hard at any length."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._deferrals: list[Callable[[CellResult], bool]] = []

    def defer_when(self, takes_over: Callable[[CellResult], bool]) -> None:
        """Let a relative criterion (LongScore's bound on long cells) take over the cells for
        which ``takes_over`` is true, but only where the threshold is the default: a threshold
        the user set explicitly (globally or for the task) is always judged."""
        self._deferrals.append(takes_over)

    @pytest.hookimpl
    def pytest_lceval_judge(self, result: CellResult, evaluator: Evaluator) -> Judgement | None:
        if not result.absolute_threshold or math.isnan(result.score):
            return None
        if not self.settings.threshold_is_explicit(result.task) and any(
                takes_over(result) for takes_over in self._deferrals):
            return None
        threshold = self.settings.threshold_for(result.task)
        passed = result.score >= threshold
        relation = ">=" if passed else "<"
        message = (f"score {result.score:.3f} (95% CI {result.ci_low:.3f}-{result.ci_high:.3f}, "
                   f"N={result.n}) {relation} threshold {threshold:.3f}")
        return Judgement("threshold", passed, message, {"threshold": threshold})
