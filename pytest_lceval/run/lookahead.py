"""Cells measured together, so that the engine answers many cells' requests in one batch.

pytest runs one test at a time, and a cell asks for a handful of requests (``--samples``); a
GPU engine given a handful spends its time in per-step overhead. So when a test needs its cell
measured, the cell and the selected cells after it (up to ``--lceval-lookahead`` cases) are
measured together, and the later tests take their finished results.

Each measurement runs in a thread of its own, but only one runs at any moment: it runs until it
asks a model (the model under test or a judge, generate or rank), then the next one runs. When
every one has asked or finished, the main thread answers all the asks through the store, one
call per model and kind, and the measurements go on to their next asks (a prior-knowledge probe,
then the answers; a judge's key points, ratings, retries) until all are done. Suites are
unchanged: ``Suite.measure`` is what runs, and a cell's result is the one it gets alone (its
answers are the same requests' answers, whatever batch they were in; an engine whose numbers
depend on the batch's make-up differs as it does when ``--lceval-batch-size`` changes).

Under xdist every worker sees the same selected cells: each claims its window's cells in the
store, so the windows do not overlap, and claims each request before answering it, so no request
is answered twice. A measurement that fails in an unexpected way is dropped, and its test
measures the cell alone, so errors surface as they always did.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from ..foundation.grid import Cell
from ..foundation.measurement import Measurement, record
from ..foundation.measuring import measuring
from ..foundation.workers import worker_label
from ..models.stored import Progress, StoredModel
from ..results.cells import CellResult
from .progress import Board, CellProgress
from .suite import CellStopped, Suite

if TYPE_CHECKING:
    from .evaluation import Evaluator

CLAIM_REACH = 4
"""A window is filled from the next cells within this many windows' worth of cases, skipping
those other workers claimed."""


@dataclass
class _Ask:
    model: StoredModel
    kind: str
    requests: Sequence[Any]
    thread: int
    answers: list[Any] | None = None
    error: Exception | None = None


@dataclass
class _Job:
    """One measurement in its thread, paused at each ask until the main thread answers it."""

    measure: Callable[[], object]
    go: threading.Event = field(default_factory=threading.Event)
    paused: threading.Event = field(default_factory=threading.Event)
    ask: _Ask | None = None
    error: BaseException | None = None


class Gather:
    """Runs measurements one at a time and answers their asks together (see the module)."""

    def __init__(self, label: str, board: Board | None = None) -> None:
        self.label = label
        self.board = board
        """Where the shared batches' progress lines go (the session's)."""
        self._jobs: dict[int, _Job] = {}
        """Each running job by its thread's ident."""

    def run(self, measures: Sequence[Callable[[], object]]) -> list[BaseException | None]:
        """Run every measurement to its end; what each raised (None when it finished)."""
        jobs = [_Job(measure) for measure in measures]
        for index, job in enumerate(jobs):
            thread = threading.Thread(target=self._work, args=(job,), daemon=True,
                                      name=f"lceval-lookahead-{index}")
            thread.start()
            assert thread.ident is not None
            self._jobs[thread.ident] = job
        running = jobs
        while running:
            for job in running:
                job.paused.clear()
                job.go.set()
                job.paused.wait()
            running = [job for job in running if job.ask is not None]
            self._answer([job.ask for job in running if job.ask is not None])
        self._jobs.clear()
        return [job.error for job in jobs]

    def ask(self, model: StoredModel, kind: str, requests: Sequence[Any],
            progress: Progress | None) -> list[Any]:
        """A job's ask: pause until the main thread has answered it with the others."""
        del progress  # the shared batches report their own progress
        job = self._jobs[threading.get_ident()]
        job.ask = ask = _Ask(model, kind, requests, threading.get_ident())
        job.go.clear()
        job.paused.set()
        job.go.wait()
        job.ask = None
        if ask.error is not None:
            raise ask.error
        assert ask.answers is not None
        return ask.answers

    def _work(self, job: _Job) -> None:
        job.go.wait()
        try:
            with measuring(gatherer=self, waits=False):
                job.measure()
        except BaseException as exc:  # reported to the main thread, which decides
            job.error = exc
        finally:
            job.paused.set()

    def _answer(self, asks: Sequence[_Ask]) -> None:
        """Every ask answered, one call per (backend, store, batch size, kind)."""
        groups: dict[Hashable, list[_Ask]] = {}
        for ask in asks:
            model = ask.model
            key = (id(model.backend), id(model.store), model.batch_size, ask.kind)
            groups.setdefault(key, []).append(ask)
        for group in groups.values():
            model = group[0].model
            requests = [request for ask in group for request in ask.requests]
            progress = CellProgress(f"{self.label} ({len(group)} cells)", board=self.board)
            started = time.perf_counter()
            try:
                answers, answered = model.answer_now(group[0].kind, requests, progress)
            except Exception as exc:  # each asking measurement raises it
                for ask in group:
                    ask.error = exc
                continue
            finally:
                progress.close()
            seconds = time.perf_counter() - started
            position, credited = 0, []
            for ask in group:  # a request two cells asked counts for the first
                ask.answers = answers[position:position + len(ask.requests)]
                credited.append(sum(answered[position:position + len(ask.requests)]))
                position += len(ask.requests)
            # The call's seconds split by the requests each ask had answered (evenly when the
            # store had them all), so that cells' seconds_model add up to the call's.
            weights = credited if sum(credited) else [1] * len(group)
            for ask, requests_answered, weight in zip(group, credited, weights, strict=True):
                model.calls.credit(ask.thread, requests_answered,
                                   seconds * weight / sum(weights))


@dataclass
class Measured:
    """A cell's measurement: its result, and the problem that left it without a score."""

    result: CellResult
    problem: CellStopped | None = None


