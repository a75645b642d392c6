"""Task Haystack's verdict: Lifelong vs Single-task accuracies, paired by resample id.

``scipy.stats.ttest_rel``, two-sided, p < 0.05: t < 0 is a FAIL (Lifelong ICL significantly
worse), t > 0 an EXCEL (positive transfer, not a failure), anything else a PASS.

The degenerate cases are decided here, not left to whatever scipy and NumPy return:

- identical groups (every paired difference 0): t is undefined (NaN) -> PASS;
- a constant non-zero difference: |t| = inf, p = 0 -> decisive (FAIL or EXCEL by its sign).
  Accuracies are floats, so 0.7 - 0.6 and 0.8 - 0.7 differ in the last bit and scipy would
  return a huge finite t with a precision warning; the tolerance below treats them as equal.

Values are converted to Python floats and bools before they are compared, so NumPy 2's
``np.bool_`` (which is not ``True``) never reaches a caller.
(Kept in this package rather than in ``pytest_lceval/verdicts/stats.py``, which another suite was
editing at the same time; nothing else uses it.)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scipy import stats

ALPHA = 0.05
FAIL, PASS, EXCEL = "FAIL", "PASS", "EXCEL"
VALUES = {FAIL: -1, PASS: 0, EXCEL: 1}
"""Verdicts as numbers for heatmaps: red -1, white 0, blue +1."""
_EQUAL = 1e-9
"""Differences closer than this are equal; accuracies move in steps of 1/N >= 1e-4."""


@dataclass(frozen=True)
class Verdict:
    verdict: str
    """FAIL, PASS or EXCEL."""
    t: float
    """ttest_rel statistic of lifelong - single; NaN for identical groups, ±inf when constant."""
    p: float
    resamples: tuple[int, ...]
    """Resample ids, in the order of the paired values below."""
    lifelong: tuple[float, ...]
    single: tuple[float, ...]
    note: str = ""
    """Why a degenerate case was decided as it was."""

    @property
    def passed(self) -> bool:
        """Not a FAIL: EXCEL counts as passing (positive transfer)."""
        return self.verdict != FAIL

    @property
    def value(self) -> int:
        return VALUES[self.verdict]


def paired_verdict(lifelong: Mapping[int, float], single: Mapping[int, float],
                   alpha: float = ALPHA) -> Verdict:
    """Judge Lifelong against Single-task accuracies keyed by resample id (not by order)."""
    if set(lifelong) != set(single):
        raise ValueError(
            f"Lifelong and Single-task accuracies must cover the same resample ids; lifelong has "
            f"{sorted(lifelong)}, single-task {sorted(single)}")
    ids = tuple(sorted(lifelong))
    if len(ids) < 2:
        raise ValueError(f"a paired t-test needs at least 2 resamples, got {len(ids)}")
    lifelong_values = tuple(float(lifelong[i]) for i in ids)
    single_values = tuple(float(single[i]) for i in ids)
    differences = [a - b for a, b in zip(lifelong_values, single_values, strict=True)]
    note = ""
    if max(differences) - min(differences) <= _EQUAL:
        shift = sum(differences) / len(differences)
        if abs(shift) <= _EQUAL:
            t, p = math.nan, math.nan
            note = "identical groups: t is undefined (NaN), which is a PASS"
        else:
            t, p = math.copysign(math.inf, shift), 0.0
            note = "constant non-zero difference: |t| = inf, p = 0, decisive"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = stats.ttest_rel(lifelong_values, single_values)
        t, p = float(result.statistic), float(result.pvalue)
    return Verdict(_decide(t, p, alpha), t, p, ids, lifelong_values, single_values, note)


def rank_note(methods: Iterable[str], no_prediction: int, no_prediction_single: int,
              cases: int) -> str:
    """What a verdict must say about how its accuracies were measured, or "" when there is
    nothing to say (every case ranked by full log-probabilities).

    Cases with no prediction (no option in a server's top k, or a generated answer that matched
    none) are wrong on their side of the pair, as in the reference code, so a server that
    truncates its log-probabilities lowers accuracy visibly instead of guessing option 0; the
    counts say how much of a verdict rests on them. A fallback method is named since its
    accuracies are not those of rank classification."""
    parts = []
    fallback = sorted(set(methods) - {"logprobs"})
    if fallback:
        parts.append(f"rank method {', '.join(sorted(set(methods)))}")
    if no_prediction or no_prediction_single:
        parts.append(f"no prediction (scored wrong) for {no_prediction} of {cases} Lifelong and "
                     f"{no_prediction_single} of {cases} Single-task cases")
    return "; ".join(parts)


def _decide(t: float, p: float, alpha: float) -> str:
    if math.isnan(t) or math.isnan(p):
        return PASS  # no evidence of a difference (identical groups)
    if p < alpha and t < 0:
        return FAIL
    if p < alpha and t > 0:
        return EXCEL
    return PASS
