"""RULER's haystacks as its NIAH generator (``scripts/data/synthetic/niah.py``) writes them, fitted
to a token budget.

- **essay**: the essays concatenated as read, every run of whitespace made one space, split into
  words; a haystack of N words is the first N (the words repeated past the end), its sentences
  found by NLTK's Punkt (``sentences``), needles inserted between sentences, and the pieces
  (runs of sentences, needles) joined with a space. RULER's joins are kept byte for byte: a
  needle at index 0 leaves a leading space, two needles at one index a double space, a needle
  after the last sentence a trailing space.
- **lines** (noise, needle haystacks): whole lines (the noise line, or distractor needles) joined
  with newlines, a needle inserted as a line of its own.

A needle at a depth sampled as RULER samples it goes to index ``int(units * depth / 100)``
(RULER's rule); a needle at a depth of the grid goes to the unit boundary nearest that share of
the haystack's tokens, so that the axis means the same at every length (``Placed``).

Every case starts its essay at the first word, as RULER's does: its cases differ by their
needles and where they go. A haystack is measured as pieces that carry their own token counts
(``filler_text``), so the fitting adds counts instead of tokenising a long prompt repeatedly.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from itertools import accumulate

import numpy as np

from ...models.base import Tokenizer
from ...tasks.sentences import sentence_spans
from .filler_text import Context, Piece, assemble, tokenizer_cache, unit_counts

DEPTHS: tuple[int, ...] = tuple(int(d) for d in np.round(np.linspace(0, 100, num=40)))
"""RULER's needle depths (percent), sampled without replacement per case."""
MOST_COPIES = 64
"""Copies of the essays an essay haystack may repeat (RULER repeats its words past the end)."""


def insertion_index(units: int, depth: float) -> int:
    """RULER's insertion index for a needle at ``depth`` percent of ``units`` sentences."""
    return int(units * (depth / 100))


@dataclass(frozen=True)
class Essay:
    """The essays as RULER reads them, ``copies`` times over, with their sentences."""

    text: str
    """The words joined with single spaces."""
    word_ends: tuple[int, ...]
    """Character offset after each word."""
    spans: tuple[tuple[int, int], ...]
    """Sentence spans over ``text``."""
    span_ends: tuple[int, ...]

    @property
    def words(self) -> int:
        return len(self.word_ends)

    def sentences(self, words: int) -> tuple[int, str | None]:
        """The sentences of the first ``words`` words: how many are whole, and the cut last one
        (None when the words end with a sentence)."""
        end = self.word_ends[words - 1] if words else 0
        whole = bisect_right(self.span_ends, end)
        cut = whole < len(self.spans) and self.spans[whole][0] < end
        return whole, self.text[self.spans[whole][0]:end] if cut else None


@cache
def essay(texts: tuple[str, ...], copies: int = 1) -> Essay:
    """RULER's essay haystack from ``texts`` (in the order RULER reads its files)."""
    words = re.sub(r"\s+", " ", "".join(texts)).split(" ") * copies
    text = " ".join(words)
    ends = tuple(accumulate((len(word) + 1 for word in words), initial=-1))[1:]
    lead = len(text) - len(text.lstrip())  # RULER strips the text before splitting it
    spans = tuple((a + lead, b + lead) for a, b in sentence_spans(text.strip()))
    return Essay(text, ends, spans, tuple(b for _, b in spans))


@dataclass(frozen=True)
class Placed:
    """A needle and the depth (percent) it goes to: by RULER's rule (``insertion_index``), or,
    ``by_tokens``, at the unit boundary nearest that share of the haystack's tokens (the
    project's depth axis)."""

    item: Piece
    depth: float
    by_tokens: bool = False

    def at(self, units: Sequence[Piece]) -> int:
        if not self.by_tokens:
            return insertion_index(len(units), self.depth)
        cumulative = list(accumulate((unit.tokens for unit in units), initial=0))
        target = cumulative[-1] * self.depth / 100
        return min(range(len(cumulative)), key=lambda index: abs(cumulative[index] - target))


def _counted(tokenizer: Tokenizer, texts: Sequence[str]) -> list[Piece]:
    """Pieces of short texts (separators, a first sentence), each counted once per tokenizer."""
    table: dict[str, Piece] = tokenizer_cache(tokenizer).setdefault("ruler pieces", {})
    for text in texts:
        if text not in table:
            table[text] = Piece(text, len(tokenizer.encode(text)))
    return [table[text] for text in texts]


