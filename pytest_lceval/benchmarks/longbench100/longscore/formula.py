"""LongScore's formula (100-LongBench's paper, §3.2; its analysis/utils.py): LC =
(S - Base) / Base, the relative change of a long cell's score against the base ability, and
its interval."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

LONGSCORE_RESAMPLES = 2000
"""Bootstrap replicates behind a LongScore interval: enough for stable 2.5/97.5 percentiles."""


def longscore(score: float, base: float, floor: float) -> float | None:
    """LC = (S - Base) / Base in percent; None (undefined) when Base is below ``floor`` or not
    positive, because a ratio to a near-zero base is noise, not a measurement."""
    if math.isnan(score) or math.isnan(base) or base <= 0.0 or base < floor:
        return None
    return 100.0 * (score - base) / base


def stratified_mean(strata: Sequence[Sequence[float]]) -> float:
    """Mean of the strata's means (each base length weighs the same, as in the paper's
    (S_2k + S_4k + S_6k) / 3); NaN when no stratum has scores."""
    means = [float(np.mean(s)) for s in strata if len(s)]
    return float(np.mean(means)) if means else math.nan


def longscore_ci(scores: Sequence[float], base_strata: Sequence[Sequence[float]], floor: float,
                 level: float = 0.95, resamples: int = LONGSCORE_RESAMPLES,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile interval of LC (percent) carrying the uncertainty of both S_l and Base:
    replicate means of the long cell and of each base stratum are drawn independently (they are
    different cases, so there is nothing to pair) and LC is computed per replicate. Replicates
    whose base falls below ``floor`` have no LC and are left out. (NaN, NaN) when no replicate
    is defined.

    How a set of scores is redrawn (``_replicate_means``): 0/1 scores from the Jeffreys
    posterior of their rate, graded scores by resampling their cases. Resampling 0/1 cases
    cannot move a cell whose cases all agree: five zeros give 0 in every replicate, so an LC
    of -100 % read as certain (a point interval) where the cell's own interval reaches 0.43.
    """
    rng = np.random.default_rng(seed)
    filled = [s for s in base_strata if len(s)]
    if not len(scores) or not filled:
        return math.nan, math.nan
    long_means = _replicate_means(rng, scores, resamples)
    base_means = np.mean([_replicate_means(rng, s, resamples) for s in filled], axis=0)
    defined = (base_means > 0.0) & (base_means >= floor)
    if not defined.any():
        return math.nan, math.nan
    ratios = 100.0 * (long_means[defined] - base_means[defined]) / base_means[defined]
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(low), float(high)


def _replicate_means(rng: np.random.Generator, scores: Sequence[float],
                     resamples: int) -> np.ndarray:
    """``resamples`` draws of the mean of non-empty ``scores`` (shape: [resamples]).

    0/1 scores (k of n right): Beta(k + 1/2, n - k + 1/2), the Jeffreys posterior, whose
    central 95 % is a binomial interval of the same family as the Wilson interval a cell
    reports (``mean_ci``); it stays wide where k is 0 or n, as a bootstrap of the cases does
    not. Graded scores: the means of cases resampled with replacement (percentile bootstrap).
    """
    values = np.asarray(scores, dtype=float)
    if np.all((values == 0.0) | (values == 1.0)):
        right = float(values.sum())
        return rng.beta(right + 0.5, len(values) - right + 0.5, size=resamples)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))  # [resamples, n]
    return values[picks].mean(axis=1)
