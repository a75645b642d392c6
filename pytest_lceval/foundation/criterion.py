"""What a criterion is, what it may ask to have measured, and how a suite's verdict policy turns
criteria's judgements into a cell's outcome: the types a suite declares (its ``VerdictPolicy``)
and a criterion meets, below the run loop that measures and the verdicts that judge.

A criterion never calls a model while judging. What it needs beyond the cell's own measurement
(LongScore's base ability) it declares as :class:`Need` objects; the cell run measures every need
first (memoised per process, shared through the store) and then hands the criteria the
*evidence*. ``judge`` is then a pure function of the measured result and the evidence, so
judging can be repeated, tested, or done against a model that is gone.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..results.cells import CellResult, Judgement


class Need(Protocol):
    """Something a criterion needs measured before it can judge a cell."""

    @property
    def key(self) -> Hashable:
        """Equal keys are measured once per process (e.g. one base ability per task)."""
        ...

    def measure(self, evaluator: Any) -> Any:
        """Measure it with the run's ``run.evaluation.Evaluator`` (may call the model, through
        the store; typed loosely here, below the run loop that hands it over)."""
        ...


Evidence = Mapping[Hashable, Any]
"""Need key -> what measuring it gave."""


@dataclass(frozen=True)
class Assessment:
    """A criterion's answer for one cell."""

    judgement: Judgement | None
    """None when the criterion records numbers but is no verdict here (LongScore with no bound)."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """Numbers for the cell's results line and JUnit properties."""
    default_bar: bool = False
    """The judgement applies a default bar (the threshold the user did not set), which a
    criterion ranked above it in the suite's policy replaces where it judges the cell."""


class Criterion(Protocol):
    """A cell-level verdict. Registered through ``pytest_lceval_criteria``; a suite's
    :class:`VerdictPolicy` names the criteria that judge its cells."""

    @property
    def name(self) -> str: ...

    def needs(self, result: CellResult) -> Sequence[Need]:
        """What must be measured before ``judge`` (usually nothing)."""
        ...

    def judge(self, result: CellResult, evidence: Evidence) -> Assessment | None:
        """Judge a measured cell; None when the criterion has nothing to say about it."""
        ...


@runtime_checkable
class SweepCriterion(Protocol):
    """A criterion that judges every length sweep: it joins each policy that takes them
    (``VerdictPolicy.sweeps``, a generation suite's default), ranked first, and there replaces
    the default bar of the criterion it names (LongScore's bound, the default threshold)."""

    @property
    def name(self) -> str: ...

    @property
    def sweep_replaces(self) -> str:
        """The criterion whose default-bar judgement it replaces where it judges the cell."""
        ...


@dataclass(frozen=True)
class VerdictPolicy:
    """Which criteria judge a suite's cells, and how their judgements combine.

    A cell fails when any counted judgement fails; otherwise it is skipped when any says it
    cannot judge the cell; otherwise it passes.
    """

    criteria: tuple[str, ...]
    """Names of the criteria that judge this suite's cells (those not active are ignored)."""
    replaces: tuple[tuple[str, str], ...] = ()
    """(upper, lower) pairs: where ``upper`` judges a cell, a default-bar judgement of
    ``lower`` is dropped."""
    sweeps: bool = False
    """Whether the criteria that judge every length sweep (``SweepCriterion``) join it."""

    def select(self, criteria: Mapping[str, Criterion]) -> list[Criterion]:
        """The active criteria that judge the suite's cells, in rank order."""
        joined = [criterion for criterion in criteria.values()
                  if self.sweeps and isinstance(criterion, SweepCriterion)
                  and criterion.name not in self.criteria]
        return joined + [criteria[name] for name in self.criteria if name in criteria]

    def replacements(self, selected: Sequence[Criterion]) -> tuple[tuple[str, str], ...]:
        """``replaces`` with the pairs of the sweep criteria among ``selected``."""
        return self.replaces + tuple((criterion.name, criterion.sweep_replaces)
                                     for criterion in selected
                                     if self.sweeps and isinstance(criterion, SweepCriterion))

    def decide(self, result: CellResult, assessments: Mapping[str, Assessment],
               extra: Sequence[Judgement] = (),
               replaces: Sequence[tuple[str, str]] | None = None) -> None:
        """Record the metrics and the counted judgements on ``result`` and set its outcome;
        ``extra`` are judgements of the cell-level hook (``pytest_lceval_judge``);
        ``replaces``: the pairs in force (``replacements``), ``self.replaces`` when None."""
        pairs = self.replaces if replaces is None else replaces
        dropped = {lower for upper, lower in pairs
                   if upper in assessments and assessments[upper].judgement is not None
                   and lower in assessments and assessments[lower].default_bar}
        judgements = list(extra)
        for name, assessment in assessments.items():
            result.metrics.update(assessment.metrics)
            if assessment.judgement is not None and name not in dropped:
                judgements.append(assessment.judgement)
        result.judgements = sorted(judgements, key=lambda j: j.criterion)
        failed = [j for j in result.judgements if not j.passed]
        undefined = [j for j in result.judgements if j.skip]
        result.outcome = "failed" if failed else "skipped" if undefined else "passed"
        result.reason = "; ".join(j.message for j in failed or undefined)
