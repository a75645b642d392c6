"""What a score is: every task (and every suite whose cells are not a task's) declares the metric
its scores are on, so that each result line, summary row, JUnit property and HTML cell names it
beside the number. A score of 0.4 means nothing until one knows it is NDCG@10 and not SubEM.

The declaration sits on the task (``metric = SUBEM``); a judged task's cells are scored by its
rubric, which declares its own (``Rubric.metric``, ``tasks/judged.py``). The common metrics are
named once here, with the words that say what they count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ScoreMetric:
    """A metric's name as results show it, its range, and in a few words what it counts."""

    name: str
    about: str
    low: float = 0.0
    high: float = 1.0
    """``math.inf`` when unbounded above (LongScore)."""
    unit: str = ""
    """'' for a score on its own scale, '%' for a percentage."""

    @property
    def range(self) -> list[float | None]:
        """[low, high] for JSON, an unbounded end as None."""
        return [_finite(self.low), _finite(self.high)]

    @property
    def label(self) -> str:
        """'ndcg@10 (0–1)': what reports print beside a score."""
        return f"{self.name} ({range_text(self.range)}{' ' + self.unit if self.unit else ''})"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def range_text(bounds: list[float | None]) -> str:
    """'0–1' from [low, high]; an unbounded end (None) is '-∞' or '∞'."""
    low, high = bounds
    return f"{'-∞' if low is None else f'{low:g}'}–{'∞' if high is None else f'{high:g}'}"


STRING_MATCH_ALL = ScoreMetric(
    "string_match_all", "the share of the gold strings found in the output (lower case)")
"""RULER's ``string_match_all``."""
SUBEM = ScoreMetric(
    "subem", "substring exact match: 1 when a normalised gold answer is in the normalised output")
"""HELMET's substring exact match (SubEM)."""
NDCG_AT_10 = ScoreMetric(
    "ndcg@10", "trec_eval's NDCG@10 of the ranking in the output against the TREC qrels "
               "(0 when no ranking can be read)")
ROUGE_L_F1 = ScoreMetric("rouge_l_f1", "ROUGE-L F1 against the best-matching gold answer")
ROUGE_LSUM_F1 = ScoreMetric("rouge_lsum_f1", "ROUGE-Lsum F1 against the reference summary")
QA_F1 = ScoreMetric("qa_f1", "token F1 of the normalised answer against the best gold answer")
STR_EM = ScoreMetric("str_em", "ALCE's STR-EM: the share of the question's readings whose short "
                               "answer is in the output")
RECALL_AT_5 = ScoreMetric("recall@5", "ALCE's QAMPARI recall-5: the share of gold list items "
                                      "found, full marks at 5")
LABEL_ACCURACY = ScoreMetric("accuracy", "1 when the parsed label equals the gold label")
"""HELMET's ICL ``exact_match``."""
CHOICE_ACCURACY = ScoreMetric("accuracy", "1 when the answer names the correct option "
                                          "(∞Bench's choice exact_match)")
"""HELMET's scoring of ∞Bench's multiple-choice questions."""
NUMBER_ACCURACY = ScoreMetric("accuracy", "1 when the first number of the answer is the gold one")
"""100-LongBench's ``acc_score``."""
