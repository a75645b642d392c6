"""Per-case scores, each 0..1. SQuAD-style normalisation as HELMET's SubEM uses it."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from ..foundation.answer_text import normalize_answer


def substring_exact_match(output: str, golds: Sequence[str]) -> float:
    """HELMET's SubEM: 1 if any normalised gold is a substring of the normalised output."""
    normalized = normalize_answer(output)
    return float(any(normalize_answer(gold) in normalized for gold in golds))


def string_match_all(output: str, golds: Sequence[str]) -> float:
    """RULER's string_match_all: the fraction of golds found as lower-case substrings."""
    if not golds:
        raise ValueError("string_match_all needs at least one gold string")
    lowered = output.lower()
    return sum(gold.lower() in lowered for gold in golds) / len(golds)


def string_match_part(output: str, golds: Sequence[str]) -> float:
    """RULER's string_match_part: 1 if any gold is a lower-case substring (for MQ-style tasks)."""
    lowered = output.lower()
    return float(any(gold.lower() in lowered for gold in golds))


def rouge_f1(kind: str, prediction: str, reference: str, stemmer: bool) -> float:
    """ROUGE F1 of ``kind`` ("rougeL", "rougeLsum") by the ``rouge-score`` package."""
    return float(_rouge_scorer(kind, stemmer).score(reference, prediction)[kind].fmeasure)


@cache
def _rouge_scorer(kind: str, stemmer: bool) -> Any:
    # Imported at the first score: rouge-score imports nltk (1.4 s), which a run that scores no
    # summary or free answer never needs.
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer([kind], use_stemmer=stemmer)
