"""Models that rate texts rather than answer prompts (the citation NLI classifier), put behind
the store as the model under test and the judge are: every rating is saved under the scoring
model's fingerprint, so a rerun, or another xdist worker, asks it only what it has not rated.

A plugin offers one through ``pytest_lceval_scoring_models``; the evaluator holds them by name
and a task's ``cell_metrics`` receives them, so nothing about them is process-global.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from ..results.records import stable_hash
from ..store.database import Store
from .stored import CallCounter


class ScoringModel(Protocol):
    """Rates items (tuples of texts, e.g. premise and hypothesis) with JSON values."""

    @property
    def label(self) -> str:
        """What rated, for the results (e.g. 'hf:/models/nli')."""
        ...

    @property
    def fingerprint(self) -> str:
        """Everything that can change a rating, hashed (weights, library versions)."""
        ...

    def score(self, items: Sequence[tuple[str, ...]]) -> list[Any]: ...


class StoredScoring:
    """A ScoringModel that answers from the store first and stores every new rating at once."""

    def __init__(self, model: ScoringModel, store: Store) -> None:
        self.model = model
        self.store = store
        self.calls = CallCounter()

    @property
    def label(self) -> str:
        return self.model.label

    @property
    def fingerprint(self) -> str:
        return self.model.fingerprint

    def score(self, items: Sequence[tuple[str, ...]]) -> list[Any]:
        keys = [stable_hash(["score", *item]) for item in items]
        by_key = dict(zip(keys, items, strict=True))
        fingerprint = self.model.fingerprint
        ratings = {key: value["rating"]
                   for key, value in self.store.get_answers(fingerprint, keys).items()}
        self.calls.reused += sum(key in ratings for key in keys)
        missing = [key for key in by_key if key not in ratings]
        if missing:
            started = time.perf_counter()
            fresh = self.model.score([by_key[key] for key in missing])
            self.calls.seconds += time.perf_counter() - started
            if len(fresh) != len(missing):
                raise RuntimeError(f"scoring model {self.label} returned {len(fresh)} ratings "
                                   f"for {len(missing)} items")
            rated = list(zip(missing, fresh, strict=True))
            self.store.put_answers(fingerprint, ((key, {"rating": r}) for key, r in rated))
            ratings.update(rated)
            self.calls.requests += len(missing)
            self.calls.batches += 1
        return [ratings[key] for key in keys]
