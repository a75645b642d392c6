"""Base ability: a task's mean score at the short base lengths (the paper's
(S_2k + S_4k + S_6k) / 3), computed once for every long cell and every xdist worker.

Choices, and why:

- **Per task**, as METHODS §4 and the paper define it, pooled over the run's depths for tasks that
  sweep depth: every depth cell at length l is compared with the same short-context ability, so
  LC_l at 50 % depth says how much of *the task's* short-context ability survives there. (Per
  (task, depth) would hide a depth weakness that already exists at 2k.)
- **Every measured base case when the run has the base cells**: a base length among the run's
  lengths contributes all N cases of its cell (the answers are in the store already, so this
  asks the model nothing new), and the base is the mean of every kept base case, pooled
  (``--longscore-base-mean pooled``, as the released code scores its length-0 file) or the mean
  of the base lengths' means, each length weighted equally (``per-length``). Only a base length
  the run does not measure is sampled by the
  paper's N/3 rule: the first ceil(N/3) cases of exactly the cell the grid would build there.
  (With N = 3 the N/3 rule alone keeps one case per length, so a 22 % task read as 0 or 1.)
  ``BaseAbility.rules`` records which rule each length took.
- **Once through the store**: the value is keyed by the base cases' request hashes and the model
  fingerprint, so another worker, or a later run, reuses it; changed data or a changed model
  gives a new key.
- The prior-knowledge filter applies to base cases as it does to cells.
- A base length beyond the model's window, or one whose cell cannot be built, is left out and
  named; with none left the base ability is NaN and LongScore is undefined.
- **What the base is measured on** (``--longscore-base``): by default as 100-LongBench's
  released code makes its length-0 files, a task that can ask its questions about its gold
  passages alone (``AloneBase``: the QA and summary tasks) is measured that way, on the N cases
  of one stratum ``alone`` and no base length; every other task, and every task under
  ``paper``, on the base lengths.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from ....foundation.grid import Cell, format_depth, format_length, parse_length
from ....foundation.workers import worker_label
from ....results.records import Case, stable_hash
from ....run.evaluation import Evaluator, NothingKept
from ....tasks.base import BuildContext, CellDoesNotFit, GenerationTask
from .config import POOLED, RELEASED, LongScoreSettings
from .formula import stratified_mean

BASE_VERSION = 4
"""Part of the store key: bump when the way the base is computed changes."""


@dataclass(frozen=True)
class BaseAbility:
    """A task's base ability and the per-case scores behind it (for the bootstrap)."""

    value: float
    """The mean score (``base_value``: pooled over every kept case, or over base lengths of
    their means), 0..1; NaN when nothing was measured."""
    strata: dict[str, list[float]]
    """Per (base length[, depth]) stratum, e.g. '2k' or '2k@50', the kept cases' scores."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Strata that could not be measured, and why."""
    requests: int = 0
    """Model requests that computing it took (in whichever process or run computed it)."""
    rules: dict[str, str] = field(default_factory=dict)
    """Per base length (e.g. '2k'), how its cases were chosen: ALL_CASES or N_THIRD."""

    @property
    def n(self) -> int:
        return sum(len(scores) for scores in self.strata.values())

    def n_by_length(self) -> dict[str, int]:
        """Kept cases per base length (strata '2k@50' count towards '2k')."""
        counts: dict[str, int] = {}
        for stratum, scores in self.strata.items():
            length = stratum.partition("@")[0]
            counts[length] = counts.get(length, 0) + len(scores)
        return counts

    def measured_on(self) -> str:
        """What the base was measured on: 'alone' (the gold passages alone) or its lengths,
        e.g. '2k,4k,6k'."""
        return ",".join(self.rules)

    def describe(self) -> str:
        """E.g. 'base ability 0.667 (N=18: 1k 9, 2k 9; all cases of the run's cells)'."""
        counts = self.n_by_length()
        rules = {self.rules.get(length, "") for length in counts}
        if len(rules) == 1:
            where = ", ".join(f"{length} {count}" for length, count in counts.items()) + \
                f"; {rules.pop()}"
        else:
            where = ", ".join(f"{length} {count} ({self.rules.get(length, '')})"
                              for length, count in counts.items())
        text = f"base ability {self.value:.3f} (N={self.n}: {where or 'no base length'})"
        if self.left_out:
            text += "; left out: " + "; ".join(f"{k}: {v}" for k, v in self.left_out.items())
        return text

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BaseAbility:
        """Read back from the store, whose JSON sorts keys as strings ('16k' before '8k'):
        strata and rules in length order again, so the descriptions list them that way."""
        ordered: dict[str, dict[str, Any]] = {
            name: dict(sorted(data[name].items(), key=lambda item: _stratum_order(item[0])))
            for name in ("strata", "left_out", "rules") if name in data}
        return cls(**{**data, **ordered})


