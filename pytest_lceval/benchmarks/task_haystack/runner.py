"""Measuring one Task Haystack test: Lifelong vs Single-task ICL of one task at one position.

Work is shared through the store, computed once by whichever process needs it first:

- the Single-task baseline of (task, shots, resample) serves every permutation and setting;
- in recall and paraphrase the whole stream is one prefix for every task, so the first test of
  a (permutation, resample) ranks the queries of *all* tasks of the stream on it (the backend
  computes the prefix once) and the other tests, on any worker, read their answers back.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ...foundation.measurement import Measurement
from ...models.base import Tokenizer
from ...models.hf_text import suffix_ids
from ...models.stored import StoredModel
from ...models.topk_rank import NO_PREDICTION
from ...results.cells import clip_sample, failing_first
from ...results.records import RankRequest
from ...run.evaluation import Evaluator
from ...run.progress import CellProgress
from ...run.suite import CellRefused, CellSkipped
from ...store.database import Store
from .config import HaystackSettings
from .data import LliclTask
from .metrics import HaystackMetrics
from .plan import CellPlan, HaystackCell, plan_cell
from .prompts import (
    REPEAT_SETTINGS,
    SHARED_SETTINGS,
    Context,
    irrelevant_prose,
    lifelong,
    query,
    repeat_count,
    single_task,
    task_block,
)
from .ranking import Scored, check_options, score
from .verdict import Verdict, paired_verdict, rank_note

SAMPLES_KEPT = 2


class DoesNotFit(Exception):
    """A prompt exceeds the model's window; the message names the numbers."""


@dataclass
class _Conditions:
    single: dict[int, Scored]
    lifelong: dict[int, Scored]
    requests: dict[int, list[RankRequest]]
    """The test task's Lifelong requests per resample (for case keys and samples)."""


def check_stream(tokenizer: Tokenizer, tasks: Sequence[LliclTask], test_size: int) -> None:
    """Every task of the run, before its first cell: a stream holds all their queries (in
    recall and paraphrase the first test ranks them all), so a task whose options share a
    first token would fail the cells of every other task. Raises OptionCollisionError, which
    names the task and its config.json."""
    for task in tasks:
        check_options(tokenizer, task, query(task, task.test_cases(test_size)[0]))


