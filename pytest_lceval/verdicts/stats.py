"""Statistics behind verdicts: paired comparisons with a saved run, what a plan can detect
(a cell mean's own interval is ``foundation.measurement.mean_ci``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np
from scipy import stats

# -- paired comparison against a saved run (--lceval-compare) ---------------------------------
#
# One footing for every number of a comparison: the verdict, its p, its interval and its minimum
# detectable drop all come from the exact paired test of the per-case differences (the sign of
# each pair's difference is exchangeable under "no difference"). For 0/1 scores that test is
# the exact McNemar test; for graded scores it is the sign-flip permutation test. Neither can
# reach p < 0.05 with fewer than six cases moving the same way, so with N < 6 nothing is
# detectable and nothing is significant, whatever the scores.

ALPHA = 0.05
"""Two-sided significance level of the paired regression test."""
POWER = 0.8
"""Power at which the minimum detectable drop is stated."""
EXACT_SIGNS = 14
"""Up to this many cases the sign-flip test enumerates every sign pattern (2^14 = 16,384);
beyond, it draws MONTE_CARLO_SIGNS patterns with a fixed seed, so a cell's verdict is the same
in every run."""
MONTE_CARLO_SIGNS = 9999
SCORE_RANGE = (-1.0, 1.0)
"""A difference of two means of 0..1 scores; every interval is clipped to it."""


@dataclass(frozen=True)
class PairedComparison:
    """One cell's per-case scores against a saved run's scores for the same cases."""

    test: str
    """'mcnemar-exact' (every score 0/1) or 'sign-flip' (graded scores)."""
    n: int
    """Cases paired (present in both runs)."""
    baseline: float
    current: float
    difference: float
    """current - baseline; negative means worse."""
    ci_low: float
    ci_high: float
    """Two-sided (1 - alpha) interval of the difference, within [-1, 1]; it excludes 0 exactly
    when p < alpha (see newcombe_paired and inverted_sign_flip)."""
    p_value: float
    """Two-sided p of 'no difference'; NaN when there are too few cases to test."""
    mde: float
    """Smallest drop this test detects with 80 % power at this N (see minimum_detectable_drop);
    inf when N is below fewest_decisive()."""
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
        'improved', 'inconclusive' (cases changed, not significantly) or 'unchanged' (every
        case scored the same in both runs)."""
        if self.worse == self.better == 0:
            return "unchanged"
        if not self.significant:
            return "inconclusive"
        if self.difference > 0:
            return "improved"
        return "regressed" if self.regressed else "small-drop"


def paired_comparison(baseline: Sequence[float], current: Sequence[float], min_drop: float,
                      alpha: float = ALPHA) -> PairedComparison:
    """Paired test of current vs baseline scores, case i against case i (see the section
    comment above)."""
    base = np.asarray(baseline, dtype=float)
    cur = np.asarray(current, dtype=float)
    if base.shape != cur.shape:
        raise ValueError(f"paired scores need equal lengths, got {len(base)} and {len(cur)}")
    n = len(base)
    if n == 0:
        raise ValueError("no paired cases to compare")
    worse, better = int(np.sum(cur < base)), int(np.sum(cur > base))
    binary = bool(np.all(np.isin(base, (0.0, 1.0))) and np.all(np.isin(cur, (0.0, 1.0))))
    test = _mcnemar if binary else _sign_flip
    name, p_value, ci_low, ci_high = test(base, cur, alpha)
    sd = float((cur - base).std()) if n > 1 else 0.0
    return PairedComparison(
        test=name, n=n, baseline=float(base.mean()), current=float(cur.mean()),
        difference=float(cur.mean() - base.mean()), ci_low=ci_low, ci_high=ci_high,
        p_value=p_value, mde=minimum_detectable_drop(sd, n, alpha), worse=worse, better=better,
        min_drop=min_drop, alpha=alpha,
    )


_TestOutcome = tuple[str, float, float, float]
"""(test name, p, CI low, CI high)."""


