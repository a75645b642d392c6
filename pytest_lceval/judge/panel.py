"""Asking the judges: every prompt of a cell in one batch through the store (so a rerun never
asks again, and a changed judge never reuses another's verdicts), one retry of each unreadable
reply with the reason it failed, the score of each case by its rubric, and the agreement
numbers."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..foundation.measurement import Scored
from ..models.base import Backend
from ..models.registry import ModelSpec
from ..models.stored import CallCounter, StoredModel
from ..results.records import Case, GenerateRequest, Prompt
from ..store.database import Store
from ..tasks.judged import Ask, JudgedTask, Rubric
from . import keypoints as keypoints_module
from .agreement import kappa, mean_difference, rank_correlation
from .prompts import RETRY
from .replies import Unparsed, parse_scores

DEFAULT_MAX_NEW_TOKENS = 2048
"""HELMET's judge generation budget (``OpenAIModel``'s default; its summary judge asks 4096)."""
MIN_REPLY_TOKENS = 32
"""A prompt that leaves the judge less room than this to reply is not asked (unparsed)."""


@dataclass(frozen=True)
class JudgeSpec:
    """A judge as the options give it."""

    spec: ModelSpec
    option: str
    """The option that named it (--lceval-judge or --lceval-judge2), for messages."""
    base_url: str | None = None
    concurrency: int = 8
    batch_size: int = 16
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    tokenizer: str | None = None
    """What counts an openai: judge's tokens (--lceval-judge-tokenizer)."""
    prefill: bool = False
    """--lceval-judge-prefill: the reply is begun for the judge (the JSON object's first field,
    the key points' "1."), so a small judge that never reaches the format still gives scores;
    it skips the reasoning the papers' judges write first."""


@dataclass(frozen=True)
class Rated:
    """One ask's outcome: its ratings, or None with the reason it could not be read."""

    ratings: dict[str, int] | None
    retried: bool = False
    problem: str = ""


class Judge:
    """One judge model behind the store, loaded at its first request."""

    def __init__(self, spec: JudgeSpec, load: Callable[[JudgeSpec], Backend], store: Store,
                 run_started: float | None = None) -> None:
        self.spec = spec
        self._load = load
        self._store = store
        self._run_started = run_started

    @functools.cached_property
    def model(self) -> StoredModel:
        return StoredModel(self._load(self.spec), self._store, self.spec.batch_size,
                           self._run_started)

    @property
    def identity(self) -> str:
        """The spec and the fingerprint, as results and saved runs record the judge."""
        return f"{self.spec.spec}@{self.model.fingerprint[:16]}"

    def replies(self, prompts: Sequence[str], begun: Sequence[str] = (),
                stop: tuple[str, ...] = ()) -> list[str | None]:
        """The judge's reply to each prompt, including the text ``begun`` for it (the prefill,
        one per prompt, or none) and the ``stop`` string it ended at; None for a prompt too long
        for the judge's window."""
        model = self.model
        starts = list(begun) or [""] * len(prompts)
        requests: list[GenerateRequest | None] = []
        for text, start in zip(prompts, starts, strict=True):
            prompt = Prompt(text, start)
            rendered = model.renderer.render(prompt)
            room = model.context_window - model.renderer.count(rendered)
            budget = min(self.spec.max_new_tokens, room)
            requests.append(None if budget < MIN_REPLY_TOKENS else GenerateRequest(
                rendered, budget, stop, model.renderer.chat_source(prompt)))
        asked = [request for request in requests if request is not None]
        answers = iter(model.generate(asked)) if asked else iter(())
        closing = "".join(stop[:1])
        return [None if request is None else start + next(answers).text + closing
                for request, start in zip(requests, starts, strict=True)]

    def _ask(self, asks: Sequence[Ask], prompts: Sequence[str]) -> list[str | None]:
        """Replies to ``prompts`` (the asks' own or their retries), begun for the judge when it
        is prefilled: up to the first field's value, ended at the object's close."""
        if not self.spec.prefill:
            return self.replies(prompts)
        begun = [f'{{"{ask.fields[0].name}": ' for ask in asks]
        return self.replies(prompts, begun, ("}",))

    def rate(self, asks: Sequence[Ask]) -> list[Rated]:
        """Every ask in one batch; each unreadable reply asked once more with its problem."""
        replies = self._ask(asks, [ask.prompt for ask in asks])
        rated: list[Rated] = []
        retry: dict[int, str] = {}
        for index, (ask, reply) in enumerate(zip(asks, replies, strict=True)):
            if reply is None:
                rated.append(Rated(None, problem="the prompt does not fit the judge's window"))
                continue
            try:
                rated.append(Rated(parse_scores(reply, ask.fields)))
            except Unparsed as exc:
                rated.append(Rated(None, problem=str(exc)))
                retry[index] = RETRY.format(prompt=ask.prompt, reply=reply.strip(),
                                            problem=exc, example=ask.example)
        again = self._ask([asks[i] for i in retry], list(retry.values()))
        for index, reply in zip(retry, again, strict=True):
            try:
                if reply is None:
                    raise Unparsed("the retry does not fit the judge's window")
                rated[index] = Rated(parse_scores(reply, asks[index].fields), retried=True)
            except Unparsed as exc:
                rated[index] = Rated(None, retried=True, problem=str(exc))
        return rated

    def keypoints(self, references: Sequence[str]) -> list[list[str]]:
        """Key points the judge writes for each reference summary (one retry when none)."""
        prompts = [keypoints_module.keypoint_prompt(text) for text in references]
        begun = ["1. " if self.spec.prefill else ""] * len(prompts)
        points = [keypoints_module.parse_keypoints(reply or "")
                  for reply in self.replies(prompts, begun)]
        again = [i for i, found in enumerate(points) if not found]
        retries = self.replies([keypoints_module.RETRY.format(prompt=prompts[i], reply="")
                                for i in again], [begun[i] for i in again]) if again else []
        for index, reply in zip(again, retries, strict=True):
            points[index] = keypoints_module.parse_keypoints(reply or "")
        return points


