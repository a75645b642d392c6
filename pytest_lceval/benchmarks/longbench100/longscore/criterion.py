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
from collections.abc import Callable, Sequence
from typing import Any

from ....foundation.criterion import Assessment, Evidence
from ....foundation.grid import case_seed, format_length
from ....results.cells import CellResult, Judgement
from ....results.score_metric import ScoreMetric
from ....tasks.base import GenerationTask
from .base import BaseAbilities, BaseAbility, BaseAbilityNeed, MeasuredBase, base_strata
from .config import LongScoreSettings
from .formula import longscore, longscore_ci

CRITERION = "longscore"
LONGSCORE = ScoreMetric("longscore", "(score at the length - base ability) / base ability, as a "
                                     "percentage (100-LongBench's LC)", low=-100.0,
                        high=math.inf, unit="%")
UNDEFINED = "LongScore undefined"
"""Start of the reason of a long cell whose LongScore cannot be computed (tests import it)."""


class LongScoreCriterion:
    """Judges the cells of every length sweep (``foundation.criterion.SweepCriterion``)."""

    name = CRITERION
    sweep_replaces = "threshold"
    """On a long cell its bound replaces the default threshold."""

    def __init__(self, settings: LongScoreSettings, run_lengths: tuple[int, ...],
                 seed: int, task_of: Callable[[str, str], GenerationTask]) -> None:
        self.settings = settings
        self.task_of = task_of
        """The session's task object for (suite, task name): its base is measured by it."""
        self.enabled = settings.active(run_lengths)
        self.bases = BaseAbilities(settings, run_lengths)
        self.seed = seed

    def needs(self, result: CellResult) -> Sequence[BaseAbilityNeed]:
        if (not self.enabled or math.isnan(result.score)
                or self.settings.role(result.length) == "short"):
            return ()
        return (self.bases.need(result.suite, self.task_of(result.suite, result.task)),)

    def judge(self, result: CellResult, evidence: Evidence) -> Assessment | None:
        needs = self.needs(result)
        if not needs:
            return None
        role = self.settings.role(result.length)
        measured: MeasuredBase = evidence[needs[0].key]
        base = measured.ability
        metrics = _base_metrics(role, base, self.settings, measured.window)
        metrics["longscore_n"] = result.n
        if role == "base":
            return Assessment(None, metrics)
        metrics["longscore_metric"] = LONGSCORE.label
        lc = longscore(result.score, base.value, self.settings.floor)
        if lc is None:
            return self._undefined(result, base, metrics)
        low, high = longscore_ci(
            result.scores, base_strata(base.strata, self.settings.base_mean),
            self.settings.floor,
            seed=case_seed(self.seed, CRITERION, result.task, result.length, result.depth))
        metrics.update({"longscore": round(lc, 3), "longscore_ci_low": _round(low),
                        "longscore_ci_high": _round(high)})
        minimum = self.settings.minimum
        if minimum is None:
            return Assessment(None, metrics)
        passed = lc >= minimum
        return Assessment(Judgement(CRITERION, passed, (
            f"LongScore {lc:+.1f}% (95% CI {low:+.1f}%..{high:+.1f}%) "
            f"{'>=' if passed else '<'} minimum {minimum:+g}%: score {result.score:.3f} "
            f"(N={result.n}) at {format_length(result.length)} against {base.describe()}"
            f"{pooling(base)}"),
            {"longscore_min": minimum}), metrics)

    def _undefined(self, result: CellResult, base: BaseAbility,
                   metrics: dict[str, Any]) -> Assessment:
        """Never divide by a base near 0: say why, and give no LongScore judgement, so the score
        threshold that LongScore's bound replaces on long cells judges the cell instead. A
        model with no base ability is then judged on its score, never passed by a skip."""
        if math.isnan(base.value):
            why = f"no base ability was measured ({base.describe()})"
        else:
            why = (f"{base.describe()} is below the floor {self.settings.floor:g} "
                   f"(--longscore-floor)")
        reason = f"{UNDEFINED} at {format_length(result.length)}: {why}"
        metrics.update({"longscore": None, "longscore_undefined": reason})
        return Assessment(None, metrics)


def pooling(base: BaseAbility) -> str:
    """How a depth cell's base was pooled, for its verdict message: one base per task, so a
    reader sees why a depth that fails only at long lengths can read -100 %."""
    depths = sorted({stratum.partition("@")[2] for stratum in base.strata if "@" in stratum},
                    key=float)
    return f", pooled over depths {', '.join(depths)} %" if len(depths) > 1 else ""


def _base_metrics(role: str, base: BaseAbility, settings: LongScoreSettings,
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
        "longscore_base_mode": settings.base,
        "longscore_base_mean": settings.base_mean,
        "longscore_base_on": base.measured_on(),
        "longscore_floor": settings.floor,
        "longscore_window": window,
    }


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)
