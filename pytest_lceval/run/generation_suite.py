"""The suites of generation tasks (recall, 100-LongBench): task x length x depth, each cell N
cases built by a registered task, answered through the store, scored by the task's metric."""

from __future__ import annotations

import time
import warnings
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import pytest

from ..foundation.criterion import VerdictPolicy
from ..foundation.data import DataSource, Fallbacks
from ..foundation.grid import Cell
from ..foundation.measurement import Measurement
from ..models.reference_tokenizer import ReferenceLengthWarning, ReferenceTokenizer
from ..models.scoring import ScoringModel
from ..results.cells import SAMPLE_CHARS, clip_sample, failing_first
from ..results.records import Case
from ..results.sample_log import generated_case
from ..results.score_metric import ScoreMetric
from ..settings import Settings
from ..tasks.base import CellDoesNotFit, GenerationTask, NotesCases
from ..tasks.judged import JudgedTask, cell_metric
from ..tasks.stops import config_stops_at_newline
from .evaluation import Evaluator, NothingKept
from .model_usage import ANSWERED, READ
from .suite import CellRefused, CellSkipped, Suite

SAMPLES_KEPT = 3
"""Prompts/outputs kept per cell for reports, the lowest-scoring first."""
NEEDS_JUDGE = "a judge model (--lceval-judge=SPEC)"
"""What a judged task lacks in a run that names no judge."""
LENGTH_SWEEP = VerdictPolicy(("threshold", "baseline"), sweeps=True)
"""A score threshold per task and the saved-run comparison everywhere; the criteria that judge
every length sweep rank first (LongScore: on long cells its bound, when set, replaces the
default threshold; an explicit one is still judged)."""


@runtime_checkable
class NeedsData(Protocol):
    """A task that reads a data set which only the data directory can hold (HELMET's)."""

    def missing_data(self, data: DataSource) -> str | None:
        """None when ``data`` has what the task reads; else what is missing and where to put
        it, in a few words."""
        ...


@runtime_checkable
class FallsBack(Protocol):
    """A task that reads offline fixtures where the data directory lacks a folder (recall's
    essay haystacks, 100-LongBench's articles)."""

    @property
    def fallbacks(self) -> Fallbacks: ...


@runtime_checkable
class CountsOutputs(Protocol):
    """A task that also counts something over a cell's outputs (re-rank: unparsed rankings),
    maybe with a plugin's scoring model (cite: the NLI classifier), looked up by name."""

    def cell_metrics(self, outputs: list[str], cases: list[Case],
                     scoring: Mapping[str, ScoringModel]) -> dict[str, Any]: ...


