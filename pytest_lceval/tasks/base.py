"""What a task is: data that builds a cell's cases and scores an output. It never calls a model.

A task belongs to the suite that declares it (``GenerationSuite(name, tasks)``): there is no
registry, so nothing one pytest session adds outlives it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..foundation.data import DataSource
from ..foundation.grid import Cell
from ..models.base import Renderer, Tokenizer
from ..results.records import Case
from ..results.score_metric import ScoreMetric


class CellDoesNotFit(Exception):
    """The cell cannot be built within its budget; the message names the numbers."""


@dataclass(frozen=True)
class BuildContext:
    """What a generator may use: the tokenizer and renderer that lengths are counted with, data,
    and the run seed.

    The tokenizer is the model's own, or the reference tokenizer of --lceval-ref-tokenizer
    (models/reference_tokenizer.py); the renderer always applies the model's chat template, so the
    model is fed the text that was counted. Generators count and slice only through these two.
    """

    tokenizer: Tokenizer
    renderer: Renderer
    data: DataSource
    seed: int


class GenerationTask(Protocol):
    """A task scored on generated text (recall, QA...)."""

    # Read-only properties, so that frozen dataclasses satisfy the protocol.
    @property
    def name(self) -> str: ...

    @property
    def metric(self) -> ScoreMetric:
        """What ``score`` measures (its name and range), named by every result."""
        ...

    @property
    def uses_depth(self) -> bool:
        """Whether the task places key information at a depth (so the grid sweeps depths)."""
        ...

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        """The cell's cases, deterministic in (cell, seed); raises CellDoesNotFit."""
        ...

    def score(self, output: str, case: Case) -> float:
        """Score 0..1 of one output."""
        ...


@runtime_checkable
class NotesCases(Protocol):
    """A task whose cases carry a setting that the cell's result records beside its numbers
    (RULER's VT, CWE and FWE: the RULER version whose generator wrote the prompts)."""

    case_notes: ClassVar[tuple[str, ...]]
    """Keys of a case's ``meta`` copied, from the cell's first case, into its metrics."""


class CaseFilter(Protocol):
    """What a task's filter kept of a cell's cases, and the counts its result records."""

    @property
    def kept(self) -> list[Case]: ...

    @property
    def metrics(self) -> dict[str, int]: ...

    def reason_all_excluded(self) -> str:
        """Why the cell has nothing left to measure, when the filter kept no case."""
        ...


@runtime_checkable
class FiltersCases(Protocol):
    """A task some of whose cases are left out after the model is asked something first
    (100-LongBench's prior-knowledge filter). Every cell and LongScore's base run it between
    building the cases and generating their answers; its requests go through the store.
    ``evaluator`` is the run's ``run.evaluation.Evaluator`` (typed loosely here: a task knows
    the run loop only through what it is handed)."""

    def filter_cases(self, evaluator: Any, cases: Sequence[Case]) -> CaseFilter: ...