def _stratum_order(stratum: str) -> tuple[int, float]:
    """'8k@50' -> (8192, 50.0); the base measured alone first."""
    if stratum == ALONE:
        return 0, 0.0
    length, _, depth = stratum.partition("@")
    return parse_length(length), float(depth or 0)


ALL_CASES = "all cases of the run's cells"
N_THIRD = "N/3 per length"
ALONE = "alone"
"""The stratum (and rule) of a base measured on the gold passages alone."""
ALONE_RULE = "the gold passages alone, no distractors (the released code's length 0)"


@runtime_checkable
class AloneBase(Protocol):
    """A task whose questions can be asked about their own passages alone (100-LongBench's
    QA and summary tasks, whose released base is that)."""

    @property
    def name(self) -> str: ...

    def base_cases(self, cell: Cell, context: BuildContext) -> list[Case]: ...


def samples_per_length(samples: int) -> int:
    """N/3 cases per base length, rounded up so the base has at least N cases."""
    return max(1, math.ceil(samples / 3))


class BaseAbilities:
    """How base abilities are measured in this run: its base lengths and its own lengths."""

    def __init__(self, settings: LongScoreSettings, run_lengths: tuple[int, ...] = ()) -> None:
        self.settings = settings
        self.run_lengths = frozenset(run_lengths)
        """The run's lengths: a base length among them is measured by its whole cell."""

    def need(self, suite: str, task: GenerationTask) -> BaseAbilityNeed:
        return BaseAbilityNeed(self, suite, task)

    def measure(self, evaluator: Evaluator, suite: str, task: GenerationTask) -> BaseAbility:
        """The base ability, computed once in the store for every process and later run."""
        model = evaluator.model
        cases, left_out, rules = self._base_cases(evaluator, suite, task)
        key = stable_hash({
            "longscore-base": BASE_VERSION, "base": self.settings.base,
            "mean": self.settings.base_mean,
            "fingerprint": model.fingerprint,
            "suite": suite, "task": task.name, "judge": evaluator.judge_identity(task),
            "prior_knowledge": evaluator.settings.prior_knowledge_threshold,
            "cases": {stratum: [c.request().key() for c in group]
                      for stratum, group in cases.items()},
        })
        return model.store.compute_once(
            key, lambda: _measure(evaluator, task, cases, left_out, rules,
                                  self.settings.base_mean),
            encode=BaseAbility.to_json, decode=BaseAbility.from_json)

    def _base_cases(self, evaluator: Evaluator, suite: str, task: GenerationTask
                    ) -> tuple[dict[str, list[Case]], dict[str, str], dict[str, str]]:
        """The cases of each base cell by stratum (all of them when the run measures that
        length, else the first N/3), the strata left out, and the rule per length."""
        settings, window = evaluator.settings, evaluator.model.context_window
        if self.settings.base == RELEASED and isinstance(task, AloneBase):
            return _alone(task, Cell(suite, task.name, 0, None, settings.samples),
                          evaluator.context_for(task), window)
        depths = settings.depths if task.uses_depth else (None,)
        cases: dict[str, list[Case]] = {}
        left_out: dict[str, str] = {}
        rules: dict[str, str] = {}
        for length in self.settings.base_lengths:
            in_run = length in self.run_lengths
            keep = settings.samples if in_run else samples_per_length(settings.samples)
            rules[format_length(length)] = ALL_CASES if in_run else N_THIRD
            for depth in depths:
                stratum = format_length(length) + ("" if depth is None else
                                                   "@" + format_depth(depth))
                if length > window:
                    left_out[stratum] = f"beyond the model's window of {window} tokens"
                    continue
                cell = Cell(suite, task.name, length, depth, settings.samples)
                try:
                    cases[stratum] = evaluator.build(task, cell)[:keep]
                except CellDoesNotFit as exc:
                    left_out[stratum] = str(exc)
        return cases, left_out, rules

