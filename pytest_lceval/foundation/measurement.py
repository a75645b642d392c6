"""What a suite measured for one cell, and the one place a cell's result is made from it; the
scores of a cell's outputs (``Scored``) and a mean's interval (``mean_ci``), which it derives.

A suite's ``measure`` returns a :class:`Measurement` (or raises ``CellSkipped``/``CellRefused``
with what it measured before it stopped); ``record`` writes it into the result the core made for
the cell, and derives what every suite would otherwise compute on its own: the case count, the
mean and its interval, the token summary. So a suite never touches the 29 fields of
``CellResult``, and every suite's cells read the same way in results and reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from ..results.cells import CellResult


@dataclass
class Scored:
    """A cell's outputs scored, by the task's metric or by the judge (the run's
    ``Evaluator.score``), and the numbers that say how they were judged."""

    scores: list[float | None]
    metrics: dict[str, Any] = field(default_factory=dict)
    judge: str = ""
    """The judge's identity ("" for rule-scored tasks)."""


@dataclass(frozen=True)
class Measurement:
    """One cell's numbers as its suite measured them; every field may stay empty (a cell
    skipped before any case was asked keeps only its notes)."""

    scores: Sequence[float] = ()
    """Per scored case, in case order: the mean, its interval and paired comparisons read
    them."""
    case_keys: Sequence[str] = ()
    """Per scored case, the hash of its request: two runs' cases pair only where these match."""
    prompt_tokens: Sequence[int] = ()
    """Per case asked, the tokens of its prompt."""
    total_tokens: Sequence[int] = ()
    """Per case asked, its prompt plus the tokens it may generate (never above the cell)."""
    depths: Sequence[float | None] = ()
    """Per case, where its key information ended up (percent of the context)."""
    samples: Sequence[dict[str, Any]] = ()
    """The few cases reports show, the lowest-scoring first (``cells.clip_sample``)."""
    logged: Sequence[dict[str, Any]] = ()
    """Every case as ``--lceval-log-samples`` writes it (``sample_log``); written by the core."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """The suite's own numbers and notes (filter counts, t-test, chat template...)."""
    source: str | None = None
    """Where the text came from, when measuring told (None keeps the suite's ``source``)."""
    depth: float | None = None
    """The cell's depth, when only measuring tells it (a Task Haystack stream position)."""
    judge: str = ""
    """The judge that scored the cases, as spec@fingerprint; "" for rule-scored cells."""
    seconds_build: float = 0.0
    seconds_model: float = 0.0
    seconds_score: float = 0.0
    model_requests: int = 0
    """Requests that reached the model (0 when the store had every answer)."""


def mean_ci(scores: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and a two-sided CI: Wilson for 0/1 scores, Student t for graded ones (clipped 0..1).

    Wilson rather than the normal interval because cells are small (N = 10..100) and scores
    often sit at 0 or 1, where the normal interval collapses to a point.
    """
    values = np.asarray(scores, dtype=float)
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = float(values.mean())
    if np.all((values == 0.0) | (values == 1.0)):
        interval = stats.binomtest(int(values.sum()), n).proportion_ci(level, method="wilson")
        return mean, float(interval.low), float(interval.high)
    if n == 1 or float(values.std()) == 0.0:
        return mean, mean, mean
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * values.std(ddof=1) / math.sqrt(n))
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def record(result: CellResult, measurement: Measurement) -> None:
    """Write ``measurement`` into the core's ``result`` for the cell: the only writer of a
    result's measured fields."""
    scores = list(measurement.scores)
    result.scores, result.n = scores, len(scores)
    result.score, result.ci_low, result.ci_high = mean_ci(scores)
    result.case_keys = list(measurement.case_keys)
    prompts = measurement.prompt_tokens
    result.input_tokens_mean = sum(prompts) / max(len(prompts), 1)
    result.input_tokens_max = max(measurement.total_tokens, default=0)
    result.depths_achieved = list(measurement.depths)
    result.samples = list(measurement.samples)
    result.metrics.update(measurement.metrics)
    if measurement.source is not None:
        result.source = measurement.source
    if measurement.depth is not None:
        result.depth = measurement.depth
    result.judge = measurement.judge
    result.seconds_build = measurement.seconds_build
    result.seconds_model = measurement.seconds_model
    result.seconds_score = measurement.seconds_score
    result.model_requests = measurement.model_requests
