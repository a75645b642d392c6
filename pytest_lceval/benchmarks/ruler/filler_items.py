"""Haystacks made of whole items (distractor needles, JSON pairs) that cannot be cut.

Items are tens of tokens long (a UUID pair is ~70 BPE tokens), more than 1 % of a 4k budget, so
whole items alone cannot land a prompt within 1 % of its length. After filling greedily, the
filler keeps drawing candidates: one that fits the remaining gap is appended, and one a few
tokens longer than an item already chosen replaces it. Candidates are random draws, so
preferring some lengths biases nothing the task measures, and the gap closes to a few tokens.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator

from ...models.base import Tokenizer
from .filler_text import Piece, token_counts, tokenizer_cache

EXTRA_DRAWS = 96
"""Candidates drawn after the greedy fill to close the remaining gap."""


BLOCK = 256
"""Items a stream draws and counts at a time (one batched tokenisation)."""


class Stream:
    """A deterministic, memoised stream of candidate items.

    Every fitting round re-reads it from the start, so the same budget gives the same items, and
    each candidate is generated and tokenised once. Items are drawn ahead in blocks and counted
    in one batch; the source alone decides them, so reading ahead changes none of them.
    """

    def __init__(self, source: Iterator[str], count: Callable[[list[str]], list[int]]) -> None:
        self._source = source
        self._count = count
        self._seen: list[Piece] = []
        self._totals = [0]
        """``_totals[i]``: the tokens of the first ``i`` items."""
        self._positions: dict[int, list[int]] = {}
        """The indices of the items of each token count, in order."""

    def __getitem__(self, index: int) -> Piece:
        while len(self._seen) <= index:
            self._draw()
        return self._seen[index]

    def _draw(self) -> None:
        texts = [next(self._source) for _ in range(BLOCK)]
        for text, tokens in zip(texts, self._count(texts), strict=True):
            self._positions.setdefault(tokens, []).append(len(self._seen))
            self._seen.append(Piece(text, tokens))
            self._totals.append(self._totals[-1] + tokens)

    def prefix(self, budget: int) -> tuple[list[Piece], int]:
        """The longest run of items from the first whose counts sum to at most ``budget``, and
        that sum."""
        while self._totals[-1] <= budget:
            self._draw()
        count = max(0, bisect_right(self._totals, budget) - 1)
        return self._seen[:count], self._totals[count]

    def positions(self, tokens: int, before: int) -> list[int]:
        """The indices below ``before`` of the items of ``tokens`` tokens, in order."""
        indices = self._positions.get(tokens, [])
        return indices[:bisect_left(indices, before)]

    def largest(self, count: int = 16) -> int:
        """The largest of the first ``count`` items: the haystack's granularity in tokens."""
        return max(self[i].tokens for i in range(count))


STREAMS_KEPT = 128
"""Filler streams kept per tokenizer: the cases of a cell (100 samples by default) each have
their own, and the next cell (another length or depth) reads them again. A 128k-token stream
of needles holds about 1.2 MB."""


def shared_stream(tokenizer: Tokenizer, key: Hashable, make: Callable[[], Iterator[str]]
                  ) -> Stream:
    """The stream of item texts ``make()`` for ``key``, made once per tokenizer and kept for
    the next STREAMS_KEPT keys.

    A case draws the same filler at every length and depth (its seed ignores both), so the
    cells of one sample index share one stream and each item is tokenised once per run.
    """
    streams = tokenizer_cache(tokenizer).setdefault("streams", OrderedDict())
    if key in streams:
        streams.move_to_end(key)
    else:
        streams[key] = Stream(make(), lambda texts: token_counts(tokenizer, texts))
        while len(streams) > STREAMS_KEPT:
            streams.popitem(last=False)
    stream: Stream = streams[key]
    return stream


def fill(stream: Stream, budget: int) -> list[Piece]:
    """Items from ``stream`` whose token counts sum to at most ``budget``, as close as it gets."""
    chosen, total = stream.prefix(budget)
    index = len(chosen)
    by_tokens = _Positions(stream, index)
    for draw in range(index, index + EXTRA_DRAWS):
        gap = budget - total
        if gap == 0:
            break
        candidate = stream[draw]
        if candidate.tokens <= gap:
            by_tokens[candidate.tokens].append(len(chosen))
            chosen.append(candidate)
            total += candidate.tokens
            continue
        gain = _swap(chosen, by_tokens, candidate, gap)
        total += gain
    return chosen


class _Positions(dict[int, list[int]]):
    """The positions in ``chosen`` of the items of each token count: those of the stream's
    prefix, looked up in the stream only for the counts a fill touches."""

    def __init__(self, stream: Stream, prefix: int) -> None:
        super().__init__()
        self._stream, self._prefix = stream, prefix

    def __missing__(self, tokens: int) -> list[int]:
        self[tokens] = self._stream.positions(tokens, self._prefix)
        return self[tokens]


def _swap(chosen: list[Piece], by_tokens: _Positions, candidate: Piece,
          gap: int) -> int:
    """Replace a chosen item shorter than ``candidate`` by at most ``gap``; the tokens gained."""
    for gain in range(min(gap, candidate.tokens - 1), 0, -1):
        positions = by_tokens[candidate.tokens - gain]
        if positions:
            position = positions.pop()
            chosen[position] = candidate
            by_tokens[candidate.tokens].append(position)
            return gain
    return 0
