"""RULER's needle-in-a-haystack tasks: single, multi-key, multi-value and multi-query needles in a
noise, essay or needle haystack, with HELMET's wording and answer prefix and no demonstrations
(HELMET's loader gives RULER tasks none; RULER has none).

Prompt (base model; with a chat template the user text is templated and the prefix opens the
assistant turn)::

    A special magic number is hidden within the following text. Make sure to memorize it. ...
    <context>
    What is the special magic number for tall-river mentioned in the provided text?
    The special magic number for tall-river mentioned in the provided text is

As in RULER, needles join an essay's sentences with a space and sit on their own lines in the
noise haystack (one noise line a line) and in the needle haystack. The queried needle sits at
the cell's depth; distractor needles, and the needles of multi-value / multi-query tasks (which
have no single depth, as in RULER), sit at random depths.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from ..grid import Cell
from ..metrics import string_match_all
from ..models.base import Tokenizer
from ..records import Case
from ..score_metric import STRING_MATCH_ALL, ScoreMetric
from .base import BuildContext
from .fitting import Frame, fit
from .haystack_items import Stream, fill, shared_stream
from .haystack_text import Context, Piece, Splitter, TokenizedCorpus, assemble, piece
from .recall_common import (
    SYNTHETIC,
    USE_CHAT_TEMPLATE,
    Placements,
    answer_separator,
    case_rngs,
    corpus,
    make_case,
    place,
    splitter,
)
from .recall_values import Draw


@dataclass(frozen=True)
class Wording:
    """RULER's text for one value type; the singular forms are HELMET's for one-answer tasks."""

    value_kind: str
    multi: bool

    @property
    def plural(self) -> str:
        return f"{self.value_kind}s"

    @property
    def kind(self) -> str:
        return self.plural if self.multi else self.value_kind

    def needle(self, key: str, value: str) -> str:
        return f"One of the special magic {self.plural} for {key} is: {value}."

    def instruction(self) -> str:
        opening = "Some special magic {} are" if self.multi else "A special magic {} is"
        return (f"{opening.format(self.kind)} hidden within the following text. Make sure to "
                f"memorize it. I will quiz you about the {self.kind} afterwards.")

    def question(self, keys: list[str]) -> str:
        verb = "are all" if self.multi else "is"
        return (f"What {verb} the special magic {self.kind} for {_listing(keys)} mentioned in "
                f"the provided text?")

    def prefix(self, keys: list[str]) -> str:
        verb = "are" if self.multi else "is"
        return f"The special magic {self.kind} for {_listing(keys)} mentioned in the provided " \
               f"text {verb}"


def _listing(keys: list[str]) -> str:
    """RULER's query listing: 'a', or 'a, b, c, and d'."""
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + ", and " + keys[-1]


@dataclass(frozen=True)
class Draws:
    """One question's keys and needles."""

    query: list[str]
    golds: list[tuple[str, str]]
    """(key, value) of every needle that answers the question."""
    distractors: list[tuple[str, str]]


