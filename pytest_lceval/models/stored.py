"""The store in front of a backend: only missing answers reach the model, each saved at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from ..foundation.measuring import current
from ..results.records import GenerateRequest, Generation, Ranking, RankRequest
from ..store.database import Store, process_owner
from .base import Backend

R = TypeVar("R", GenerateRequest, RankRequest)
A = TypeVar("A", Generation, Ranking)

Progress = Callable[[int, int, int, float], None]
"""Called after each backend batch with (done, total, tokens so far, seconds so far)."""


CLAIM_POLL_SECONDS = 0.2
"""How often a process waiting for requests another process has claimed looks for answers."""
HEARTBEAT_SECONDS = 1.0
"""How often progress hears from a batch the model is still working on."""


@dataclass
class CallCounter:
    """How much work reached the model; tests use it to prove store reuse."""

    requests: int = 0
    batches: int = 0
    reused: int = 0
    seconds: float = 0.0
    by_thread: dict[int, int] = field(default_factory=dict)
    """Requests answered for each thread's asks: a cell measured while other cells' requests
    share its batches (lookahead) counts its own."""
    seconds_by_thread: dict[int, float] = field(default_factory=dict)
    """Seconds of answering spent on each thread's asks; a shared call's seconds are split
    among its asks by the requests each had answered."""
    by_endpoint: dict[str, int] = field(default_factory=dict)
    """Requests each replica answered, for a backend that has several (``answered_by``)."""

    @property
    def here(self) -> int:
        """Requests answered so far for this thread's asks."""
        return self.by_thread.get(threading.get_ident(), 0)

    @property
    def seconds_here(self) -> float:
        """Seconds of answering spent so far on this thread's asks."""
        return self.seconds_by_thread.get(threading.get_ident(), 0.0)

    def credit(self, thread: int, requests: int, seconds: float) -> None:
        self.by_thread[thread] = self.by_thread.get(thread, 0) + requests
        self.seconds_by_thread[thread] = self.seconds_by_thread.get(thread, 0.0) + seconds