@dataclass
class Judged:
    """A judge's verdicts on a cell's outputs."""

    scores: list[float | None]
    """Per case; None where the rubric leaves an unreadable case out of the mean."""
    unparsed: list[bool]
    ratings: list[list[Rated]]
    retried: int
    requests: int
    seconds: float


def judge_outputs(judge: Judge, rubric: Rubric, outputs: Sequence[str],
                  cases: Sequence[Case]) -> Judged:
    """Rate a cell's outputs by ``rubric`` (key points first where it needs them)."""
    model = judge.model
    before, spent = model.calls.here, model.calls.seconds_here
    points: list[list[str]] = (
        [list(case.meta["keypoints"]) if case.meta.get("keypoints") else [] for case in cases])
    if rubric.needs_keypoints:
        missing = [i for i, found in enumerate(points) if not found]
        written = judge.keypoints([cases[i].gold[0] for i in missing]) if missing else []
        for index, found in zip(missing, written, strict=True):
            points[index] = found
    asks = [rubric.asks(output, case, found) if found or not rubric.needs_keypoints else []
            for output, case, found in zip(outputs, cases, points, strict=True)]
    flat = judge.rate([ask for group in asks for ask in group])
    scores: list[float | None] = []
    unparsed: list[bool] = []
    ratings: list[list[Rated]] = []
    position = 0
    for case, group, found in zip(cases, asks, points, strict=True):
        rated = flat[position:position + len(group)]
        position += len(group)
        ratings.append(rated)
        readable = bool(group) and all(r.ratings is not None for r in rated)
        unparsed.append(not readable)
        scores.append(rubric.score([r.ratings for r in rated if r.ratings is not None], case,
                                   found) if readable else rubric.missing)
    return Judged(scores, unparsed, ratings, sum(r.retried for r in flat),
                  model.calls.here - before, model.calls.seconds_here - spent)