class GenerationSuite(Suite):
    """A suite whose cells are the generation tasks it declares, over the run's lengths and,
    for tasks with a key position, its depths. The tasks live in the suite object, which lives
    for one session: nothing a run declares is left for the next run in the same process."""

    measures_ahead = True

    def __init__(self, name: str, tasks: Iterable[GenerationTask], description: str = "",
                 policy: VerdictPolicy = LENGTH_SWEEP) -> None:
        self.name = name
        self.tasks: dict[str, GenerationTask] = {}
        self.description = description or f"cells of the {name} suite"
        self.policy = policy
        self._add(tasks)

    def _add(self, tasks: Iterable[GenerationTask]) -> None:
        for task in tasks:
            if task.name in self.tasks:
                raise pytest.UsageError(
                    f"pytest-lceval: suite {self.name!r} has two tasks named {task.name!r} "
                    f"({type(self.tasks[task.name]).__qualname__} and "
                    f"{type(task).__qualname__}); rename one")
            if not isinstance(getattr(task, "metric", None), ScoreMetric):
                raise pytest.UsageError(
                    f"pytest-lceval: task {task.name!r} of suite {self.name!r} declares no "
                    f"metric: give {type(task).__qualname__} a `metric` attribute, a "
                    f"ScoreMetric (pytest_lceval.results.score_metric, e.g. SUBEM or "
                    f"ScoreMetric('exact_match', 'what it counts')), so that its results say "
                    f"what their scores are")
            self.tasks[task.name] = task

    def with_tasks(self, tasks: Iterable[GenerationTask]) -> GenerationSuite:
        self._add(tasks)
        return self

    def task(self, name: str) -> GenerationTask:
        return self.tasks[name]

    def task_names(self) -> list[str]:
        return list(self.tasks)

    def metric_for(self, task: str) -> ScoreMetric:
        return cell_metric(self.tasks[task])

    def declares_metrics(self) -> bool:
        return True  # each task's, checked as it is added

    def grid(self, settings: Settings) -> list[Cell]:
        tasks = list(self.tasks.values())
        if not tasks:
            raise pytest.UsageError(f"pytest-lceval: suite {self.name!r} declares no tasks")
        if settings.tasks:
            tasks = [task for task in tasks if task.name in settings.tasks]
        missing = self.missing_data(settings)
        tasks = [task for task in tasks if task.name not in missing]
        return [
            Cell(self.name, task.name, length, depth, settings.samples)
            for task in tasks
            for length in settings.lengths
            for depth in (settings.depths if task.uses_depth else (None,))
        ]

    def fallbacks(self, tasks: Collection[str]) -> Fallbacks:
        readers = [task for name, task in self.tasks.items()
                   if name in tasks and isinstance(task, FallsBack)]
        return tuple(dict.fromkeys(pair for task in readers for pair in task.fallbacks))

    def missing_data(self, settings: Settings) -> dict[str, str]:
        """Tasks of the suite whose data the data directory lacks, and what they need: they
        have no cells (a run without --lceval-data still runs every other suite)."""
        data = settings.data_source()
        missing = {task.name: need for task in self.tasks.values()
                   if isinstance(task, NeedsData) and (need := task.missing_data(data))}
        if settings.judge is None:  # scored by a judge model, which the run does not name
            missing.update({task.name: NEEDS_JUDGE
                            for task in self.tasks.values()
                            if isinstance(task, JudgedTask) and task.name not in missing})
        return missing

    def left_out(self, settings: Settings) -> dict[str, str]:
        return {name: need for name, need in self.missing_data(settings).items()
                if not settings.tasks or name in settings.tasks}

    def why_empty(self, settings: Settings) -> str:
        missing = self.missing_data(settings)
        if missing and not settings.tasks:
            needs = "; ".join(f"{name} needs {need}" for name, need in missing.items())
            return f"suite {self.name!r} has no cells: {needs}"
        return super().why_empty(settings)

    def measure(self, cell: Cell, evaluator: Evaluator) -> Measurement:
        model = evaluator.model
        task = self.tasks[cell.task]
        if cell.length > model.context_window and evaluator.reference is None:
            raise CellSkipped(f"cell length {cell.length} tokens exceeds the model's context "
                              f"window of {model.context_window} tokens")
        started = time.perf_counter()
        context = evaluator.context_for(task)
        notes: dict[str, Any] = {"chat_template": "on" if context.renderer.uses_template
                                 else "off"}
        if config_stops_at_newline(task) is not None:
            notes["stop_newline"] = evaluator.settings.stop_newline
        try:
            cases = evaluator.build(task, cell)
        except CellDoesNotFit as exc:
            raise CellSkipped(str(exc), Measurement(metrics=notes)) from None
        built = time.perf_counter() - started
        if evaluator.reference is not None:
            counts, overflow = _model_counts(cases, evaluator)
            notes.update(counts)
            if overflow:
                raise CellSkipped(overflow, Measurement(metrics=notes, seconds_build=built))
        source = cases[0].meta.get("source") if cases else None
        if cases and isinstance(task, NotesCases):
            notes.update({key: cases[0].meta[key] for key in task.case_notes
                          if key in cases[0].meta})
        if cases and "context_size" in cases[0].meta:  # the rule that sized their context
            notes["context_size"] = cases[0].meta["context_size"]

        try:
            answered = evaluator.answer(task, cases)
        except NothingKept as exc:
            stopped = Measurement(metrics={**notes, **exc.metrics}, source=source,
                                  seconds_build=built)
            raise CellSkipped(str(exc), stopped) from None
        notes.update(answered.filter_metrics)
        cases, generations, scored = answered.cases, answered.generations, answered.scored
        # answered in this run + read from earlier runs = cases: model_requests counts only
        # the requests this cell's own call sent, 0 for a cell another cell's call answered
        notes[ANSWERED] = len(cases) - answered.read
        notes[READ] = answered.read
        truncated = [case.meta["truncated"] for case in cases if "truncated" in case.meta]
        if truncated:  # released files, cut as their paper cuts an overflowing prompt
            notes["truncated"] = float(sum(truncated))
        chances = [case.meta["chance"] for case in cases if "chance" in case.meta]
        if chances:  # a uniform guess's expected score over the scored cases
            notes["chance"] = round(sum(chances) / len(chances), 6)
        outputs = [g.text for g in generations]
        notes.update(scored.metrics)
        started = time.perf_counter()
        if isinstance(task, CountsOutputs):
            notes.update(task.cell_metrics(outputs, cases, evaluator.scoring))
        # A case the judge's rubric leaves unscored (an unreadable reply, counted in
        # judge_unparsed) is out of the mean and the pairing, never silently scored.
        kept = [i for i, score in enumerate(scored.scores) if score is not None]
        measurement = Measurement(
            scores=[score for score in scored.scores if score is not None],
            case_keys=[cases[i].request().key() for i in kept],
            prompt_tokens=[case.prompt_tokens for case in cases],
            total_tokens=[case.total_tokens for case in cases],
            depths=[case.depth for case in cases],
            samples=[{"index": cases[i].index,
                      "prompt": clip_sample(cases[i].prompt, cases[i].gold),
                      "gold": list(cases[i].gold), "output": outputs[i][:SAMPLE_CHARS],
                      "score": scored.scores[i]}
                     for i in failing_first(scored.scores, SAMPLES_KEPT)],
            logged=[generated_case(case, answer, score) for case, answer, score
                    in zip(cases, generations, scored.scores, strict=True)]
            if evaluator.settings.log_samples else (),
            metrics=notes, source=source, judge=scored.judge, seconds_build=built,
            seconds_model=answered.seconds_model,
            seconds_score=answered.seconds_score + time.perf_counter() - started,
            model_requests=answered.requests)
        if cases and not kept:  # a broken judge must not turn a gate green by skipping
            raise CellRefused(f"the judge's replies to all {len(cases)} cases could not be "
                              f"read (judge_unparsed={len(cases)}): no score; see the samples",
                              measurement)
        return measurement