def _mcnemar(base: np.ndarray, cur: np.ndarray, alpha: float) -> _TestOutcome:
    """Exact McNemar: the cases that got worse ~ Binomial(discordant, 1/2) under 'no
    difference'; the null is symmetric, so the two-sided p is twice the smaller tail (what
    scipy.stats.binomtest returns for p = 1/2, without its overhead, so that simulations stay
    fast). The interval: Newcombe's, widened to the test's own where that is wider
    (``mcnemar_interval``)."""
    both = int(np.sum((base == 1) & (cur == 1)))
    worse = int(np.sum((base == 1) & (cur == 0)))
    better = int(np.sum((base == 0) & (cur == 1)))
    neither = len(base) - both - worse - better
    discordant = worse + better
    p_value = 1.0 if discordant == 0 else \
        min(1.0, 2.0 * float(stats.binom.cdf(min(worse, better), discordant, 0.5)))
    low, high = mcnemar_interval(both, worse, better, neither, alpha)
    return "mcnemar-exact", p_value, low, high


def mcnemar_interval(both: int, worse: int, better: int, neither: int,
                     alpha: float = ALPHA) -> tuple[float, float]:
    """Interval of current - baseline for paired 0/1 scores: the hull of Newcombe's hybrid
    score interval (``newcombe_paired``, the recommended interval for paired proportions) and
    the exact McNemar test's own interval (Clopper-Pearson for the share of discordant cases
    that got worse, scaled by the discordant share).

    Newcombe's covers the difference as it should (the test's own alone conditions on the
    discordant share and undercovers one-way drops badly, down to 50 % at N = 100), but it can
    exclude 0 where the exact test cannot reject (three cases of three worse: p = 0.25). The
    test's own interval excludes 0 exactly when p < alpha, and Newcombe's excludes it whenever
    p < alpha (tests/test_baseline_stats.py checks every table up to N = 60), so the hull
    keeps Newcombe's coverage and agrees with the verdict.
    """
    n = both + worse + better + neither
    share_low, share_high = _worse_share(worse, better, alpha)
    scale = (worse + better) / n
    exact = (scale * (1 - 2 * share_high), scale * (1 - 2 * share_low))
    newcombe = newcombe_paired(both, worse, better, neither, alpha)
    return max(SCORE_RANGE[0], min(exact[0], newcombe[0])), \
        min(SCORE_RANGE[1], max(exact[1], newcombe[1]))


def newcombe_paired(both: int, worse: int, better: int, neither: int,
                    alpha: float = ALPHA) -> tuple[float, float]:
    """Newcombe's (1998) method 10 for the difference of paired proportions, current minus
    baseline: Wilson intervals of the two marginal proportions (scipy), combined with the
    correlation of the pairs (phi, its numerator continuity-corrected as published). It stays
    within [-1, 1]."""
    n = both + worse + better + neither
    p_base, p_cur = (both + worse) / n, (both + better) / n
    base_low, base_high = _wilson(both + worse, n, alpha)
    cur_low, cur_high = _wilson(both + better, n, alpha)
    margins = (both + worse) * (better + neither) * (both + better) * (worse + neither)
    cross = both * neither - worse * better
    corrected = cross - n / 2 if cross > n / 2 else min(cross, 0)
    phi = corrected / math.sqrt(margins) if margins else 0.0
    difference = p_cur - p_base
    down_cur, up_base = p_cur - cur_low, base_high - p_base
    up_cur, down_base = cur_high - p_cur, p_base - base_low
    low = difference - math.sqrt(max(down_cur**2 - 2 * phi * down_cur * up_base + up_base**2, 0))
    high = difference + math.sqrt(max(up_cur**2 - 2 * phi * up_cur * down_base
                                      + down_base**2, 0))
    return max(SCORE_RANGE[0], low), min(SCORE_RANGE[1], high)


@lru_cache(maxsize=4096)
def _worse_share(worse: int, better: int, alpha: float) -> tuple[float, float]:
    """Clopper-Pearson interval of the share of discordant cases that got worse ((0, 0) with
    no discordant case, which the scale then zeroes)."""
    if worse + better == 0:
        return 0.0, 0.0
    low = float(stats.beta.ppf(alpha / 2, worse, better + 1)) if worse else 0.0
    high = float(stats.beta.ppf(1 - alpha / 2, worse + 1, better)) if better else 1.0
    return low, high


@lru_cache(maxsize=4096)
def _wilson(successes: int, n: int, alpha: float) -> tuple[float, float]:
    interval = stats.binomtest(successes, n).proportion_ci(1 - alpha, method="wilson")
    return float(interval.low), float(interval.high)


