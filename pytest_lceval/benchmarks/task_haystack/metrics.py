"""What a Task Haystack cell measured, as one typed record: the runner writes it, the verdict,
the reports and the figures read it. In results.jsonl it is the cell's ``metrics`` object (the
same keys as before the record existed, so older run folders still read)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...results.cells import CellResult


@dataclass(frozen=True)
class HaystackMetrics:
    setting: str
    """Controlled setting: recall, random, repeat, paraphrase (or 'single' baselines)."""
    n_task: int
    n_shot: int
    length_setting: str
    """``<n_task>t<n_shot>s``."""
    permutation: int
    stream_index: int | None
    """The test task's position in the stream; None in settings without a stream."""
    stream: list[str]
    verdict: str
    """FAIL, PASS or EXCEL (paired t-test of Lifelong against Single-task accuracy)."""
    verdict_value: int
    t: float
    p: float
    verdict_note: str
    s_acc: float
    l_acc: float
    s_acc_by_resample: dict[str, float]
    l_acc_by_resample: dict[str, float]
    s_correct: dict[str, str]
    """Per resample, per-case correctness bits ('0110...')."""
    l_correct: dict[str, str]
    ood_rate: float
    """Share of Lifelong cases whose most likely next token starts none of the options."""
    ood_rate_single: float
    rank_method: str
    no_prediction: int
    no_prediction_single: int
    rank_note: str
    test_size: int
    resamples: int
    offline_pack: bool
    reduced_defaults: str
    seam_exact: bool
    """Prefix and suffix tokenized apart give the joined prompt's ids."""
    single_tokens_mean: float
    n_repeat_by_resample: dict[str, int] | None = None
    """Repeats of the task block per resample (repeat and random settings only)."""

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if self.n_repeat_by_resample is None:
            del data["n_repeat_by_resample"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HaystackMetrics:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def of(cls, result: CellResult) -> HaystackMetrics | None:
        """The record of a measured Task Haystack cell; None for a refused or skipped one."""
        return cls.from_json(result.metrics) if "verdict" in result.metrics else None

    @property
    def t_text(self) -> str:
        return _number(self.t)

    @property
    def p_text(self) -> str:
        return _number(self.p)


class Measured(NamedTuple):
    """A cell that reached a verdict, with its metrics read once: the reports need both the
    result (task, depth, tokens, node id) and what it measured."""

    result: CellResult
    metrics: HaystackMetrics


def measured(results: Iterable[CellResult]) -> list[Measured]:
    """Results that reached a verdict (not skipped, not refused)."""
    return [Measured(r, m) for r in results if (m := HaystackMetrics.of(r)) is not None]


def _number(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.3g}"
