"""100-LongBench's prior-knowledge filter: a QA case that the model answers correctly with no
context at all measures what it memorised, not how it reads, so the case is left out of the
cell and the exclusions are counted.

The rule is the reference's (github:uservan/100-LongBench, ``eval_trec.py``, ``scorer``): the
no-context answer is read from its first line; one that says "unanswerable" keeps the case
without being scored; any other is scored with the task's metric and the case is excluded when
that score reaches the threshold (``--qa_filter`` there, ``--prior-knowledge-threshold`` here).
Tasks keep their questions the same at every length (``SingleDocQA``), so every cell of a task,
base lengths included, probes and filters the same questions.

A task opts in by giving each case a *probe*: the same question with no context, scored by the
task's own metric. The filter lives beside the evaluator, not in the task, because it needs the
model (tasks never call one); probes go through the store like every other request, so a probe
shared by cells of different lengths is asked once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ...results.records import Case
from ...tasks.base import BuildContext, GenerationTask
from .text import UNANSWERABLE, first_line

if TYPE_CHECKING:
    from ...run.evaluation import Evaluator

EXCLUDED = "prior_knowledge_excluded"
"""Metric: cases of the cell left out because the model knew the answer without context."""
PROBED = "prior_knowledge_probed"
"""Metric: cases of the cell asked without context."""
ABSTAINED = "prior_knowledge_unanswerable"
"""Metric: probed cases whose no-context answer said "unanswerable" (kept unscored)."""


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
    abstained: int = 0
    threshold: float = 0.0
    probe_scores: list[float | None] = field(default_factory=list)
    """Per case, the no-context score; None where the answer said "unanswerable"."""

    @property
    def metrics(self) -> dict[str, int]:
        return {EXCLUDED: self.excluded, PROBED: self.probed, ABSTAINED: self.abstained} \
            if self.probed else {}

    def reason_all_excluded(self) -> str:
        return (f"all {self.probed} cases were answered with no context (no-context score >= "
                f"{self.threshold:g}); the prior-knowledge filter left nothing to measure")


def exclude_known(evaluator: Evaluator, task: GenerationTask,
                  cases: Sequence[Case]) -> KnownFilter:
    """Ask every case's probe; keep the cases whose no-context answer says "unanswerable" or
    scores below the threshold. Probes are scored as the task's answers are (by the judge for a
    judged task; a probe the judge's reply leaves unscored keeps its case)."""
    if not isinstance(task, ProbedTask) or not cases:
        return KnownFilter(list(cases))
    context = evaluator.context_for(task)
    threshold = evaluator.settings.prior_knowledge_threshold
    probes = [task.probe(case, context) for case in cases]
    answers = [answer.text for answer in
               evaluator.model.generate([probe.request() for probe in probes])]
    abstained = [UNANSWERABLE in first_line(text).lower() for text in answers]
    asked = [i for i, said in enumerate(abstained) if not said]
    judged = evaluator.score(task, [answers[i] for i in asked], [probes[i] for i in asked],
                             agreement=False).scores if asked else []
    scores: list[float | None] = [None] * len(cases)
    for index, score in zip(asked, judged, strict=True):
        scores[index] = score
    kept = [case for case, score in zip(cases, scores, strict=True)
            if score is None or score < threshold]
    return KnownFilter(kept, len(cases) - len(kept), len(cases), sum(abstained), threshold,
                       scores)