class EssayHaystack:
    """RULER's essay haystack fitted to a token budget, for one tokenizer."""

    def __init__(self, texts: tuple[str, ...], tokenizer: Tokenizer) -> None:
        self.texts = texts
        self.tokenizer = tokenizer

    def words_for(self, budget: int) -> int:
        """The most words whose sentences (joined with spaces) take at most ``budget`` tokens."""
        for copies in range(1, MOST_COPIES + 1):
            words = self._words_within(copies, budget)
            if words is not None:
                return words
        raise AssertionError("unreachable: the last copy always answers")

    def context(self, words: int, needles: list[Placed]) -> Context:
        """The first ``words`` words with the needles placed, joined as RULER joins them."""
        source, counts, first = self._source(-(-words // essay(self.texts).words))
        whole, cut = source.sentences(words)
        full = [Piece(" " + source.text[a:b], count)
                for (a, b), count in zip(source.spans[:whole], counts, strict=False)]
        full += _counted(self.tokenizer, [" " + cut]) if cut else []
        order = sorted(needles, key=lambda placed: placed.at(full))
        cuts = [0, *(placed.at(full) for placed in order), len(full)]
        pieces: list[Piece] = []
        for run in range(1, len(cuts)):
            sentences = full[cuts[run - 1]:cuts[run]]
            if run == 1 and sentences:  # the context's first sentence has no space before it
                text = sentences[0].text[1:]
                sentences[0] = Piece(text, first if whole else len(self.tokenizer.encode(text)))
            elif not sentences and run > 1:  # RULER joins an empty run with a space too
                sentences = _counted(self.tokenizer, [" "])
            pieces += sentences
            if run - 1 < len(order):
                pieces.append(order[run - 1].item)  # a needle carries its leading space
        return replace(assemble(pieces, finish=str), units=words,
                       insertions=tuple(placed.at(full) for placed in needles))

    def _source(self, copies: int) -> tuple[Essay, list[int], int]:
        """The essays ``copies`` times over, the token count of each sentence after a space,
        and of the first sentence alone."""
        key = ("ruler essay", self.texts, copies)
        cache = tokenizer_cache(self.tokenizer)
        if key not in cache:
            source = essay(self.texts, copies)
            spaced = unit_counts(self.tokenizer,
                                 tuple(" " + source.text[a:b] for a, b in source.spans))
            first = len(self.tokenizer.encode(source.text[slice(*source.spans[0])]))
            cache[key] = (source, list(spaced), first)
        found: tuple[Essay, list[int], int] = cache[key]
        return found

    def _words_within(self, copies: int, budget: int) -> int | None:
        """The most words of ``copies`` copies within ``budget`` tokens; None when they all fit
        with room to spare and another copy may be added."""
        source, counts, first = self._source(copies)
        totals = list(accumulate(counts, initial=0))
        totals[1:] = [total - counts[0] + first for total in totals[1:]]
        if totals[-1] <= budget:
            return source.words if copies == MOST_COPIES or totals[-1] == budget else None
        whole = bisect_right(totals, budget) - 1
        start, end = source.spans[whole]
        fewest = bisect_right(source.word_ends, start)
        space = " " if whole else ""

        def fits(words: int) -> bool:
            partial = source.text[start:source.word_ends[words - 1]]
            return totals[whole] + len(self.tokenizer.encode(space + partial)) <= budget

        low, high = fewest, bisect_left(source.word_ends, end)
        while low < high:  # the most words ending inside the sentence that does not fit whole
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(middle) else (low, middle - 1)
        return max(low, 1)


def lines_context(lines: list[Piece], needles: list[Placed]) -> Context:
    """Lines (each piece led by its newline) with the needles inserted as lines of their own at
    RULER's indices; the newline before the first line is dropped."""
    placed = list(lines)
    indices = sorted(((needle.at(lines), needle) for needle in needles),
                     key=lambda pair: pair[0], reverse=True)
    for index, needle in indices:
        placed.insert(index, needle.item)
    return replace(assemble(placed), units=len(lines),
                   insertions=tuple(needle.at(lines) for needle in needles))
