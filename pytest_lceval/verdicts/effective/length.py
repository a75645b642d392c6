"""RULER's effective context length, computed from a run's cells.

RULER calls a length *effective* when the model's score there reaches a threshold, the score of
Llama-2-7B at 4k (85.6 %), and reports each model's effective length beside its claimed window.
Here, for a task and for a suite:

- the score at a length pools every case the run measured at it: a task's cells at the length
  (its depths, each with the same N cases, so this is the mean over depths) are one mean; a
  suite's score is the mean over its tasks of their scores, as RULER averages its tasks (and
  HELMET its categories), at the lengths where every one of its tasks was measured;
- the effective length is the longest measured length at which the score, and the score at
  every shorter measured length, is at least the threshold: a score that falls below and comes
  back does not extend it (it "stays" above up to there);
- when every measured length reaches the threshold the effective length is *at least* the
  longest one measured (RULER writes ">128K"); when the shortest already misses it, it is
  *below* the shortest (RULER's "<4K").

Skipped cells (a length beyond the model's window) and cells without a token length (Task
Haystack's) have no score and take no part. Nothing here calls a model: the numbers come from
results (this run's, or a saved baseline's per-case scores).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...foundation.grid import format_length

DEFAULT_THRESHOLD = 0.856
"""Llama-2-7B's RULER average at 4k (85.6 %), RULER's threshold."""
SUITE_ROW = ""
"""The ``task`` of a suite's own row."""


@dataclass(frozen=True)
class Scored:
    """One measured cell, as far as effective length needs it."""

    suite: str
    task: str
    length: int
    scores: tuple[float, ...]


@dataclass(frozen=True)
class Curve:
    """Scores by length of one task or suite, and its effective length at ``threshold``."""

    suite: str
    task: str
    """The task, or SUITE_ROW for the suite's mean over its tasks."""
    scores: dict[int, float]
    threshold: float

    @property
    def lengths(self) -> list[int]:
        return sorted(self.scores)

    @property
    def effective(self) -> int | None:
        """The effective length; None when the shortest measured length misses the
        threshold (or nothing was measured)."""
        longest = None
        for length in self.lengths:
            if self.scores[length] < self.threshold:
                break
            longest = length
        return longest

    @property
    def at_least(self) -> bool:
        """Every measured length reached the threshold: the effective length may be longer."""
        return bool(self.scores) and self.effective == self.lengths[-1]

    @property
    def text(self) -> str:
        """'4k', '≥8k' (every measured length holds), '<1k' (none does), '–' (none measured)."""
        if not self.scores:
            return "–"
        effective = self.effective
        if effective is None:
            return f"<{format_length(self.lengths[0])}"
        return ("≥" if self.at_least else "") + format_length(effective)

    @property
    def first_miss(self) -> int | None:
        """The length whose score ended the effective length (None when none did)."""
        effective = self.effective
        return next((n for n in self.lengths if effective is None or n > effective), None)

    def on(self, lengths: Iterable[int]) -> Curve:
        """The same curve over ``lengths`` only (two runs compare on the lengths both
        measured)."""
        kept = set(lengths)
        return Curve(self.suite, self.task,
                     {n: s for n, s in self.scores.items() if n in kept}, self.threshold)


def curves(cells: Iterable[Scored], threshold: float) -> list[Curve]:
    """Each suite's curve followed by its tasks' (suites, then tasks, by name)."""
    pooled: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for cell in cells:
        if cell.length > 0 and cell.scores:
            pooled[(cell.suite, cell.task)][cell.length].extend(cell.scores)
    task_curves = {key: Curve(key[0], key[1],
                              {n: sum(s) / len(s) for n, s in by_length.items()}, threshold)
                   for key, by_length in pooled.items()}
    out = []
    for suite in sorted({suite for suite, _ in task_curves}):
        mine = [curve for (s, _), curve in sorted(task_curves.items()) if s == suite]
        common = set.intersection(*(set(curve.scores) for curve in mine))
        out.append(Curve(suite, SUITE_ROW, {n: sum(c.scores[n] for c in mine) / len(mine)
                                            for n in sorted(common)}, threshold))
        out.extend(mine)
    return out


@dataclass(frozen=True)
class Change:
    """One curve against the same task's or suite's in a baseline, on the lengths both runs
    measured."""

    now: Curve
    before: Curve

    @property
    def status(self) -> str:
        """'fell', 'rose' or 'same' (by effective length; below the shortest counts lowest)."""
        now, before = _rank(self.now), _rank(self.before)
        return "fell" if now < before else "rose" if now > before else "same"

    def describe(self, baseline: str) -> str:
        """'effective length of recall fell from 4k to 2k (...)'."""
        what = self.now.suite + (f" · {self.now.task}" if self.now.task else "")
        head = (f"effective length of {what} {self.status} from {self.before.text} to "
                f"{self.now.text} against baseline {baseline!r}")
        miss = self.now.first_miss
        if self.status != "fell" or miss is None:
            return head
        before = self.before.scores.get(miss)
        return (f"{head}: score at {format_length(miss)} {self.now.scores[miss]:.3f} < "
                f"threshold {self.now.threshold:.3f}"
                + (f" (baseline {before:.3f})" if before is not None else ""))


def _rank(curve: Curve) -> tuple[int, int]:
    effective = curve.effective
    return (0, 0) if effective is None else (1, effective)


def changes(now: list[Curve], before: list[Curve]) -> dict[tuple[str, str], Change]:
    """Each curve of ``now`` that ``before`` has too, both cut to their common lengths."""
    earlier = {(c.suite, c.task): c for c in before}
    out = {}
    for curve in now:
        old = earlier.get((curve.suite, curve.task))
        common = set(curve.scores) & set(old.scores) if old is not None else set()
        if old is not None and common:
            out[(curve.suite, curve.task)] = Change(curve.on(common), old.on(common))
    return out


@dataclass(frozen=True)
class EffectiveRow:
    """One line of the report: a task's or suite's claimed window, effective length and, with
    a baseline, how it moved."""

    suite: str
    task: str
    window: int
    """The model's claimed context window in tokens (0 when unknown)."""
    effective: str
    effective_tokens: int | None
    at_least: bool
    threshold: float
    scores: dict[str, float] = field(default_factory=dict)
    """Score by length label ('4k'), rounded."""
    baseline: str = ""
    """The baseline's effective length on the lengths both runs measured ('' without one)."""
    change: str = ""
    """'fell', 'rose', 'same' or '' without a baseline."""
    message: str = ""


def report_rows(now: list[Curve], window: int, baseline: Mapping[tuple[str, str], Change],
                baseline_name: str = "") -> list[EffectiveRow]:
    rows = []
    for curve in now:
        change = baseline.get((curve.suite, curve.task))
        rows.append(EffectiveRow(
            curve.suite, curve.task, window, curve.text, curve.effective, curve.at_least,
            curve.threshold, {format_length(n): round(s, 4) for n, s in curve.scores.items()},
            baseline=change.before.text if change else "",
            change=change.status if change else "",
            message=change.describe(baseline_name) if change else ""))
    return rows
