"""Running one cell: build its cases, answer them through the store, score, judge, record."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .chat_choice import renderer_for
from .data import DataSource
from .grid import Cell, format_length
from .models.stored import StoredModel
from .prior_knowledge import exclude_known
from .progress import CellProgress
from .records import Case
from .reference_tokenizer import ReferenceTokenizer, ReferenceTokenizerError, load_reference
from .results import CellResult, Judgement, append_result
from .settings import Settings
from .stats import mean_ci
from .tasks.base import BuildContext, CellDoesNotFit, GenerationTask, get_task
from .workers import worker_label

SAMPLES_KEPT = 3
"""Prompts/outputs kept per cell for reports."""
SAMPLE_CHARS = 600
"""Characters kept of each prompt's head and tail, and of each output."""


@dataclass
class Evaluator:
    """Session-wide state that every cell needs; one per process (per xdist worker)."""

    config: pytest.Config
    settings: Settings
    model: StoredModel
    data: DataSource
    run_dir: Path

    def context_for(self, task: GenerationTask) -> BuildContext:
        """The build context with the rendering ``task`` gets (see chat_choice)."""
        renderer = renderer_for(self.model.renderer, self.settings.chat_template, task)
        if self.reference is not None:  # lengths in the reference tokenizer's tokens
            return self.reference.build_context(renderer, self.data, self.settings.seed)
        return BuildContext(self.model.tokenizer, renderer, self.data, self.settings.seed)

    @functools.cached_property
    def reference(self) -> ReferenceTokenizer | None:
        """The --lceval-ref-tokenizer, loaded once per process; None without the option."""
        if self.settings.ref_tokenizer is None:
            return None
        try:
            return load_reference(self.settings.ref_tokenizer)
        except ReferenceTokenizerError as exc:
            pytest.fail(f"pytest-lceval: {exc}", pytrace=False)

    def new_result(self, nodeid: str, cell: Cell, source: str) -> CellResult:
        return CellResult(
            nodeid=nodeid, suite=cell.suite, task=cell.task, length=cell.length,
            depth=cell.depth, extra=dict(cell.extra), model=self.settings.model,
            fingerprint=self.model.fingerprint, seed=self.settings.seed, source=source,
        )

    def judge(self, result: CellResult) -> None:
        """Collect every criterion's judgement and set the outcome."""
        hook = self.config.hook.pytest_lceval_judge
        judgements: list[Judgement] = [j for j in hook(result=result, evaluator=self) if j]
        result.judgements = sorted(judgements, key=lambda j: j.criterion)
        failed = [j for j in result.judgements if not j.passed]
        undefined = [j for j in result.judgements if j.skip]
        result.outcome = "failed" if failed else "skipped" if undefined else "passed"
        result.reason = "; ".join(j.message for j in failed or undefined)


