"""What a judged task declares: the rubric the judge rates its outputs by (the prompts it asks,
the rating scales a reply holds, how ratings make a case's score) and the rule metric that the
judge is checked against. The judge itself (``judge/``) asks and reads; the run loop only asks
whether a task is judged (``JudgedTask``) and what its cells' scores are on (``cell_metric``).
"""

from __future__ import annotations

import copy
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from ..results.records import Case
from ..results.score_metric import ScoreMetric


@dataclass(frozen=True)
class Field:
    """One score the judge must give: a whole number from ``low`` to ``high``."""

    name: str
    low: int = 0
    high: int | None = None
    """None: a count with no fixed top (sentences of a summary)."""
    at_most: str | None = None
    """Another field this one cannot exceed (supported sentences <= sentences)."""

    @property
    def ordinal(self) -> bool:
        """A rating on a fixed scale (fluency, correctness), which two judges' kappa compares;
        counts are compared by the scores they lead to instead."""
        return self.high is not None

    def describe(self) -> str:
        top = "" if self.high is None else f" to {self.high}"
        return f'"{self.name}" (a whole number from {self.low}{top})'


Ratings = Mapping[str, int]


@dataclass(frozen=True)
class Ask:
    """One prompt to the judge about one output, and the fields its reply must hold."""

    aspect: str
    """What is judged ("answer", "fluency", "recall", "precision"); names the asks of a case."""
    prompt: str
    fields: tuple[Field, ...]

    @property
    def example(self) -> str:
        """The JSON reply the prompt shows, for the retry's reminder."""
        return json.dumps({field.name: field.low for field in self.fields})


class Rubric(ABC):
    """What the judge is asked about one output, and how its ratings make the case's score:
    ``asks`` turns (output, case) into :class:`Ask` objects (one prompt each, with the fields
    its reply must hold), ``score`` their ratings into a score from 0 to 1, ``missing`` is what
    a case whose reply could not be read scores. Each benchmark family writes its own beside
    its tasks (``benchmarks/helmet/rubrics.py``, ``benchmarks/longbench100/rubrics.py``) and
    declares them by name (``judge.rubrics.RUBRICS``)."""

    name: str
    metric: ScoreMetric
    """What the case scores are: the rubric and the scale its ratings make."""
    missing: float | None = None
    """The score of a case with an unreadable reply; None leaves it out of the mean."""
    needs_keypoints: bool = False
    scales: tuple[Field, ...] = ()
    """The rubric's fixed rating scales, which two judges' kappa compares."""
    texts: Mapping[str, str] = MappingProxyType({})
    """Prompt texts by name that replace this project's words where the rubric has a use for
    them (the ``helmet_*`` rubrics: HELMET's judge scripts' own prompts, offered through
    ``pytest_lceval_judge_texts`` under ``--lceval-helmet-judge-prompts``); empty: the
    project's own words."""

    def worded(self, texts: Mapping[str, str]) -> Rubric:
        """This rubric asking in ``texts`` (see ``texts``): the judge panel asks every rubric
        in the session's texts, so no rubric object (they outlive a session) holds them."""
        if texts == self.texts:
            return self
        worded = copy.copy(self)
        worded.texts = MappingProxyType(dict(texts))
        return worded

    @abstractmethod
    def asks(self, output: str, case: Case, keypoints: Sequence[str]) -> list[Ask]:
        """The prompts about ``output``; ``keypoints`` is empty unless ``needs_keypoints``."""

    @abstractmethod
    def score(self, ratings: Sequence[Ratings], case: Case,
              keypoints: Sequence[str]) -> float:
        """The case's score from the ratings of its asks, in the order ``asks`` gave them."""


@runtime_checkable
class JudgedTask(Protocol):
    """A generation task whose score comes from the judge; its own ``score`` is the rule metric
    (ROUGE-L, SubEM) that the judge is checked against."""

    @property
    def name(self) -> str: ...

    @property
    def rubric(self) -> Rubric: ...

    @property
    def rule_metric(self) -> str:
        """The name of ``score``'s metric, e.g. ``rougeL_f1``."""
        ...

    def score(self, output: str, case: Case) -> float: ...


def cell_metric(task: Any) -> ScoreMetric:
    """The metric a task's cell scores are on: its rubric's when a judge scores it (the one
    scoring path, ``Evaluator.score``, decides the same way), else the task's own."""
    metric: ScoreMetric = task.rubric.metric if isinstance(task, JudgedTask) else task.metric
    return metric
