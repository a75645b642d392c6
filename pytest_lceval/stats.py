"""Statistics behind verdicts: confidence intervals of cell means, paired comparisons."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

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


# -- paired comparison against a saved run (--lceval-compare) ---------------------------------

ALPHA = 0.05
"""Two-sided significance level of the paired regression test."""
POWER = 0.8
"""Power at which the minimum detectable drop is stated."""


@dataclass(frozen=True)
class PairedComparison:
    """One cell's per-case scores against a saved run's scores for the same cases."""

    test: str
    """'mcnemar-exact' (every score 0/1) or 'paired-t' (graded scores)."""
    n: int
    """Cases paired (present in both runs)."""
    baseline: float
    current: float
    difference: float
    """current - baseline; negative means worse."""
    ci_low: float
    ci_high: float
    """Two-sided (1 - alpha) interval of the difference."""
    p_value: float
    """Two-sided p of 'no difference'; NaN when there are too few cases to test."""
    mde: float
    """Smallest drop this test detects with 80 % power at this N (see minimum_detectable_drop)."""
    worse: int
    """Cases whose score went down."""
    better: int
    """Cases whose score went up."""
    min_drop: float
    alpha: float = ALPHA

    @property
    def significant(self) -> bool:
        return not math.isnan(self.p_value) and self.p_value < self.alpha

    @property
    def regressed(self) -> bool:
        """Fail only when the drop is both significant and at least ``min_drop``: a
        significant drop of half a point on N = 10 000 cases is not worth failing a release,
        and a 20-point drop on five cases is not evidence."""
        return self.significant and -self.difference >= self.min_drop - 1e-12

    @property
    def status(self) -> str:
        """'regressed' (the failing one), 'small-drop' (significant, below min_drop),
        'improved', 'inconclusive' (a difference, not significant) or 'unchanged' (none)."""
        if self.difference == 0:
            return "unchanged"
        if not self.significant:
            return "inconclusive"
        if self.difference > 0:
            return "improved"
        return "regressed" if self.regressed else "small-drop"


def paired_comparison(baseline: Sequence[float], current: Sequence[float], min_drop: float,
                      alpha: float = ALPHA) -> PairedComparison:
    """Paired test of current vs baseline scores, case i against case i.

    0/1 scores get the exact McNemar test: only discordant pairs carry information, and under
    'no difference' each is equally likely to go either way (a binomial test at 1/2). Graded
    scores get the paired t-test; it is deterministic (a bootstrap would need its own seed) and
    sound for bounded scores at the N of a cell.
    """
    base = np.asarray(baseline, dtype=float)
    cur = np.asarray(current, dtype=float)
    if base.shape != cur.shape:
        raise ValueError(f"paired scores need equal lengths, got {len(base)} and {len(cur)}")
    n = len(base)
    if n == 0:
        raise ValueError("no paired cases to compare")
    worse, better = int(np.sum(cur < base)), int(np.sum(cur > base))
    binary = bool(np.all(np.isin(base, (0.0, 1.0))) and np.all(np.isin(cur, (0.0, 1.0))))
    test = _mcnemar if binary else _paired_t
    name, p_value, ci_low, ci_high, sd = test(base, cur, worse, better, alpha)
    return PairedComparison(
        test=name, n=n, baseline=float(base.mean()), current=float(cur.mean()),
        difference=float(cur.mean() - base.mean()), ci_low=ci_low, ci_high=ci_high,
        p_value=p_value, mde=minimum_detectable_drop(sd, n, alpha), worse=worse, better=better,
        min_drop=min_drop, alpha=alpha,
    )


_TestOutcome = tuple[str, float, float, float, float]
"""(test name, p, CI low, CI high, standard deviation of the per-case differences)."""


def _mcnemar(base: np.ndarray, cur: np.ndarray, worse: int, better: int,
             alpha: float) -> _TestOutcome:
    """Exact McNemar: ``worse`` ~ Binomial(discordant, 1/2) under 'no difference'. The null is
    symmetric, so the two-sided p is twice the smaller tail (what scipy.stats.binomtest returns
    for p = 1/2, computed here without its overhead so that simulations stay fast). The CI is the
    exact (Clopper-Pearson) interval of P(worse | discordant) mapped to the difference, so it
    excludes 0 exactly when p < alpha."""
    n, discordant = len(base), worse + better
    # Standard deviation of d_i in {-1, 0, 1}: E[d^2] - E[d]^2.
    sd = math.sqrt(max(discordant / n - ((better - worse) / n) ** 2, 0.0))
    if discordant == 0:
        return "mcnemar-exact", 1.0, 0.0, 0.0, sd
    p_value = min(1.0, 2.0 * float(stats.binom.cdf(min(worse, better), discordant, 0.5)))
    share_low = float(stats.beta.ppf(alpha / 2, worse, better + 1)) if worse else 0.0
    share_high = float(stats.beta.ppf(1 - alpha / 2, worse + 1, better)) if better else 1.0
    scale = discordant / n
    return ("mcnemar-exact", p_value, scale * (1 - 2 * share_high), scale * (1 - 2 * share_low),
            sd)


def _paired_t(base: np.ndarray, cur: np.ndarray, worse: int, better: int,
              alpha: float) -> _TestOutcome:
    """Paired t on d = current - baseline (scipy.stats.ttest_rel's statistic, written out so
    that simulations stay fast). Zero variance is decided explicitly, not left to NaN:
    identical runs are 'no difference' (p = 1), a constant non-zero shift is decisive (p = 0)."""
    diff = cur - base
    n, mean = len(diff), float(diff.mean())
    if n < 2:
        return "paired-t", math.nan, math.nan, math.nan, 0.0
    sd = float(diff.std(ddof=1))
    if sd == 0.0:
        return "paired-t", 1.0 if mean == 0.0 else 0.0, mean, mean, 0.0
    error = sd / math.sqrt(n)
    p_value = float(2.0 * stats.t.sf(abs(mean) / error, n - 1))
    half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * error
    return "paired-t", p_value, mean - half, mean + half, sd


def minimum_detectable_drop(sd: float, n: int, alpha: float = ALPHA,
                            power: float = POWER) -> float:
    """The drop detected with ``power`` at two-sided ``alpha``, given the per-case differences'
    standard deviation ``sd`` observed in this comparison (normal approximation).

    Never below the granularity of the exact test: the fewest cases that must all move the same
    way before p < alpha (6 at alpha = 0.05), divided by N. This also gives identical runs
    (sd = 0) an honest answer instead of 0; with fewer cases than that, no drop is detectable
    (inf).
    """
    fewest = 1
    while 2 * 0.5**fewest >= alpha:
        fewest += 1
    if n < fewest:
        return math.inf
    normal = NormalDist()
    spread = (normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)) * sd / math.sqrt(n)
    return float(max(spread, fewest / n))


# -- LongScore (100-LongBench): relative change against the base ability ----------------------

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
    """Percentile bootstrap interval of LC (percent) carrying the uncertainty of both S_l and
    Base: the long cell's cases and each base stratum's cases are resampled independently (they
    are different cases, so there is nothing to pair). Replicates whose base falls below
    ``floor`` have no LC and are left out. (NaN, NaN) when no replicate is defined.
    """
    rng = np.random.default_rng(seed)
    filled = [s for s in base_strata if len(s)]
    if not len(scores) or not filled:
        return math.nan, math.nan
    long_means = _resampled_means(rng, scores, resamples)
    base_means = np.mean([_resampled_means(rng, s, resamples) for s in filled], axis=0)
    defined = (base_means > 0.0) & (base_means >= floor)
    if not defined.any():
        return math.nan, math.nan
    ratios = 100.0 * (long_means[defined] - base_means[defined]) / base_means[defined]
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(low), float(high)


def _resampled_means(rng: np.random.Generator, scores: Sequence[float],
                     resamples: int) -> np.ndarray:
    """``resamples`` bootstrap means of non-empty ``scores`` (shape: [resamples])."""
    values = np.asarray(scores, dtype=float)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))  # [resamples, n]
    return values[picks].mean(axis=1)
