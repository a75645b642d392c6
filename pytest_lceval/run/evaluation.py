"""The session state that measuring a cell needs: settings, the model behind the store, data,
the run folder, and what criteria needed measured (memoised per process); and the one pipeline
that turns built cases into scores (``Evaluator.answer``), for every suite's cells and for
LongScore's base ability alike."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from ..foundation.criterion import Need
from ..foundation.data import DataSource
from ..foundation.grid import Cell
from ..foundation.measurement import Scored
from ..models.chat_choice import renderer_for
from ..models.reference_tokenizer import ReferenceTokenizer, load_reference
from ..models.scoring import StoredScoring
from ..models.stored import CallCounter, StoredModel
from ..results.cells import CellResult
from ..results.records import Case, Generation
from ..results.sample_log import write_cell
from ..settings import Settings
from ..tasks.base import BuildContext, FiltersCases, GenerationTask
from ..tasks.judged import JudgedTask
from ..tasks.stops import with_stops
from .progress import Board, CellProgress, StreamBoard


class NothingKept(Exception):
    """The task's filter left none of the cases (the message says why); ``metrics`` are its
    counts, which the result still records, ``requests`` what its probes asked."""

    def __init__(self, reason: str, metrics: dict[str, int], requests: int) -> None:
        super().__init__(reason)
        self.metrics = metrics
        self.requests = requests


@dataclass(frozen=True)
class Answered:
    """Built cases after the pipeline: those the task's filter kept, their answers, scores."""

    cases: list[Case]
    generations: list[Generation]
    scored: Scored
    filter_metrics: dict[str, int]
    """The filter's counts (probed, excluded...); empty for a task without one."""
    requests: int
    """Requests that reached the model or the store (the filter's probes included)."""
    seconds_model: float
    seconds_score: float
    read: int = 0
    """Of ``cases``, those whose answers earlier runs stored; the rest were answered in this
    run, by this cell's call or by a call another cell made (lookahead, another worker)."""


class Judges(Protocol):
    """The judge models that score judged tasks' outputs (``judge.panel.JudgePanel``: the judge
    and an optional second one), made by the wiring from the judge options."""

    @property
    def identity(self) -> str:
        """The judge that scores, as spec@fingerprint (results and stored values name it)."""
        ...

    def score(self, task: JudgedTask, outputs: Sequence[str], cases: Sequence[Case],
              agreement: bool = True) -> Scored: ...

    def used(self) -> dict[str, CallCounter]:
        """The work of each judge that was loaded, by role."""
        ...


