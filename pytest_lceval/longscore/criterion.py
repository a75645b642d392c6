"""The LongScore criterion: long cells record LC_l = (S_l - Base) / Base (x100) with a bootstrap
interval, and assert LC_l >= --longscore-min when it is set; base cells record the base ability.
Both numbers of the ratio carry their N: ``longscore_n`` (the cell's cases) and
``longscore_base_n`` (with ``longscore_base_n_by_length`` and the rule each length took).

What it records goes into ``result.metrics`` (so it reaches results.jsonl and, as properties,
JUnit XML) whether or not a bound is set; a Judgement is returned only when the bound is set,
because only then is LongScore a verdict.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from ..evaluation import Evaluator
from ..grid import case_seed, format_length
from ..results import CellResult, Judgement
from ..stats import longscore, longscore_ci
from ..tasks.base import GenerationTask, get_task
from .base import BaseAbilities, BaseAbility
from .config import LongScoreSettings

CRITERION = "longscore"
UNDEFINED = "LongScore undefined"
"""Start of the reason of a long cell whose LongScore cannot be computed (tests import it)."""


class LongScoreCriterion:
    """Judges the cells of length-sweeping suites (the default task x length x depth grid).
    Registered as a plugin: ``pytest_lceval_judge`` is its hook."""

    def __init__(self, settings: LongScoreSettings, run_lengths: tuple[int, ...]) -> None:
        self.settings = settings
        self.enabled = settings.active(run_lengths)
        self.bases = BaseAbilities(settings, run_lengths)

    def task_of(self, result: CellResult) -> GenerationTask | None:
        """The generation task behind a measured default-grid cell; None when LongScore does
        not apply (suites with their own axes, e.g. Task Haystack, or unmeasured cells)."""
        if not self.enabled or result.extra or math.isnan(result.score):
            return None
        try:
            task = get_task(result.task)
        except KeyError:
            return None
        return task if task.suite == result.suite else None

    def takes_over(self, result: CellResult) -> bool:
        """Whether LongScore is this cell's bound (the default threshold then steps aside)."""
        return (self.settings.minimum is not None and self.settings.role(result.length) == "long"
                and self.task_of(result) is not None)

    @pytest.hookimpl
    def pytest_lceval_judge(self, result: CellResult, evaluator: Evaluator) -> Judgement | None:
        role = self.settings.role(result.length)
        task = self.task_of(result)
        if task is None or role == "short":
            return None
        base, requests = self.bases.get(evaluator, result.suite, task)
        result.metrics.update(_base_metrics(role, base, requests, self.settings,
                                            evaluator.model.context_window))
        result.metrics["longscore_n"] = result.n
        if role == "base":
            return None
        lc = longscore(result.score, base.value, self.settings.floor)
        if lc is None:
            return self._undefined(result, base)
        low, high = longscore_ci(
            result.scores, list(base.strata.values()), self.settings.floor,
            seed=case_seed(evaluator.settings.seed, CRITERION, result.task, result.length,
                           result.depth))
        result.metrics.update({"longscore": round(lc, 3), "longscore_ci_low": _round(low),
                               "longscore_ci_high": _round(high)})
        minimum = self.settings.minimum
        if minimum is None:
            return None
        passed = lc >= minimum
        return Judgement(CRITERION, passed, (
            f"LongScore {lc:+.1f}% (95% CI {low:+.1f}%..{high:+.1f}%) "
            f"{'>=' if passed else '<'} minimum {minimum:+g}%: score {result.score:.3f} "
            f"(N={result.n}) at {format_length(result.length)} against {base.describe()}"),
            {"longscore_min": minimum})

    def _undefined(self, result: CellResult, base: BaseAbility) -> Judgement | None:
        """Never divide by a base near 0: say why, and skip the cell if LC was its bound."""
        if math.isnan(base.value):
            why = f"no base ability was measured ({base.describe()})"
        else:
            why = (f"{base.describe()} is below the floor {self.settings.floor:g} "
                   f"(--longscore-floor)")
        reason = f"{UNDEFINED} at {format_length(result.length)}: {why}"
        result.metrics.update({"longscore": None, "longscore_undefined": reason})
        if self.settings.minimum is None:
            return None
        return Judgement(CRITERION, True, reason, {"longscore_min": self.settings.minimum},
                         skip=True)


def _base_metrics(role: str, base: BaseAbility, requests: int, settings: LongScoreSettings,
                  window: int) -> dict[str, Any]:
    return {
        "longscore_role": role,
        "longscore_base": None if math.isnan(base.value) else base.value,
        "longscore_base_n": base.n,
        "longscore_base_n_by_length": ",".join(f"{length}:{count}" for length, count
                                               in base.n_by_length().items()),
        "longscore_base_rules": ",".join(f"{length}:{rule}" for length, rule
                                         in base.rules.items()),
        "longscore_base_strata": ",".join(base.strata),
        "longscore_base_requests": requests,
        "longscore_floor": settings.floor,
        "longscore_window": window,
    }


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)