def _sign_flip(base: np.ndarray, cur: np.ndarray, alpha: float) -> _TestOutcome:
    """The sign-flip permutation test of the mean paired difference (scipy.stats.
    permutation_test with permutation_type='samples' gives the same p; it is computed here on
    one fixed set of sign patterns, so that the interval can invert the very same test and
    simulations stay fast). No distribution is assumed, so a bounded, lumpy score is tested as
    it is (a paired t-test called three cases p = 0.01). The interval: every shift of the
    differences the same test does not reject (``inverted_sign_flip``)."""
    diff = cur - base
    if len(diff) < 2:
        return "sign-flip", math.nan, math.nan, math.nan
    test = SignFlip(diff)
    p_value = test.p(0.0)
    low, high = inverted_sign_flip(test, alpha)
    return "sign-flip", p_value, low, high


class SignFlip:
    """The sign-flip test of 'the mean difference is ``shift``' on paired differences: under it
    each ``difference - shift`` is as likely positive as negative. Exact (every sign pattern)
    up to EXACT_SIGNS cases, else MONTE_CARLO_SIGNS seeded patterns, whose p counts the
    observed pattern too ((1 + hits) / (1 + draws)), as permutation tests do."""

    def __init__(self, differences: np.ndarray) -> None:
        self.differences = differences
        n = len(differences)
        self.exact = n <= EXACT_SIGNS
        if self.exact:
            signs, self._sign_sums = _exact_signs(n)
            self._flipped = signs @ differences  # [patterns]
        else:
            self._flipped, self._sign_sums = _drawn_sign_sums(differences)
        self.patterns = len(self._flipped)

    def p(self, shift: float) -> float:
        observed = abs(float(self.differences.sum()) - shift * len(self.differences))
        null = np.abs(self._flipped - shift * self._sign_sums)
        hits = int(np.sum(null >= observed - 1e-9 * max(1.0, observed)))
        if self.exact:
            return min(1.0, hits / self.patterns)
        return min(1.0, (1 + hits) / (1 + self.patterns))


def inverted_sign_flip(test: SignFlip, alpha: float = ALPHA,
                       steps: int = 30) -> tuple[float, float]:
    """The (1 - alpha) interval of the mean difference: the shifts the test does not reject,
    found by bisection and clipped to [-1, 1]. It excludes 0 exactly when the test rejects 0:
    when it does, the bound on 0's side is sought between the mean and 0; when it does not,
    both bounds are sought beyond 0."""
    mean = float(test.differences.mean())

    def bound(accepted: float, rejected: float) -> float:
        """The last shift accepted on the way from ``accepted`` to ``rejected``."""
        for _ in range(steps):
            middle = (accepted + rejected) / 2
            if test.p(middle) >= alpha:
                accepted = middle
            else:
                rejected = middle
        return accepted

    def outer(accepted: float, edge: float) -> float:
        return edge if test.p(edge) >= alpha else bound(accepted, edge)

    low, high = SCORE_RANGE
    if test.p(0.0) >= alpha:
        return outer(min(mean, 0.0), low), outer(max(mean, 0.0), high)
    if mean < 0:
        return outer(mean, low), bound(mean, 0.0)
    return bound(mean, 0.0), outer(mean, high)


@lru_cache(maxsize=EXACT_SIGNS + 1)
def _exact_signs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every sign pattern of n cases ([2^n, n] of +-1) and their row sums [2^n]."""
    codes = np.arange(2**n)[:, None] >> np.arange(n)[None, :]  # [2^n, n]
    signs = np.where(codes & 1, 1.0, -1.0)
    return signs, signs.sum(axis=1)


SIGN_ROWS = 1000
"""Drawn sign patterns made at once: a pooled task or suite pairs thousands of cases, and all
MONTE_CARLO_SIGNS patterns of them at once would take hundreds of MB."""


def _drawn_sign_sums(differences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flipped sums [patterns], sign sums [patterns]) over MONTE_CARLO_SIGNS patterns drawn
    with seed n, SIGN_ROWS at a time (the same patterns as drawing them all at once)."""
    n = len(differences)
    rng = np.random.default_rng(n)
    flipped, sign_sums = [], []
    for start in range(0, MONTE_CARLO_SIGNS, SIGN_ROWS):
        rows = min(SIGN_ROWS, MONTE_CARLO_SIGNS - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(rows, n))  # [rows, n]
        flipped.append(signs @ differences)
        sign_sums.append(signs.sum(axis=1))
    return np.concatenate(flipped), np.concatenate(sign_sums)