@dataclass
class Evaluator:
    """Session-wide state that every cell needs; one per process (per xdist worker)."""

    config: pytest.Config
    settings: Settings
    model: StoredModel
    data: DataSource
    run_dir: Path
    judges: Judges | None = None
    """The judge (and second judge) of judged tasks; None when the run names none."""
    scoring: dict[str, StoredScoring] = field(default_factory=dict)
    """The plugins' scoring models by name (``pytest_lceval_scoring_models``), behind the
    store; a task's ``cell_metrics`` gets them."""
    board: Board | None = None
    """Where cells' progress lines go: the session's terminal or log (``progress.BOARD``);
    None writes them to stderr."""
    notes_told: int = 0
    """How many of the backend's notes (``BaseBackend.notes``) this process has printed."""
    said_length_ratio: bool = False
    """Whether this process warned that the reference tokenizer and the model count far apart
    (``ReferenceTokenizer.far_from``): said once, it holds for every cell."""
    _evidence: dict[Hashable, Any] = field(default_factory=dict, repr=False)
    """Measured needs by key (a task's LongScore base ability is measured once per process)."""

    def context_for(self, task: GenerationTask) -> BuildContext:
        """The build context with the rendering ``task`` gets (see chat_choice)."""
        renderer = renderer_for(self.model.renderer, self.settings.chat_template, task)
        if self.reference is not None:  # lengths in the reference tokenizer's tokens
            return BuildContext(self.reference.text, self.reference.renderer(renderer),
                                self.data, self.settings.seed)
        return BuildContext(self.model.tokenizer, renderer, self.data, self.settings.seed)

    def build(self, task: GenerationTask, cell: Cell) -> list[Case]:
        """The cell's cases as this run asks them: built in the task's rendering
        (``context_for``), their answers stopped where ``--lceval-stop-newline`` says
        (tasks/stops.py). Raises CellDoesNotFit."""
        return with_stops(task.build(cell, self.context_for(task)), task,
                          self.settings.stop_newline)

    @functools.cached_property
    def reference(self) -> ReferenceTokenizer | None:
        """The --lceval-ref-tokenizer, loaded once per process; None without the option. One
        that fails to load raises ReferenceTokenizerError, which stops the run at its first
        cell (start-up checked what its files tell)."""
        if self.settings.ref_tokenizer is None:
            return None
        return load_reference(self.settings.ref_tokenizer)

    def answer(self, task: GenerationTask, cases: Sequence[Case], label: str | None = None,
               agreement: bool = True) -> Answered:
        """Filter (a task's ``filter_cases``), answer through the store with ``label`` on the
        progress line (by default the cell being measured), score: the steps after building,
        the same for a cell and for LongScore's base. Raises NothingKept when the filter leaves
        no case."""
        model = self.model
        before, spent = model.calls.here, model.calls.seconds_here
        kept, metrics = list(cases), {}
        if isinstance(task, FiltersCases):
            known = task.filter_cases(self, kept)
            metrics = dict(known.metrics)
            if kept and not known.kept:
                raise NothingKept(known.reason_all_excluded(), metrics,
                                  model.calls.here - before)
            kept = list(known.kept)
        progress = self.progress(label)
        try:
            generations = model.generate([case.request() for case in kept], progress)
        finally:
            progress.close()
            self.tell_notes()
        seconds_model = model.calls.seconds_here - spent
        requests = model.calls.here - before
        read = model.read_from_earlier_runs([case.request().key() for case in kept])
        started = time.perf_counter()
        scored = self.score(task, [g.text for g in generations], kept, agreement)
        return Answered(kept, generations, scored, metrics, requests, seconds_model,
                        time.perf_counter() - started, read)

    def tell_notes(self) -> None:
        """Print what the backend has learnt since the last call (the CPU decoder's verdict
        once the weights have loaded), each line once, where progress goes. A plugin's
        backend need not have notes."""
        notes: list[str] = getattr(self.model, "notes", [])
        board = self.board or StreamBoard(sys.__stderr__ or sys.stderr)
        for line in notes[self.notes_told:]:
            board.note(line)
        self.notes_told = len(notes)

    def progress(self, label: str | None = None) -> CellProgress:
        """A reporter of the running cell's progress on the session's board, ``label`` on its
        line (by default the cell this thread measures); close it when the cell's asks end."""
        return CellProgress(label, board=self.board)

    def score(self, task: GenerationTask, outputs: Sequence[str], cases: Sequence[Case],
              agreement: bool = True) -> Scored:
        """Every output's score: by the judge for a judged task (with the agreement numbers
        when ``agreement``), else by the task's own metric. The one scoring path of cells,
        prior-knowledge probes and LongScore's base ability."""
        if isinstance(task, JudgedTask):
            if self.judges is None:  # the grid leaves judged tasks out without a judge
                raise RuntimeError(f"task {task.name} is judged but the run has no judge")
            return self.judges.score(task, outputs, cases, agreement)
        return Scored([task.score(output, case)
                       for output, case in zip(outputs, cases, strict=True)])

    def judge_identity(self, task: GenerationTask) -> str:
        """Who scores ``task``'s outputs: the judge's identity, "" for a rule-scored task (a
        value stored from judged scores must name its judge)."""
        if isinstance(task, JudgedTask) and self.judges is not None:
            return self.judges.identity
        return ""

    def new_result(self, nodeid: str, cell: Cell, source: str) -> CellResult:
        return cell_result(nodeid, cell, self.settings, source, self.model.fingerprint,
                           self.model.context_window)

    def log_cases(self, result: CellResult, cases: Sequence[dict[str, Any]]) -> None:
        """Under --lceval-log-samples, write every case of the cell (``sample_log``) and name
        the file in its result; without it, nothing."""
        if self.settings.log_samples:
            cell = {"suite": result.suite, "task": result.task, "length": result.length,
                    "cell_depth": result.depth, "axes": result.extra, "metric": result.metric}
            result.samples_file = write_cell(self.run_dir, result.nodeid, cell, cases)

    def measure_needs(self, needs: Sequence[Need]) -> dict[Hashable, Any]:
        """The evidence for ``needs``: each key measured once per process."""
        for need in needs:
            if need.key not in self._evidence:
                self._evidence[need.key] = need.measure(self)
        return {need.key: self._evidence[need.key] for need in needs}


def cell_result(nodeid: str, cell: Cell, settings: Settings, source: str,
                fingerprint: str = "", context_window: int = 0) -> CellResult:
    """A new result of ``cell`` in this run, before anything is measured; a cell whose test
    failed before its model was loaded knows no fingerprint or window."""
    return CellResult(
        nodeid=nodeid, suite=cell.suite, task=cell.task, length=cell.length, depth=cell.depth,
        extra=cell.axes(), model=settings.model, fingerprint=fingerprint, seed=settings.seed,
        source=source, context_window=context_window, model_args=settings.model_args,
    )