@dataclass
class NiahTask:
    """A RULER NIAH variant; see the module docstring for the prompt."""

    metric: ClassVar[ScoreMetric] = STRING_MATCH_ALL
    name: str
    haystack: str
    """'noise' (one repeated line), 'essay' (natural prose) or 'needle' (distractor needles)."""
    key_kind: str = "word"
    value_kind: str = "number"
    distractors: int = 0
    """Needles with other keys, at random depths (multi-key essay)."""
    values: int = 1
    """Values of the queried key (multi-value)."""
    queries: int = 1
    """Keys asked at once (multi-query)."""
    max_new_tokens: int = 20
    use_chat_template: bool = USE_CHAT_TEMPLATE
    uses_depth: bool = field(init=False)

    def __post_init__(self) -> None:
        self.uses_depth = self.values == 1 and self.queries == 1
        self.wording = Wording(self.value_kind, multi=not self.uses_depth)

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        return [self._case(cell, context, index) for index in range(cell.samples)]

    def score(self, output: str, case: Case) -> float:
        return string_match_all(output, case.gold)

    def _case(self, cell: Cell, context: BuildContext, index: int) -> Case:
        rng, filler_rng = case_rngs(context, self.name, index)
        keys, values = Draw(rng, self.key_kind), Draw(rng, self.value_kind)
        test = self._draw(keys, values)
        haystack = self._haystack(context, rng, filler_rng, (keys, values), index)
        depth = cell.depth if self.uses_depth else None
        scattered, golds = self._key_items(context.tokenizer, test, depth, rng)
        key_tokens = sum(item.tokens for item, _ in scattered + golds)

        def build(budget: int) -> Context:
            pieces = place(haystack.pieces(budget - key_tokens), scattered)
            return assemble(place(pieces, golds, haystack.split))

        frame = Frame(self.wording.instruction() + "\n", "\n" + self.wording.question(test.query),
                      answer_separator(context.renderer) + self.wording.prefix(test.query))
        fitted = fit(frame, build, context.renderer, cell.length, self.max_new_tokens,
                     key_tokens, f"{self.name} at {cell.length} tokens", haystack.granularity)
        achieved = fitted.context.depth_of("gold") if depth is not None else None
        meta = {"source": haystack.source, "requested_depth": cell.depth,
                "haystack": self.haystack, "keys": test.query}
        return make_case(index, fitted, [value for _, value in test.golds], context.renderer,
                         self.max_new_tokens, achieved, meta)

    def _key_items(self, tokenizer: Tokenizer, test: Draws, depth: float | None,
                   rng: random.Random) -> tuple[Placements, Placements]:
        """(needle, depth) pairs: those scattered at random depths, and the queried needle at
        the cell's depth (none when the task has no depth axis: all its needles scatter)."""
        scattered = [(self._needle(tokenizer, pair, "distractor"), rng.uniform(0, 100))
                     for pair in test.distractors]
        golds = [(self._needle(tokenizer, pair, "gold"),
                  depth if depth is not None else rng.uniform(0, 100)) for pair in test.golds]
        return (scattered, golds) if depth is not None else (scattered + golds, [])

    @property
    def _lead(self) -> str:
        """What separates a needle from the text before it: a space between an essay's
        sentences, a line break between noise lines or needles (RULER's joins)."""
        return " " if self.haystack == "essay" else "\n"

    def _draw(self, keys: Draw, values: Draw) -> Draws:
        query = keys.many(self.queries)
        golds = [(key, values()) for key in query for _ in range(self.values)]
        return Draws(query, golds, [(keys(), values()) for _ in range(self.distractors)])

    def _needle(self, tokenizer: Tokenizer, pair: tuple[str, str], tag: str | None) -> Piece:
        return piece(tokenizer, self._needle_text(pair), tag)

    def _needle_text(self, pair: tuple[str, str]) -> str:
        return self._lead + self.wording.needle(*pair)

    def _haystack(self, context: BuildContext, rng: random.Random, filler_rng: random.Random,
                  drawn: tuple[Draw, Draw], index: int) -> _Prose | _Needles:
        """The test haystack; needle fillers never reuse a key or value ``drawn`` so far."""
        if self.haystack == "needle":
            keys, values = drawn

            def needles() -> Iterator[str]:
                return self._filler(Draw(filler_rng, self.key_kind, set(keys.taken)),
                                    Draw(filler_rng, self.value_kind, set(values.taken)))

            key = (self.name, context.seed, index)
            return _Needles(shared_stream(context.tokenizer, key, needles))
        if self.haystack not in ("noise", "essay"):
            raise ValueError(f"{self.name}: unknown haystack {self.haystack!r}")
        text, source = corpus(self.haystack, context)
        essay = self.haystack == "essay"
        start = rng.randrange(len(text.units)) if essay else 0
        return _Prose(text, context.tokenizer, start, source, cuttable=essay)

    def _filler(self, keys: Draw, values: Draw) -> Iterator[str]:
        while True:
            yield self._needle_text((keys(), values()))


@dataclass(frozen=True)
class _Prose:
    """A prose haystack read from a tokenised corpus from ``start``; its end cut at any token."""

    corpus: TokenizedCorpus
    tokenizer: Tokenizer
    start: int
    source: str
    cuttable: bool
    """Whether a unit may be cut to place a needle: an essay's sentence may, a noise line
    (RULER keeps each whole) may not."""

    def pieces(self, budget: int) -> list[Piece]:
        return self.corpus.take(self.tokenizer, self.start, budget)

    @property
    def split(self) -> Splitter | None:
        """An essay's sentence may be cut at a word boundary to place the needle at its depth."""
        return splitter(self.tokenizer) if self.cuttable else None

    @property
    def granularity(self) -> int:
        return 0


@dataclass(frozen=True)
class _Needles:
    """A haystack of distractor needles, filled to the budget as closely as whole needles go."""

    stream: Stream
    source: str = SYNTHETIC

    def pieces(self, budget: int) -> list[Piece]:
        return fill(self.stream, budget)

    @property
    def split(self) -> None:
        """Needles are never cut."""
        return None

    @property
    def granularity(self) -> int:
        return self.stream.largest()
