"""100-LongBench's prior-knowledge filter: a QA case that the model answers correctly with no
context at all measures what it memorised, not how it reads, so the case is left out of the
cell and the exclusions are counted.

A task opts in by giving each case a *probe*: the same question with no context, scored by the
task's own metric. The filter lives beside the evaluator, not in the task, because it needs the
model (tasks never call one); probes go through the store like every other request, so a probe
shared by cells of different lengths is asked once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .models.stored import StoredModel
from .records import Case
from .tasks.base import BuildContext, GenerationTask

EXCLUDED = "prior_knowledge_excluded"
"""Metric: cases of the cell left out because the model knew the answer without context."""
PROBED = "prior_knowledge_probed"
"""Metric: cases of the cell asked without context."""


@runtime_checkable
class ProbedTask(Protocol):
    """A task whose cases can be asked without their context."""

    def probe(self, case: Case, context: BuildContext) -> Case:
        """The case's question alone: same gold answers, scored by the task's metric."""
        ...


@dataclass(frozen=True)
class KnownFilter:
    """What the filter kept, and how many it dropped."""

    kept: list[Case]
    excluded: int = 0
    probed: int = 0
    """0 when the task has no probes (nothing was asked)."""
    threshold: float = 0.0
    probe_scores: list[float] = field(default_factory=list)

    @property
    def metrics(self) -> dict[str, int]:
        return {EXCLUDED: self.excluded, PROBED: self.probed} if self.probed else {}

    def reason_all_excluded(self) -> str:
        return (f"all {self.probed} cases were answered with no context (no-context score >= "
                f"{self.threshold:g}); the prior-knowledge filter left nothing to measure")


def exclude_known(model: StoredModel, task: GenerationTask, cases: Sequence[Case],
                  context: BuildContext, threshold: float) -> KnownFilter:
    """Ask every case's probe; keep the cases whose no-context score stays below ``threshold``."""
    if not isinstance(task, ProbedTask) or not cases:
        return KnownFilter(list(cases))
    probes = [task.probe(case, context) for case in cases]
    answers = model.generate([probe.request() for probe in probes])
    scores = [task.score(answer.text, probe) for answer, probe in zip(answers, probes, strict=True)]
    kept = [case for case, score in zip(cases, scores, strict=True) if score < threshold]
    return KnownFilter(kept, len(cases) - len(kept), len(cases), threshold, scores)
