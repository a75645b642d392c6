"""The store in front of a backend: only missing answers reach the model, each saved at once."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from ..records import GenerateRequest, Generation, Ranking, RankRequest
from ..store import Store
from .base import Backend

R = TypeVar("R", GenerateRequest, RankRequest)
A = TypeVar("A", Generation, Ranking)

Progress = Callable[[int, int, int, float], None]
"""Called after each backend batch with (done, total, tokens so far, seconds so far)."""


@dataclass
class CallCounter:
    """How much work reached the model; tests use it to prove store reuse."""

    requests: int = 0
    batches: int = 0
    reused: int = 0
    seconds: float = 0.0


class StoredModel:
    """A Backend wrapper that answers from the store first and stores every new answer.

    Misses are sent in batches of ``batch_size``; each batch is committed before the next one
    starts, so killing the run loses at most one batch.
    """

    def __init__(self, backend: Backend, store: Store, batch_size: int = 8) -> None:
        self.backend = backend
        self.store = store
        self.batch_size = batch_size
        self.calls = CallCounter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def generate(self, requests: Sequence[GenerateRequest],
                 progress: Progress | None = None) -> list[Generation]:
        return self._answer(requests, self.backend.generate, _generation, progress)

    def rank(self, requests: Sequence[RankRequest],
             progress: Progress | None = None) -> list[Ranking]:
        return self._answer(requests, self.backend.rank, _ranking, progress)

    def _answer(self, requests: Sequence[R], call: Callable[[Sequence[R]], list[A]],
                load: Callable[[dict[str, Any]], A], progress: Progress | None) -> list[A]:
        fingerprint = self.backend.fingerprint
        keys = [request.key() for request in requests]
        answers: dict[str, A] = {
            key: load(value) for key, value in self.store.get_answers(fingerprint, keys).items()
        }
        self.calls.reused += sum(1 for key in keys if key in answers)
        # One entry per distinct missing key: duplicates in a batch reach the model once.
        missing = list({key: request for key, request in zip(keys, requests, strict=True)
                        if key not in answers}.items())
        tokens, started = 0, time.perf_counter()
        for start in range(0, len(missing), self.batch_size):
            batch = missing[start : start + self.batch_size]
            results = call([request for _, request in batch])
            if len(results) != len(batch):
                raise RuntimeError(
                    f"backend {self.backend.spec} returned {len(results)} answers for "
                    f"{len(batch)} requests"
                )
            self.store.put_answers(
                fingerprint, ((k, asdict(a)) for (k, _), a in zip(batch, results, strict=True)))
            answers.update((key, result) for (key, _), result in zip(batch, results, strict=True))
            self.calls.requests += len(batch)
            self.calls.batches += 1
            tokens += sum(result.prompt_tokens for result in results)
            if progress is not None:
                progress(start + len(batch), len(missing), tokens, time.perf_counter() - started)
        self.calls.seconds += time.perf_counter() - started
        return [answers[key] for key in keys]


def _generation(value: dict[str, Any]) -> Generation:
    return Generation(**value)


def _ranking(value: dict[str, Any]) -> Ranking:
    return Ranking(**{**value, "logprobs": tuple(value["logprobs"])})
