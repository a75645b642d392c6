"""How far two raters of the same outputs agree: a second judge (Cohen's kappa on each rubric
scale, the score difference), or the judge and the task's rule metric (Spearman's rho, the
mean gap), so that a judge that rates at random or not at all shows in the cell's numbers."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

from ..tasks.judged import Field


def kappa(first: Sequence[int], second: Sequence[int], field: Field) -> float | None:
    """Cohen's kappa of two judges' ratings on ``field``'s scale, quadratically weighted when
    the scale has more than two points (a 1-vs-3 disagreement on correctness weighs more than a
    2-vs-3 one); None with no pairs or when both judges gave one rating throughout (0/0)."""
    from sklearn.metrics import cohen_kappa_score  # only a judged run with two judges pays

    assert field.high is not None, "kappa compares ratings on a fixed scale"
    if not first:
        return None
    labels = list(range(field.low, field.high + 1))
    weights = "quadratic" if len(labels) > 2 else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined (0/0) kappa: None below
        value = float(cohen_kappa_score(first, second, labels=labels, weights=weights))
    return None if math.isnan(value) else round(value, 4)


def rank_correlation(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Spearman's rho; None for fewer than three pairs or a constant side."""
    if len(first) < 3 or len(set(first)) < 2 or len(set(second)) < 2:
        return None
    from scipy.stats import spearmanr  # only a judged run pays for the import

    return round(float(spearmanr(first, second).statistic), 4)


def mean_difference(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Mean of ``second - first`` over the pairs; None without pairs."""
    if not first:
        return None
    return round(sum(b - a for a, b in zip(first, second, strict=True)) / len(first), 4)