class Lookahead:
    """Measures cells for their tests, a window of the selected cells at a time.

    Under xdist every worker sees the same selected cells, so each claims the cells of its
    window in the store first and leaves out those another live worker claimed: the workers'
    windows do not overlap, and each engine works on cells of its own. A test whose cell
    another worker measured reads that worker's answers from the store."""

    def __init__(self, evaluator: Evaluator, suites: dict[str, Suite],
                 cells: Sequence[tuple[str, Cell]], window: int,
                 owner: str | None = None) -> None:
        self.evaluator = evaluator
        self.suites = suites
        self.cells = list(cells)
        """The selected tests' cells in collection order (after -k/-m and deselection)."""
        self.window = window
        self.owner = owner or evaluator.model.owner
        self._claims = f"lookahead:{evaluator.run_dir}"
        """The store's claims namespace of this run's cells."""
        self._position = {nodeid: index for index, (nodeid, _) in enumerate(self.cells)}
        self._done: dict[tuple[str, Cell], Measured] = {}
        self._started: set[str] = set()
        """Tests whose cells this process has measured or is measuring."""

    def measure(self, nodeid: str, cell: Cell) -> Measured:
        """``cell``'s measurement for test ``nodeid``: measured ahead, or now with the cells
        after it."""
        measured = self._done.pop((nodeid, cell), None)
        if measured is None:
            window = self._window(nodeid, cell)
            if len(window) > 1 or (window and window[0][0] != nodeid):
                self._measure_together(window)
                measured = self._done.pop((nodeid, cell), None)
        self._started.add(nodeid)
        return measured or self._measure_alone(nodeid, cell)

    def _window(self, nodeid: str, cell: Cell) -> list[tuple[str, Cell]]:
        """The cell, then the selected cells after it that fit in the window and that no other
        worker has claimed. When another worker has claimed the cell itself, the window is the
        cells after it alone: this worker's engine works on them while the other answers the
        cell, whose answers the test then reads."""
        chosen = [(nodeid, cell)]
        room = self.window - cell.samples
        if (room <= 0 or not self.suites[cell.suite].measures_ahead
                or nodeid not in self._position):
            return chosen
        candidates: list[tuple[str, Cell]] = []
        reach = CLAIM_REACH * room  # room to spare for cells other workers hold
        for other_id, other in self.cells[self._position[nodeid] + 1:]:
            if reach < other.samples:
                break
            if (other_id in self._started or (other_id, other) in self._done
                    or not self.suites[other.suite].measures_ahead):
                continue
            candidates.append((other_id, other))
            reach -= other.samples
        store = self.evaluator.model.store
        mine, _ = store.claim(self._claims, [nodeid, *(i for i, _ in candidates)], self.owner)
        if nodeid not in mine:  # another worker measures it: its answers will be in the store
            chosen, room = [], self.window
        spare: list[str] = []
        for other_id, other in candidates:
            if other_id not in mine:
                continue
            if room >= other.samples and not spare:
                chosen.append((other_id, other))
                room -= other.samples
            else:
                spare.append(other_id)
        store.release_claims(self._claims, spare, self.owner)
        return chosen

    def _measure_together(self, window: Sequence[tuple[str, Cell]]) -> None:
        evaluator = self.evaluator
        results = [_new_result(self.suites[cell.suite], nodeid, cell, evaluator)
                   for nodeid, cell in window]
        gather = Gather(f"[{worker_label()}] {window[0][0]} and the next cells",
                        evaluator.board)
        problems = gather.run([
            _measuring(self.suites[cell.suite], cell, result, evaluator)
            for (_, cell), result in zip(window, results, strict=True)])
        for (nodeid, cell), result, problem in zip(window, results, problems, strict=True):
            self._started.add(nodeid)
            if problem is None or isinstance(problem, CellStopped):
                self._done[(nodeid, cell)] = Measured(result, problem)

    def _measure_alone(self, nodeid: str, cell: Cell) -> Measured:
        evaluator = self.evaluator
        suite = self.suites[cell.suite]
        result = _new_result(suite, nodeid, cell, evaluator)
        try:
            _measuring(suite, cell, result, evaluator)()
        except CellStopped as exc:
            return Measured(result, exc)
        return Measured(result)


def _new_result(suite: Suite, nodeid: str, cell: Cell, evaluator: Evaluator) -> CellResult:
    """The cell's result, naming its source and the metric of its scores before measuring."""
    result = evaluator.new_result(nodeid, cell, suite.source(evaluator))
    result.name_metric(suite.metric_for(cell.task))
    return result


def _measuring(suite: Suite, cell: Cell, result: CellResult,
               evaluator: Evaluator) -> Callable[[], None]:
    """Measure ``cell`` with its suite and make ``result`` from what it measured, also when it
    stopped without a score (a refused judge's cases are logged too)."""
    def measure() -> None:
        try:
            with measuring(label=f"[{worker_label()}] {result.nodeid}"):
                measurement = suite.measure(cell, evaluator)
        except CellStopped as stopped:
            _keep(result, stopped.measured, evaluator)
            raise
        _keep(result, measurement, evaluator)

    return measure


def _keep(result: CellResult, measurement: Measurement, evaluator: Evaluator) -> None:
    record(result, measurement)
    if measurement.logged:  # under --lceval-log-samples
        evaluator.log_cases(result, measurement.logged)


def selected_cells(session: pytest.Session) -> list[tuple[str, Cell]]:
    """Each selected test's cell, in the order pytest runs them."""
    cells = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        cell = callspec.params.get("lc_cell") if callspec is not None else None
        if isinstance(cell, Cell):
            cells.append((item.nodeid, cell))
    return cells