class HaystackMeasure:
    """Measures one Task Haystack cell: both conditions on every resample, then the record."""

    def __init__(self, evaluator: Evaluator, settings: HaystackSettings,
                 model: StoredModel) -> None:
        self.evaluator = evaluator
        self.settings = settings
        self.model = model
        """The session model, with a batch size suited to long runs of shared-prefix queries."""
        self._prefix_tokens: dict[str, int] = {}
        """Token counts of the prefixes seen by this test (a stream is counted once)."""
        self._repeats: dict[int, int] = {}
        """n_repeat per resample in the Random and Repeat settings (repeat_count)."""

    @property
    def store(self) -> Store:
        return self.model.store

    def measure(self, cell: HaystackCell) -> Measurement:
        plan = plan_cell(cell, self.settings, self.evaluator.settings.seed)
        started = time.perf_counter()
        try:
            contexts = {r: self._contexts(plan, r) for r in plan.resamples}
        except DoesNotFit as exc:
            raise CellSkipped(str(exc), Measurement(depth=plan.depth)) from None
        built = time.perf_counter() - started
        seam_exact = all(self._seam_exact(context, plan.task, plan.rows[0])
                         for pair in contexts.values() for context in pair)
        before, spent = self.model.calls.here, self.model.calls.seconds_here
        try:
            measured = self._measure(plan, contexts)
        except ValueError as exc:  # the backend refuses (e.g. colliding first tokens)
            raise CellRefused(f"{plan.task.name}: the backend refused the rank requests: "
                              f"{exc}", Measurement(depth=plan.depth, seconds_build=built)
                              ) from None
        return self._measurement(plan, measured, seam_exact, built,
                                 self.model.calls.seconds_here - spent,
                                 self.model.calls.here - before)

    # -- building ---------------------------------------------------------------------------

    def _contexts(self, plan: CellPlan, resample: int) -> tuple[Context, Context]:
        """(Single-task, Lifelong) contexts of one resample, refused if they cannot fit."""
        spec = plan.spec(resample)
        if plan.setting in REPEAT_SETTINGS:
            block = self.model.renderer.count(task_block(plan.task, resample, spec.n_shot))
            spec = replace(spec, repeats=repeat_count(len(plan.stream), block))
            self._repeats[resample] = spec.repeats
        prose = self._prose(plan, resample, spec.repeats) if plan.setting == "random" else ""
        pair = (single_task(plan.task, resample, plan.length.n_shot),
                lifelong(spec, plan.task, prose))
        window = self.model.context_window
        for name, context in zip(("Single-task", "Lifelong"), pair, strict=True):
            tokens = self._longest(context, plan.task, plan.rows)
            if tokens + 1 > window:
                raise DoesNotFit(
                    f"the {name} prompt of {plan.task.name} ({plan.length.n_task} tasks x "
                    f"{plan.length.n_shot} shots per class, resample {resample}, longest test "
                    f"input) is {tokens} tokens + 1 to predict > the {window}-token window of "
                    f"{self.model.spec}")
        return pair

    def _longest(self, context: Context, task: LliclTask,
                 rows: Sequence[Mapping[str, str]]) -> int:
        """Tokens of the longest prompt: the prefix as the backend reads it (special tokens
        included) plus the longest suffix (backends tokenize the two apart)."""
        suffixes = (context.head + query(task, row) for row in rows)
        if context.prefix not in self._prefix_tokens:
            self._prefix_tokens[context.prefix] = self.model.renderer.count(context.prefix)
        return (self._prefix_tokens[context.prefix]
                + max(len(suffix_ids(self.model.tokenizer, context.prefix, suffix))
                      for suffix in suffixes))

    def _seam_exact(self, context: Context, task: LliclTask, row: Mapping[str, str]) -> bool:
        """Whether prefix and suffix tokenized apart (as backends read them, the suffix in the
        prefix's context) give the ids of the joined prompt, which the reference code feeds;
        recorded, since a tokenizer that merges across the seam would make the model read
        slightly different tokens than the prompt's own."""
        tokenizer = self.model.tokenizer
        suffix = context.head + query(task, row)
        return (tokenizer.encode(context.prefix) + suffix_ids(tokenizer, context.prefix, suffix)
                == tokenizer.encode(context.prefix + suffix))

    def _prose(self, plan: CellPlan, resample: int, repeats: int) -> str:
        """Irrelevant essay text of (n_repeat - 1) times the test task's block in tokens, as
        the reference's run_repeat.py sizes it (``prefix_len * (n_repeat - 1)``): the Random
        prompt is then about as long as the Repeat one."""
        try:
            essays, _ = self.evaluator.data.essays()
        except FileNotFoundError as exc:
            raise DoesNotFit(f"the random setting needs essay prose: {exc}") from None
        block = task_block(plan.task, resample, plan.length.n_shot)
        n_tokens = (repeats - 1) * self.model.renderer.count(block)
        return irrelevant_prose(essays, self.model.tokenizer.encode, self.model.tokenizer.decode,
                                n_tokens)

    # -- measuring --------------------------------------------------------------------------

    def _measure(self, plan: CellPlan, contexts: dict[int, tuple[Context, Context]]
                 ) -> _Conditions:
        """Both conditions on every resample. The store's claims keep two processes from
        ranking one stream's queries twice: the second waits for the first's answers."""
        measured = _Conditions({}, {}, {})
        progress = self.evaluator.progress()
        try:
            for resample in plan.resamples:
                self._measure_resample(plan, resample, contexts[resample], measured, progress)
        finally:
            progress.close()
        return measured

    def _measure_resample(self, plan: CellPlan, resample: int, pair: tuple[Context, Context],
                          measured: _Conditions, progress: CellProgress) -> None:
        single, life = pair
        baseline = self.model.rank(single.requests(plan.task, plan.rows), progress)
        own = life.requests(plan.task, plan.rows)
        group = self._stream_group(plan, resample, life) or own
        answers = dict(zip(group, self.model.rank(group, progress), strict=True))
        measured.single[resample] = score(plan.task, plan.rows, baseline)
        measured.lifelong[resample] = score(plan.task, plan.rows, [answers[r] for r in own])
        measured.requests[resample] = own

    def _stream_group(self, plan: CellPlan, resample: int,
                      life: Context) -> list[RankRequest] | None:
        """Every task's queries on the shared stream prefix, when the setting has one (tasks
        whose longest query would overflow the window are left to their own tests, to skip)."""
        if plan.setting not in SHARED_SETTINGS:
            return None
        group: list[RankRequest] = []
        for task in plan.stream:
            shared = Context(life.prefix, lifelong(plan.spec(resample), task).head)
            rows = task.test_cases(self.settings.test_size)
            if self._longest(shared, task, rows) + 1 <= self.model.context_window:
                group.extend(shared.requests(task, rows))
        return group

    # -- recording --------------------------------------------------------------------------

    def _measurement(self, plan: CellPlan, measured: _Conditions, seam_exact: bool,
                     built: float, seconds_model: float, requests: int) -> Measurement:
        verdict = paired_verdict({r: s.accuracy for r, s in measured.lifelong.items()},
                                 {r: s.accuracy for r, s in measured.single.items()})
        lifelong_cases = [c for r in sorted(measured.lifelong)
                          for c in measured.lifelong[r].correct]
        tokens = [t for s in measured.lifelong.values() for t in s.prompt_tokens]
        single_tokens = [t for s in measured.single.values() for t in s.prompt_tokens]
        repeats = {str(r): n for r, n in sorted(self._repeats.items())} or None
        first = plan.resamples[0]
        scored = measured.lifelong[first]
        cases = list(zip(measured.requests[first], plan.rows, scored.choices, scored.correct,
                         strict=True))
        return Measurement(
            scores=[float(c) for c in lifelong_cases],
            case_keys=[request.key() for r in sorted(measured.requests)
                       for request in measured.requests[r]],
            prompt_tokens=tokens, total_tokens=tokens,
            samples=[
                {"index": i, "prompt": clip_sample(request.prefix + request.suffix),
                 "gold": [row["label"]],
                 "output": NO_PREDICTION if choice is None else plan.task.options[choice],
                 "score": float(correct)}
                for i in failing_first([float(c) for *_, c in cases], SAMPLES_KEPT)
                for request, row, choice, correct in [cases[i]]],
            logged=[
                {"resample": resample, "index": index, "request_key": request.key(),
                 "prompt": request.prefix + request.suffix, "options": list(request.options),
                 "gold": [row["label"]],
                 "output": NO_PREDICTION if choice is None else plan.task.options[choice],
                 "score": float(correct)}
                for resample in sorted(measured.lifelong)
                for index, (request, row, choice, correct) in enumerate(zip(
                    measured.requests[resample], plan.rows,
                    measured.lifelong[resample].choices, measured.lifelong[resample].correct,
                    strict=True))] if self.evaluator.settings.log_samples else (),
            metrics=_metrics(plan, measured, verdict, self.settings, seam_exact,
                             round(sum(single_tokens) / len(single_tokens), 1),
                             repeats).to_json(),
            depth=plan.depth, seconds_build=built, seconds_model=seconds_model,
            model_requests=requests)