class JudgePanel:
    """The judge, and the optional second judge that rates the same outputs for agreement;
    ``texts``, the prompt texts every rubric is asked in (``Rubric.worded``: those the plugins
    offer through ``pytest_lceval_judge_texts``, HELMET's own under
    ``--lceval-helmet-judge-prompts``; none for the project's words)."""

    def __init__(self, first: Judge, second: Judge | None = None,
                 texts: Mapping[str, str] | None = None) -> None:
        self.first = first
        self.second = second
        self.texts: Mapping[str, str] = dict(texts or {})

    @property
    def identity(self) -> str:
        """The first judge's, which scores the cells."""
        return self.first.identity

    def used(self) -> dict[str, CallCounter]:
        """The work of each judge that was loaded (a run that judged nothing loads none)."""
        judges = {"judge": self.first, "judge2": self.second}
        return {role: judge.model.calls for role, judge in judges.items()
                if judge is not None and "model" in vars(judge)}  # cached_property set

    def score(self, task: JudgedTask, outputs: Sequence[str], cases: Sequence[Case],
              agreement: bool = True) -> Scored:
        """The judge's scores of ``outputs``; with ``agreement``, the cell's agreement numbers
        (rule metric always, second judge when there is one)."""
        rubric = task.rubric.worded(self.texts)
        judged = judge_outputs(self.first, rubric, outputs, cases)
        metrics: dict[str, Any] = {
            "judge": self.first.identity, "judge_rubric": rubric.name,
            "judge_unparsed": sum(judged.unparsed), "judge_retried": judged.retried,
            "judge_requests": judged.requests, "seconds_judge": round(judged.seconds, 3),
        }
        if agreement:
            rules = [task.score(output, case) for output, case in zip(outputs, cases,
                                                                      strict=True)]
            metrics.update(_rule_agreement(task.rule_metric, judged.scores, rules))
            if self.second is not None:
                metrics.update(_second_opinion(self.second, rubric, outputs, cases, judged))
        return Scored(judged.scores, metrics, self.first.identity)


def _rule_agreement(metric: str, scores: Sequence[float | None],
                    rules: Sequence[float]) -> dict[str, Any]:
    pairs = [(s, r) for s, r in zip(scores, rules, strict=True) if s is not None]
    judged, ruled = [s for s, _ in pairs], [r for _, r in pairs]
    return {"judge_rule_metric": metric,
            metric: round(sum(rules) / len(rules), 4) if rules else None,
            "judge_rule_spearman": rank_correlation(judged, ruled),
            "judge_rule_gap": mean_difference(ruled, judged)}


def _second_opinion(second: Judge, rubric: Rubric, outputs: Sequence[str],
                    cases: Sequence[Case], first: Judged) -> dict[str, Any]:
    """The second judge's scores of the same outputs, and kappa per rubric scale."""
    other = judge_outputs(second, rubric, outputs, cases)
    kept = [s for s in other.scores if s is not None]
    pairs = [(a, b) for a, b in zip(first.scores, other.scores, strict=True)
             if a is not None and b is not None]
    metrics: dict[str, Any] = {
        "judge2": second.identity, "judge2_unparsed": sum(other.unparsed),
        "judge2_score": round(sum(kept) / len(kept), 4) if kept else None,
        "judge_score_diff": mean_difference([a for a, _ in pairs], [b for _, b in pairs]),
        "seconds_judge2": round(other.seconds, 3),
    }
    ratings: dict[str, tuple[list[int], list[int]]] = {}
    for mine, theirs in zip(first.ratings, other.ratings, strict=True):
        if len(mine) != len(theirs):  # the judges wrote different key points: no pairs
            continue
        for a, b in zip(mine, theirs, strict=True):
            if a.ratings is None or b.ratings is None:
                continue
            for name, value in a.ratings.items():
                ratings.setdefault(name, ([], []))
                ratings[name][0].append(value)
                ratings[name][1].append(b.ratings[name])
    for scale in rubric.scales:
        if scale.name in ratings:
            metrics[f"judge_kappa_{scale.name}"] = kappa(*ratings[scale.name], scale)
    return metrics
