"""The steps every cell takes, whatever its suite: a new result, the suite's measurement, the
criteria's needs measured, judging, recording. Skipped and refused cells take the same steps
(without judging), so they keep their results line and their report extras. What judges a cell
comes from the wiring (:class:`JudgesCells`, the verdicts' ``CellJudge``): the run loop does not
import the verdicts above it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import pytest

from ..foundation.criterion import Evidence, Need, VerdictPolicy
from ..foundation.grid import Cell, format_length
from ..results.cells import CellResult, append_result
from ..results.score_metric import range_text
from .evaluation import Evaluator
from .lookahead import Lookahead
from .suite import CellRefused, CellSkipped, Suite

NEEDS_REQUESTS = "needs_model_requests"
"""Metric: model requests that measuring the criteria's needs took in this cell (0 when
another cell, process or run measured them first)."""


class JudgesCells(Protocol):
    """What judges a measured cell with its suite's policy: the needs to measure first, then the
    verdict (``verdicts.criteria.CellJudge``: the session's criteria and cell-level hook)."""

    def needs(self, result: CellResult, policy: VerdictPolicy) -> Sequence[Need]: ...

    def assess(self, result: CellResult, policy: VerdictPolicy, evidence: Evidence) -> None: ...


class CellRun:
    """The per-test face of the evaluator: ``lc_eval.check(lc_eval.run(lc_cell))``."""

    def __init__(self, evaluator: Evaluator, lookahead: Lookahead,
                 suites: Mapping[str, Suite], judge: JudgesCells, nodeid: str,
                 record_property: Callable[[str, object], None]) -> None:
        self.evaluator = evaluator
        self.lookahead = lookahead
        self.suites = suites
        self.judge = judge
        self.nodeid = nodeid
        self.record_property = record_property
        self.results: list[CellResult] = []
        """This test's cells, for per-test report extras (html.py)."""

    def run(self, cell: Cell) -> CellResult:
        """Measure the cell with its suite (with the cells after it, see lookahead), then
        judge it with the suite's criteria."""
        suite = self.suites[cell.suite]
        evaluator = self.evaluator
        measured = self.lookahead.measure(self.nodeid, cell)
        result = measured.result
        if isinstance(measured.problem, CellSkipped):
            result.outcome, result.reason = "skipped", str(measured.problem)
        elif isinstance(measured.problem, CellRefused):
            result.outcome, result.reason = "failed", str(measured.problem)
        else:
            needs = self.judge.needs(result, suite.policy)
            before = evaluator.model.calls.here
            evidence = evaluator.measure_needs(needs)
            if needs:
                result.metrics[NEEDS_REQUESTS] = evaluator.model.calls.here - before
            self.judge.assess(result, suite.policy, evidence)
        self.results.append(result)
        self._record(result)
        append_result(evaluator.run_dir, result)
        return result

    def check(self, result: CellResult) -> None:
        """Fail or skip the test as the result says, with every failed criterion's message."""
        if result.outcome == "failed":
            where = f" at {format_length(result.length)}" if result.length else ""
            pytest.fail(f"{result.task}{where}: {result.reason}", pytrace=False)
        if result.outcome == "skipped":
            pytest.skip(result.reason)

    def _record(self, result: CellResult) -> None:
        named = {"metric": result.metric, "metric_range": range_text(result.metric_range)}
        if result.outcome == "skipped" and not result.judgements:  # nothing was measured
            for name, value in {**named, "lceval_outcome": "skipped"}.items():
                self.record_property(name, value)
            return
        properties: dict[str, Any] = {
            "score": round(result.score, 6), **named, "ci_low": round(result.ci_low, 6),
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
            if value is not None:  # JUnit XML would say "None"; absent means not applicable
                self.record_property(name, value)


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None