def _metrics(plan: CellPlan, measured: _Conditions, verdict: Verdict,
             settings: HaystackSettings, seam_exact: bool, single_tokens_mean: float,
             repeats: dict[str, int] | None) -> HaystackMetrics:
    """Everything the verdict and the session reports need; per-resample values keyed by
    resample id."""
    single, life = measured.single, measured.lifelong
    methods = sorted({m for scored in (*single.values(), *life.values()) for m in scored.methods})
    no_prediction = sum(s.no_prediction for s in life.values())
    no_prediction_single = sum(s.no_prediction for s in single.values())
    return HaystackMetrics(
        setting=plan.setting, n_task=plan.length.n_task, n_shot=plan.length.n_shot,
        length_setting=plan.length.label, permutation=plan.permutation,
        stream_index=plan.index, stream=[task.name for task in plan.stream],
        verdict=verdict.verdict, verdict_value=verdict.value, t=verdict.t, p=verdict.p,
        verdict_note=verdict.note,
        s_acc=_mean([s.accuracy for s in single.values()]),
        l_acc=_mean([s.accuracy for s in life.values()]),
        s_acc_by_resample={str(r): single[r].accuracy for r in sorted(single)},
        l_acc_by_resample={str(r): life[r].accuracy for r in sorted(life)},
        s_correct={str(r): single[r].bits() for r in sorted(single)},
        l_correct={str(r): life[r].bits() for r in sorted(life)},
        ood_rate=_mean([s.ood_rate for s in life.values()]),
        ood_rate_single=_mean([s.ood_rate for s in single.values()]),
        rank_method=",".join(methods), no_prediction=no_prediction,
        no_prediction_single=no_prediction_single,
        rank_note=rank_note(methods, no_prediction, no_prediction_single,
                            sum(len(s.choices) for s in life.values())),
        test_size=len(plan.rows), resamples=len(plan.resamples),
        offline_pack=settings.offline, reduced_defaults=settings.reduced,
        seam_exact=seam_exact, single_tokens_mean=single_tokens_mean,
        n_repeat_by_resample=repeats,
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")