class StoredModel:
    """A Backend wrapper that answers from the store first and stores every new answer.

    Misses are sent in batches of ``batch_size``; each batch is committed before the next one
    starts, so killing the run loses at most one batch. A process claims the misses in the
    store before answering them, so two xdist workers never answer one request twice: a
    request another live process has claimed is waited for instead.
    """

    def __init__(self, backend: Backend, store: Store, batch_size: int = 8,
                 run_started: float | None = None) -> None:
        self.backend = backend
        self.store = store
        self.batch_size = batch_size
        self.calls = CallCounter()
        self.owner = process_owner()
        self.run_started = run_started
        """When the run began (its controller's clock): an answer stored since then was
        answered by this run, in this process or another, and is not counted as read from the
        store; None counts every stored answer as read."""

    def read_from_earlier_runs(self, keys: Sequence[str]) -> int:
        """How many of ``keys`` (each occurrence) have answers stored before this run."""
        if not keys or self.run_started is None:
            return len(keys)
        earlier = self.store.stored_before(self.backend.fingerprint, keys, self.run_started)
        return sum(1 for key in keys if key in earlier)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def generate(self, requests: Sequence[GenerateRequest],
                 progress: Progress | None = None) -> list[Generation]:
        return self._ask("generate", requests, progress)

    def rank(self, requests: Sequence[RankRequest],
             progress: Progress | None = None) -> list[Ranking]:
        return self._ask("rank", requests, progress)

    def _ask(self, kind: str, requests: Sequence[Any], progress: Progress | None) -> list[Any]:
        gatherer = current().gatherer  # lookahead's, in a thread that measures a window's cell
        if gatherer is not None:
            return gatherer.ask(self, kind, requests, progress)
        started = time.perf_counter()
        answers, answered = self.answer_now(kind, requests, progress)
        self.calls.credit(threading.get_ident(), sum(answered), time.perf_counter() - started)
        return answers

    def answer_now(self, kind: str, requests: Sequence[Any],
                   progress: Progress | None = None) -> tuple[list[Any], list[bool]]:
        """The answers to ``requests`` in order, and for each whether this call had the model
        answer it (True only at the first of requests that are the same)."""
        if kind == "generate":
            return self._answer(requests, self.backend.generate, _generation, progress)
        return self._answer(requests, self.backend.rank, _ranking, progress)

    def _answer(self, requests: Sequence[R], call: Callable[[Sequence[R]], list[A]],
                load: Callable[[dict[str, Any]], A], progress: Progress | None
                ) -> tuple[list[A], list[bool]]:
        started = time.perf_counter()
        fingerprint = self.backend.fingerprint
        keys = [request.key() for request in requests]
        by_key = dict(zip(keys, requests, strict=True))
        answers: dict[str, A] = {
            key: load(value) for key, value in self.store.get_answers(fingerprint, keys).items()
        }
        self.calls.reused += self.read_from_earlier_runs([key for key in keys if key in answers])
        fresh: set[str] = set()
        # One entry per distinct missing key: duplicates in a batch reach the model once.
        pending = [key for key in by_key if key not in answers]
        total, done, tokens = len(pending), 0, 0
        while pending:
            mine, _ = self.store.claim(fingerprint, pending, self.owner)
            try:
                for start in range(0, len(mine), self.batch_size):
                    batch = mine[start : start + self.batch_size]
                    with _heartbeat(progress, (done, total, tokens), started):
                        results = call([by_key[key] for key in batch])
                    if len(results) != len(batch):
                        raise RuntimeError(
                            f"backend {self.backend.spec} returned {len(results)} answers for "
                            f"{len(batch)} requests")
                    self.store.put_answers(fingerprint, ((key, asdict(result)) for key, result
                                                         in zip(batch, results, strict=True)))
                    answers.update(zip(batch, results, strict=True))
                    fresh.update(batch)
                    self.store.renew_claims(self.owner)
                    self.calls.requests += len(batch)
                    self.calls.batches += 1
                    done += len(batch)
                    tokens += sum(result.prompt_tokens for result in results)
                    if progress is not None:
                        progress(done, total, tokens, time.perf_counter() - started)
            except BaseException:
                self.store.release_claims(fingerprint, [k for k in mine if k not in answers],
                                          self.owner)
                raise
            # What is left was claimed by another process, or answered by one since the store
            # was first read (the claim passes over answered requests): read what has landed,
            # and wait for the rest.
            waiting = [key for key in pending if key not in answers]
            landed = self.store.get_answers(fingerprint, waiting) if waiting else {}
            answers.update((key, load(value)) for key, value in landed.items())
            done += len(landed)
            pending = [key for key in waiting if key not in answers]
            if pending:
                time.sleep(CLAIM_POLL_SECONDS)
        self.calls.seconds += time.perf_counter() - started
        first = {key: index for index, key in reversed(list(enumerate(keys)))}
        return ([answers[key] for key in keys],
                [key in fresh and first[key] == index for index, key in enumerate(keys)])


@contextmanager
def _heartbeat(progress: Progress | None, counts: tuple[int, int, int],
               started: float) -> Iterator[None]:
    """While the model works on a batch, ``progress`` hears the counts so far (done, total,
    tokens) every second, so a cell whose requests wait (a slow server, a long prefill) still
    shows that it runs. Only the heartbeat's thread reports until the batch ends, and it has
    stopped when this returns."""
    if progress is None:
        yield
        return
    report = progress
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_SECONDS):
            report(*counts, time.perf_counter() - started)

    thread = threading.Thread(target=beat, daemon=True, name="lceval-heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _generation(value: dict[str, Any]) -> Generation:
    return Generation(**value)


def _ranking(value: dict[str, Any]) -> Ranking:
    return Ranking(**{**value, "logprobs": tuple(value["logprobs"])})