class CellRun:
    """The per-test face of the evaluator: ``lc_eval.run(cell)`` then ``lc_eval.check(result)``."""

    def __init__(self, evaluator: Evaluator, nodeid: str,
                 record_property: Callable[[str, object], None]) -> None:
        self.evaluator = evaluator
        self.nodeid = nodeid
        self.record_property = record_property
        self.results: list[CellResult] = []
        """This test's finished or skipped cells, for per-test report extras (html.py)."""

    def run(self, cell: Cell, task: GenerationTask | None = None) -> CellResult:
        """Measure a generation cell; skips (recording why) when the cell cannot fit."""
        evaluator = self.evaluator
        model = evaluator.model
        task = task or get_task(cell.task)
        result = evaluator.new_result(self.nodeid, cell, evaluator.data.origin("pg_essays"))
        if cell.length > model.context_window and evaluator.reference is None:
            self.skip(result, f"cell length {cell.length} tokens exceeds the model's context "
                              f"window of {model.context_window} tokens")
        started = time.perf_counter()
        context = evaluator.context_for(task)
        result.metrics["chat_template"] = "on" if context.renderer.uses_template else "off"
        try:
            cases = task.build(cell, context)
        except CellDoesNotFit as exc:
            self.skip(result, str(exc))
        result.seconds_build = time.perf_counter() - started
        if evaluator.reference is not None:
            self._count_for_model(result, cases, evaluator.reference)
        result.source = cases[0].meta.get("source", result.source) if cases else result.source

        before = model.calls.requests
        started = time.perf_counter()
        known = exclude_known(model, task, cases, context,
                              evaluator.settings.prior_knowledge_threshold)
        result.metrics.update(known.metrics)
        if cases and not known.kept:
            self.skip(result, known.reason_all_excluded())
        cases = known.kept
        chances = [case.meta["chance"] for case in cases if "chance" in case.meta]
        if chances:  # a uniform guess's expected score over the scored cases
            result.metrics["chance"] = round(sum(chances) / len(chances), 6)
        progress = CellProgress(f"[{worker_label()}] {self.nodeid}")
        try:
            generations = model.generate([case.request() for case in cases], progress)
        finally:
            progress.close()
        result.seconds_model = time.perf_counter() - started
        result.model_requests = model.calls.requests - before

        started = time.perf_counter()
        scores = [task.score(g.text, case) for g, case in zip(generations, cases, strict=True)]
        result.seconds_score = time.perf_counter() - started

        result.n = len(cases)
        result.scores = scores
        result.score, result.ci_low, result.ci_high = mean_ci(scores)
        result.case_keys = [case.request().key() for case in cases]
        result.input_tokens_mean = sum(c.prompt_tokens for c in cases) / max(len(cases), 1)
        result.input_tokens_max = max((c.total_tokens for c in cases), default=0)
        result.depths_achieved = [case.depth for case in cases]
        result.samples = [
            {"prompt": clip_sample(case.prompt), "gold": list(case.gold),
             "output": g.text[:SAMPLE_CHARS], "score": s}
            for case, g, s in list(zip(cases, generations, scores, strict=True))[:SAMPLES_KEPT]
        ]
        return self.finish(result)

    def _count_for_model(self, result: CellResult, cases: list[Case],
                         reference: ReferenceTokenizer) -> None:
        """With a reference tokenizer the cases' lengths are reference tokens: count each prompt
        in the model's own tokenizer too, record both, and skip the cell when the model's count
        plus the generation budget exceeds its window (the reference count may fit)."""
        model = self.evaluator.model
        counts = [model.renderer.count(case.prompt) for case in cases]
        totals = [count + case.max_new_tokens for count, case in zip(counts, cases, strict=True)]
        result.metrics.update({
            "length_tokenizer": reference.label,
            "input_tokens_model_mean": round(sum(counts) / max(len(counts), 1), 1),
            "input_tokens_model_max": max(totals, default=0),
        })
        longest = max(range(len(cases)), key=totals.__getitem__, default=None)
        if longest is not None and totals[longest] > model.context_window:
            case = cases[longest]
            self.skip(result, (
                f"case {case.index} is {case.total_tokens} tokens of the reference tokenizer "
                f"{reference.path} but {totals[longest]} tokens of the model (prompt + "
                f"{case.max_new_tokens} to generate), beyond the model's context window of "
                f"{model.context_window} tokens"))

    def finish(self, result: CellResult) -> CellResult:
        """Judge, record properties and write the results line; used by every suite."""
        self.evaluator.judge(result)
        self.results.append(result)
        self._record(result)
        append_result(self.evaluator.run_dir, result)
        return result

    def check(self, result: CellResult) -> None:
        """Fail the test with every failed criterion's message."""
        if result.outcome == "failed":
            pytest.fail(f"{result.task} at {format_length(result.length)}: {result.reason}",
                        pytrace=False)
        if result.outcome == "skipped":
            pytest.skip(result.reason)

    def skip(self, result: CellResult, reason: str) -> Any:
        result.outcome, result.reason = "skipped", reason
        self.results.append(result)
        self.record_property("lceval_outcome", "skipped")
        append_result(self.evaluator.run_dir, result)
        pytest.skip(reason)

    def _record(self, result: CellResult) -> None:
        properties: dict[str, Any] = {
            "score": round(result.score, 6), "ci_low": round(result.ci_low, 6),
            "ci_high": round(result.ci_high, 6), "n": result.n, "task": result.task,
            "length": result.length, "depth": result.depth,
            "input_tokens_mean": round(result.input_tokens_mean, 1),
            "input_tokens_max": result.input_tokens_max,
            "depth_achieved_mean": _mean([d for d in result.depths_achieved if d is not None]),
            "seconds_build": round(result.seconds_build, 3),
            "seconds_model": round(result.seconds_model, 3),
            "seconds_score": round(result.seconds_score, 3),
            "model_requests": result.model_requests, "source": result.source,
            "lceval_outcome": result.outcome,
        }
        for name, value in result.metrics.items():
            if isinstance(value, (int, float, str, bool)) or value is None:
                properties[name] = value
        for judgement in result.judgements:
            properties.update(judgement.properties)
        for name, value in properties.items():
            self.record_property(name, value)


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def clip_sample(text: str) -> str:
    """A prompt or output cut to its start and end for reports: samples show what the model
    read without writing 128k-token prompts into every result line."""
    if len(text) <= 2 * SAMPLE_CHARS:
        return text
    return f"{text[:SAMPLE_CHARS]}\n[... {len(text) - 2 * SAMPLE_CHARS} characters ...]\n" \
           f"{text[-SAMPLE_CHARS:]}"

