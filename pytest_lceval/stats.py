"""Statistics behind verdicts: confidence intervals of cell means."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats


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