def _model_counts(cases: list[Case], evaluator: Evaluator
                  ) -> tuple[dict[str, Any], str | None]:
    """With a reference tokenizer the cases' lengths are reference tokens: each prompt counted
    in the model's own tokenizer too, for the results, and why the cell is skipped when the
    model's count plus the generation budget exceeds its window (the reference count may
    fit); None when it fits."""
    model = evaluator.model
    reference: ReferenceTokenizer | None = evaluator.reference
    assert reference is not None
    counts = [model.renderer.count(case.prompt) for case in cases]
    apart = reference.far_from(counts, [case.prompt_tokens for case in cases])
    if apart is not None and not evaluator.said_length_ratio:
        evaluator.said_length_ratio = True  # once per process: it holds for every cell
        warnings.warn(ReferenceLengthWarning(apart), stacklevel=1)
    totals = [count + case.max_new_tokens for count, case in zip(counts, cases, strict=True)]
    metrics = {
        "length_tokenizer": reference.label,
        "input_tokens_model_mean": round(sum(counts) / max(len(counts), 1), 1),
        "input_tokens_model_max": max(totals, default=0),
    }
    longest = max(range(len(cases)), key=totals.__getitem__, default=None)
    if longest is None or totals[longest] <= model.context_window:
        return metrics, None
    case = cases[longest]
    return metrics, (
        f"case {case.index} is {case.total_tokens} tokens of the reference tokenizer "
        f"{reference.path} but {totals[longest]} tokens of the model (prompt + "
        f"{case.max_new_tokens} to generate), beyond the model's context window of "
        f"{model.context_window} tokens")