def fewest_decisive(alpha: float = ALPHA) -> int:
    """The fewest cases that, all moving the same way, give p < alpha in either exact test
    (6 at alpha = 0.05): with fewer cases nothing is significant."""
    fewest = 1
    while 2 * 0.5**fewest >= alpha:
        fewest += 1
    return fewest


def minimum_detectable_drop(sd: float, n: int, alpha: float = ALPHA,
                            power: float = POWER) -> float:
    """The drop detected with ``power`` at two-sided ``alpha``, given the per-case differences'
    standard deviation ``sd`` observed in this comparison (normal approximation of the exact
    tests above, which it matches as N grows).

    Never below the granularity of the exact tests: the fewest cases that must all move the
    same way before p < alpha (``fewest_decisive``), divided by N. This also gives identical
    runs (sd = 0) an honest answer instead of 0; with fewer cases than that, no drop is
    detectable (inf), and no verdict can be significant either.
    """
    fewest = fewest_decisive(alpha)
    if n < fewest:
        return math.inf
    normal = NormalDist()
    spread = (normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)) * sd / math.sqrt(n)
    return float(max(spread, fewest / n))


def holm(p_values: Sequence[float], weights: Sequence[float] | None = None) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the family's error rate stays at
    alpha when each is compared with alpha, whatever the tests' dependence. With ``weights``,
    Holm's weighted procedure (1979): a hypothesis starts with its weight's share of alpha, and
    each one rejected hands its share on to the others in proportion to their weights (a
    closed test of weighted Bonferroni tests); equal weights are the plain procedure. A NaN p
    (nothing to test) counts as 1."""
    shares = [1.0] * len(p_values) if weights is None else [float(w) for w in weights]
    if len(shares) != len(p_values) or any(share <= 0 for share in shares):
        raise ValueError("Holm's weights: one positive weight per p-value")
    order = sorted(range(len(p_values)), key=lambda i: _finite_p(p_values[i]) / shares[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        left = sum(shares[i] for i in order[rank:])  # the weight of those not yet rejected
        running = max(running, min(1.0, left / shares[index] * _finite_p(p_values[index])))
        adjusted[index] = running
    return adjusted


def _finite_p(p_value: float) -> float:
    return 1.0 if math.isnan(p_value) else p_value


# -- detectable before the run: what the plan line promises -----------------------------------
#
# Before any cell runs only the baseline is known, not how this run's scores will pair with it.
# The drop d that the paired test detects with POWER at two-sided alpha is taken from the normal
# approximation with a deliberately pessimistic spread of the differences: sd^2 = 2 v + d (1 - d),
# v the variance of the baseline's per-case scores (a rerun as variable as the baseline and
# uncorrelated with it, plus the spread of a 0/1 drop of d). It is never below the drop at which
# a Poisson count of cases that got worse (mean n d) reaches the exact tests' fewest decisive
# cases with POWER, their granularity when nothing else varies.


def planned_power(variance: float, n: int, drop: float, alpha: float = ALPHA) -> float:
    """The power promised for a drop of ``drop`` over ``n`` paired cases whose baseline
    scores vary by ``variance`` (see the section comment); 0 below the fewest decisive
    cases."""
    fewest = fewest_decisive(alpha)
    if n < fewest or drop <= 0:
        return 0.0
    normal = NormalDist()
    spread = math.sqrt(2 * variance + drop * (1 - drop))
    by_spread = normal.cdf(drop * math.sqrt(n) / spread - normal.inv_cdf(1 - alpha / 2)) \
        if spread > 0 else 1.0
    by_count = float(stats.poisson.sf(fewest - 1, n * drop))
    return min(by_spread, by_count)


def planned_detectable_drop(variance: float, n: int, alpha: float = ALPHA,
                            power: float = POWER) -> float:
    """The smallest drop detected with ``power`` (``planned_power`` reaches it); inf when n
    is below the fewest decisive cases, or when only a drop of more than the whole 0..1 score
    would be detected."""
    fewest = fewest_decisive(alpha)
    if n < fewest:
        return math.inf
    normal = NormalDist()
    z2 = (normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)) ** 2
    scale = n + z2  # d^2 n = z^2 (2 v + d (1 - d)), solved for d
    spread = (z2 + math.sqrt(z2 * z2 + 8 * z2 * variance * scale)) / (2 * scale)
    by_count = float(stats.gamma.ppf(power, fewest)) / n  # P(Poisson(n d) >= fewest) = power
    drop = max(spread, by_count)
    return drop if drop <= 1.0 else math.inf