@dataclass(frozen=True)
class BaseAbilityNeed:
    """LongScore's need: the base ability of a task (measured once per process)."""

    bases: BaseAbilities
    suite: str
    task: GenerationTask

    @property
    def key(self) -> tuple[str, str, str]:
        return ("longscore-base", self.suite, self.task.name)

    def measure(self, evaluator: Evaluator) -> MeasuredBase:
        return MeasuredBase(self.bases.measure(evaluator, self.suite, self.task),
                            evaluator.model.context_window)


@dataclass(frozen=True)
class MeasuredBase:
    """The evidence LongScore judges with: the base ability and the window it was measured in."""

    ability: BaseAbility
    window: int


def _alone(task: AloneBase, cell: Cell, context: BuildContext, window: int
           ) -> tuple[dict[str, list[Case]], dict[str, str], dict[str, str]]:
    """The N cases of the task's questions about their passages alone, one stratum."""
    rules = {ALONE: ALONE_RULE}
    cases = task.base_cases(cell, context)
    longest = max((case.total_tokens for case in cases), default=0)
    if longest > window:
        return {}, {ALONE: f"a case takes {longest} tokens with its generation budget, beyond "
                           f"the model's window of {window} tokens"}, rules
    return {ALONE: cases}, {}, rules


def _measure(evaluator: Evaluator, task: GenerationTask, cases: dict[str, list[Case]],
             left_out: dict[str, str], rules: dict[str, str], mean: str) -> BaseAbility:
    """Answer (through the store, all strata in one batch) and score the base cases by the
    pipeline every cell takes (``Evaluator.answer``: the prior-knowledge filter first)."""
    flat = [(stratum, case) for stratum, group in cases.items() for case in group]
    label = f"[{worker_label()}] LongScore base ability of {task.name}"
    try:
        answered = evaluator.answer(task, [case for _, case in flat], label, agreement=False)
        kept_ids, scored, requests = ({id(case) for case in answered.cases},
                                      answered.scored.scores, answered.requests)
    except NothingKept as exc:
        kept_ids, scored, requests = set(), [], exc.requests
    kept = [(stratum, case) for stratum, case in flat if id(case) in kept_ids]
    strata: dict[str, list[float]] = {}
    for (stratum, _), score in zip(kept, scored, strict=True):
        if score is not None:  # a judge's unreadable reply, which the rubric leaves out
            strata.setdefault(stratum, []).append(score)
    threshold = evaluator.settings.prior_knowledge_threshold
    left = {**left_out, **{stratum: f"every case excluded by the prior-knowledge filter "
                                    f"(no-context score >= {threshold:g})"
                           for stratum in cases if stratum not in strata}}
    return BaseAbility(base_value(strata, mean), strata, left, requests, rules)


def base_value(strata: dict[str, list[float]], mean: str) -> float:
    """The base ability of these kept scores: POOLED, one mean over them all (the released
    code's scorer over its length-0 file); PER_LENGTH, ``length_weighted_mean``. NaN when
    nothing was measured."""
    if mean == POOLED:
        return stratified_mean(base_strata(strata, mean))
    return length_weighted_mean(strata)


def base_strata(strata: dict[str, list[float]], mean: str) -> list[list[float]]:
    """The strata a bootstrap of the base resamples within: one pooled set under POOLED,
    else each stratum."""
    if mean == POOLED:
        return [[score for scores in strata.values() for score in scores]]
    return [scores for scores in strata.values() if scores]


def length_weighted_mean(strata: dict[str, list[float]]) -> float:
    """Mean over base lengths of each length's mean over its depth strata ('2k@50' belongs to
    '2k'), so each base length weighs the same even when a depth stratum is missing at one of
    them; NaN when nothing was measured."""
    by_length: dict[str, list[float]] = {}
    for stratum, scores in strata.items():
        if scores:
            by_length.setdefault(stratum.partition("@")[0], []).append(
                stratified_mean([scores]))
    return stratified_mean(list(by_length.values()))
