"""Token-level context building: pieces of text that carry their token counts, counted once per
tokenizer, and key items inserted at the piece boundary nearest a requested depth.

A context is a list of :class:`Piece` s, each carrying its own token count. Every piece starts with
its own leading whitespace (``" Next sentence."``, ``"\\nOne of the ..."``), so that for byte-level
BPE and whitespace tokenizers the count of a concatenation is the sum of the counts: the builder
predicts a context's length by addition instead of re-tokenising it. The prediction is only a
guide; :mod:`.fitting` measures the final rendered prompt and corrects.

Depth is measured in tokens as ``100 * before / (context - item)``: the share of the rest of the
context that lies before the item. 0 % puts the item first and 100 % last, at any context length
(a "start / context" ratio could never reach 100 %).
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Protocol, runtime_checkable

from ...models.base import Tokenizer

NOISE = ("The grass is green. The sky is blue. The sun is yellow. Here we go. "
         "There and back again.")
"""RULER's noise haystack line (NIAH's and VT's haystacks repeat it)."""


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of context text and its token count when tokenised on its own."""

    text: str
    tokens: int
    tag: str | None = None
    """Names a key item (gold needle, distractor, demo pair); None for haystack."""


@runtime_checkable
class BatchTokenizer(Protocol):
    """A tokenizer that counts many texts in one call (``HFText``)."""

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


def token_counts(tokenizer: Tokenizer, texts: Sequence[str]) -> list[int]:
    """The count of each text alone, in one batch where the tokenizer has one."""
    if isinstance(tokenizer, BatchTokenizer):
        return tokenizer.count_many(texts)
    return [len(tokenizer.encode(text)) for text in texts]


def piece(tokenizer: Tokenizer, text: str, tag: str | None = None) -> Piece:
    """A key item: counted once, never split."""
    return Piece(text, len(tokenizer.encode(text)), tag)


_CACHES: weakref.WeakKeyDictionary[Any, dict[Hashable, Any]] = weakref.WeakKeyDictionary()
"""Each tokenizer's memo of counts, dropped with the tokenizer: a memo, not state (what it holds
follows from the tokenizer and the text alone), and nothing in it outlives its tokenizer."""


def tokenizer_cache(tokenizer: Tokenizer) -> dict[Hashable, Any]:
    """A dict that lives as long as ``tokenizer``: token counts are only valid for their
    tokenizer, and a process may hold several (tests, two models). A tokenizer that cannot be
    weakly referenced gets a new, empty one each time (its counts are counted again)."""
    try:
        return _CACHES.setdefault(tokenizer, {})
    except TypeError:
        return {}


def unit_counts(tokenizer: Tokenizer, units: tuple[str, ...]) -> tuple[int, ...]:
    """The token count of each unit (a sentence with its leading space) alone, counted once
    per (tokenizer, units): a 128k-token essay haystack is ~5,000 sentences."""
    cache = tokenizer_cache(tokenizer)
    key = ("unit counts", units)
    if key not in cache:
        cache[key] = tuple(token_counts(tokenizer, units))
    counts: tuple[int, ...] = cache[key]
    return counts


def insert_at_depth(pieces: list[Piece], item: Piece, depth: float) -> list[Piece]:
    """``pieces`` with ``item`` at the boundary nearest ``depth`` percent (in tokens)."""
    if not pieces:
        return [item]
    ends = list(accumulate(p.tokens for p in pieces))
    index = _nearest_boundary([0, *ends], ends[-1] * depth / 100.0)
    return [*pieces[:index], item, *pieces[index:]]


def _nearest_boundary(cumulative: list[int], target: float) -> int:
    """Index i (0..len-1) of the boundary whose token offset cumulative[i] is nearest target."""
    right = min(bisect_left(cumulative, target), len(cumulative) - 1)
    if right > 0 and target - cumulative[right - 1] <= cumulative[right] - target:
        return right - 1
    return right


@dataclass(frozen=True)
class Context:
    """A built context: its text, predicted token count, and where each key item landed."""

    text: str
    tokens: int
    depths: tuple[tuple[str, float], ...]
    """(tag, achieved depth in percent) of every key item, in context order."""
    parts: tuple[Piece, ...] = ()
    """The pieces joined into ``text``, so that a prompt holding it can be counted from their
    counts (``Renderer.count_joined``)."""
    trim: tuple[int, int] = (0, 0)
    """Characters ``finish`` took off the joined pieces' start and end."""
    units: int = 0
    """Haystack units it holds (words, lines), where its builder counts them (RULER's
    ``num_haystack``; ``essay_haystack``)."""
    insertions: tuple[int, ...] = ()
    """The unit index (sentence, line) each key item was inserted before, in the order the
    builder was given them, where it counts them (``essay_haystack``)."""

    def depth_of(self, tag: str) -> float:
        return next(depth for name, depth in self.depths if name == tag)

    def depths_of(self, tag: str) -> list[float]:
        return [depth for name, depth in self.depths if name == tag]


def assemble(pieces: Sequence[Piece], finish: Callable[[str], str] = str.lstrip) -> Context:
    """Join pieces into a Context, measuring each key item's depth from the pieces' counts."""
    total = sum(p.tokens for p in pieces)
    depths, before = [], 0
    for part in pieces:
        if part.tag is not None:
            rest = total - part.tokens
            depths.append((part.tag, 100.0 * before / rest if rest > 0 else 0.0))
        before += part.tokens
    joined = "".join(p.text for p in pieces)
    text = finish(joined)
    start = joined.find(text) if text else 0
    return Context(text, total, tuple(depths), tuple(pieces),
                   (start, len(joined) - len(text) - start))
