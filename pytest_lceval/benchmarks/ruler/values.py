"""Keys and values for the recall tasks, drawn from a seeded ``random.Random`` and never repeated
within a case (a repeated key would make the question ambiguous).

Word keys are "adjective-noun" pairs from the ``wonderwords`` package's adjective and noun lists,
as RULER's (a uniform adjective and a uniform noun: RULER's uniform choice among all pairs).
Numbers have seven digits; UUIDs are version-4 UUIDs built from the rng's bits, as RULER's, so
they are reproducible (``uuid.uuid4()`` reads the OS entropy pool).
"""

from __future__ import annotations

import random
import uuid
from functools import cache
from importlib.resources import files

KINDS = ("word", "number", "uuid")
_RETRIES = 64
"""Draws before a word key gets a numeric suffix (only when the lists run short)."""


@cache
def word_list(name: str) -> tuple[str, ...]:
    """A ``wonderwords`` list ("nounlist", "adjectivelist"), without repeats, sorted."""
    text = (files("wonderwords") / "assets" / f"{name}.txt").read_text(encoding="utf-8")
    return tuple(sorted({line.strip() for line in text.splitlines() if line.strip()}))


class Draw:
    """Unique keys or values of one kind from ``rng``; ``taken`` holds what is already used."""

    def __init__(self, rng: random.Random, kind: str, taken: set[str] | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown value kind {kind!r}; known: {', '.join(KINDS)}")
        self.rng = rng
        self.kind = kind
        self.taken = taken if taken is not None else set()

    def __call__(self) -> str:
        for attempt in range(_RETRIES + 1):
            value = self._one()
            if attempt == _RETRIES:
                value = f"{value}-{len(self.taken)}"
            if value not in self.taken:
                self.taken.add(value)
                return value
        raise AssertionError("unreachable: the suffixed value is always new")

    def many(self, count: int) -> list[str]:
        return [self() for _ in range(count)]

    def _one(self) -> str:
        if self.kind == "number":
            return str(self.rng.randint(1_000_000, 9_999_999))
        if self.kind == "uuid":
            return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        adjective = self.rng.choice(word_list("adjectivelist"))
        return f"{adjective}-{self.rng.choice(word_list('nounlist'))}"
