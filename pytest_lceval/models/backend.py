"""The base class of the backends: what each of them used to set up, split and time alike.

A backend subclass says what it is (``identity()``) and how it answers; the base class turns the
identity into the fingerprint that keys every stored answer, so no backend can forget a part of
it or hash it differently. Rank requests are split into prefix and suffix by one rule
(``split_rank``) and answers timed by one clock (``Stopwatch``).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from ..results.records import GenerateRequest, Generation, Ranking, RankRequest, stable_hash
from .base import Renderer, Tokenizer
from .options import ModelUnavailable


class BaseBackend(ABC):
    """A model under test (the ``Backend`` protocol) whose fingerprint is its identity's hash."""

    def __init__(self, spec: str, tokenizer: Tokenizer, renderer: Renderer,
                 context_window: int) -> None:
        self.spec = spec
        """The spec the user gave (e.g. 'smollm2'); shown in reports."""
        self.tokenizer = tokenizer
        self.renderer = renderer
        self.context_window = context_window
        """Maximum prompt + generated tokens the model accepts."""
        self.notes: list[str] = []
        """Lines for the run's output that the backend learns as it answers (the HF backend's
        CPU decoder verdict, once its weights have loaded); the evaluator prints each once."""

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything that can change an answer: weights, tokenizer, template, engine version,
        decoding settings. Never settings that cannot (concurrency, timeouts, the endpoint)."""

    @cached_property
    def fingerprint(self) -> str:
        """Part of every store key, so a changed model never reuses stale answers. Computed
        once: an identity may hash a whole vocabulary, and the store asks on every batch."""
        return stable_hash(self.identity())

    @abstractmethod
    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Greedy answers, in order."""

    @abstractmethod
    def rank(self, requests: Sequence[RankRequest]) -> list[Ranking]:
        """Option scores, in order."""

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """Short facts for the report header (model, device, dtype, engine...)."""

    def answered_by(self) -> dict[str, int]:
        """Requests each server answered so far, for a backend that spreads them over replicas
        (the run's usage line says how the work was shared, and where failover moved it); {}
        for one that answers in one place."""
        return {}


def model_unavailable(spec: str, exc: BaseException,
                      option: str = "--model") -> ModelUnavailable:
    """The one line a failed load is reported with, whether the backend could not be built or
    its weights, loaded at the first answer that needs them, could not be read."""
    cause = " ".join(str(exc).split())[:600] or type(exc).__name__
    return ModelUnavailable(f"cannot load {option}={spec}: {cause}")


def split_rank(request: RankRequest) -> tuple[str, str]:
    """(prefix, suffix), an empty prefix read as 'the whole prompt is the prefix': backends that
    compute a prefix once and tokenise each suffix in its context (hf_text.suffix_ids) split
    every request by this rule, so they read the same ids."""
    return (request.prefix, request.suffix) if request.prefix else (request.suffix, "")


class Stopwatch:
    """Seconds per request of a batch answered together, as Generation and Ranking record."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def per(self, requests: int) -> float:
        return (time.perf_counter() - self.started) / max(requests, 1)
