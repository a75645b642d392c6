"""Haystacks made of whole items (distractor needles, JSON pairs) that cannot be cut.

Items are tens of tokens long (a UUID pair is ~70 BPE tokens), more than 1 % of a 4k budget, so
whole items alone cannot land a prompt within 1 % of its length. After filling greedily, the
filler keeps drawing candidates: one that fits the remaining gap is appended, and one a few
tokens longer than an item already chosen replaces it. Candidates are random draws, so
preferring some lengths biases nothing the task measures, and the gap closes to a few tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator

from ..models.base import Tokenizer
from .haystack_text import Piece, tokenizer_cache

EXTRA_DRAWS = 96
"""Candidates drawn after the greedy fill to close the remaining gap."""


class Stream:
    """A deterministic, memoised stream of candidate items.

    Every fitting round re-reads it from the start, so the same budget gives the same items, and
    each candidate is generated and tokenised once.
    """

    def __init__(self, source: Iterator[Piece]) -> None:
        self._source = source
        self._seen: list[Piece] = []

    def __getitem__(self, index: int) -> Piece:
        while len(self._seen) <= index:
            self._seen.append(next(self._source))
        return self._seen[index]

    def largest(self, count: int = 16) -> int:
        """The largest of the first ``count`` items: the haystack's granularity in tokens."""
        return max(self[i].tokens for i in range(count))


STREAMS_KEPT = 64
"""Filler streams kept per tokenizer (a few per case index of the recent cells)."""


def shared_stream(tokenizer: Tokenizer, key: Hashable, make: Callable[[], Iterator[Piece]]
                  ) -> Stream:
    """The stream for ``key``, made once per tokenizer and kept for the next STREAMS_KEPT keys.

    A case draws the same filler at every length and depth (its seed ignores both), so the
    cells of one sample index share one stream and each item is tokenised once per run.
    """
    streams = tokenizer_cache(tokenizer).setdefault("streams", OrderedDict())
    if key in streams:
        streams.move_to_end(key)
    else:
        streams[key] = Stream(make())
        while len(streams) > STREAMS_KEPT:
            streams.popitem(last=False)
    stream: Stream = streams[key]
    return stream


def fill(stream: Stream, budget: int) -> list[Piece]:
    """Items from ``stream`` whose token counts sum to at most ``budget``, as close as it gets."""
    chosen: list[Piece] = []
    total, index = 0, 0
    while total + stream[index].tokens <= budget:
        chosen.append(stream[index])
        total += stream[index].tokens
        index += 1
    by_tokens: dict[int, list[int]] = {}
    for position, item in enumerate(chosen):
        by_tokens.setdefault(item.tokens, []).append(position)
    for draw in range(index, index + EXTRA_DRAWS):
        gap = budget - total
        if gap == 0:
            break
        candidate = stream[draw]
        if candidate.tokens <= gap:
            by_tokens.setdefault(candidate.tokens, []).append(len(chosen))
            chosen.append(candidate)
            total += candidate.tokens
            continue
        gain = _swap(chosen, by_tokens, candidate, gap)
        total += gain
    return chosen


def _swap(chosen: list[Piece], by_tokens: dict[int, list[int]], candidate: Piece,
          gap: int) -> int:
    """Replace a chosen item shorter than ``candidate`` by at most ``gap``; the tokens gained."""
    for gain in range(min(gap, candidate.tokens - 1), 0, -1):
        positions = by_tokens.get(candidate.tokens - gain)
        if positions:
            position = positions.pop()
            chosen[position] = candidate
            by_tokens.setdefault(candidate.tokens, []).append(position)
            return gain
    return 0
