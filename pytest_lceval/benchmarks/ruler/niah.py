"""RULER's needle-in-a-haystack tasks: single, multi-key, multi-value and multi-query needles in a
noise, essay or needle haystack, built as RULER's ``niah.py`` builds them (``essay_haystack``),
with HELMET's wording and answer prefix and no demonstrations (HELMET's loader gives RULER
tasks none; RULER has none).

Prompt (base model; with a chat template the user text is templated and the prefix opens the
assistant turn)::

    A special magic number is hidden within the following text. Make sure to memorize it. ...
    <context>
    What is the special magic number for tall-river mentioned in the provided text?
    The special magic number for tall-river mentioned in the provided text is

Where needles go. RULER samples a depth per needle from its forty depths (without replacement)
and inserts the needle between sentences at ``int(sentences * depth / 100)``, or as a line of
its own at a random line. Here the single-answer tasks have a depth axis instead: the queried
needle goes between the sentences (lines) nearest the cell's depth in tokens. The other needles
(distractors, and every needle of the multi-value and multi-query tasks, which have no depth
axis) go where RULER would put them, at depths sampled as RULER samples them. ``sampled``
(``--lceval-niah-placement=ruler``) places the queried needle that way too and drops the axis,
which reproduces RULER's placement.

Size. Under ``--lceval-context-size reference`` (default) a haystack has the number of essay
words, noise lines or filler needles RULER f682453's own search picks (``size_search``); under
``fill``, or with ``--lceval-ruler c3f5e3b`` (whose binary search finds the most that fit), the
cell is filled to 99-100 %.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from ...foundation.data import ESSAY_FOLDER, Fallbacks
from ...foundation.grid import Cell
from ...results.records import Case
from ...results.score_metric import STRING_MATCH_ALL, ScoreMetric
from ...tasks.base import BuildContext
from ...tasks.context_size import REFERENCE, SIZES
from ...tasks.fitting import Frame, fit, render
from ...tasks.metrics import string_match_all
from ..helmet.output import helmet_scored
from .common import (
    CUE_SEPARATOR,
    HELMET_RULER,
    SYNTHETIC,
    USE_CHAT_TEMPLATE,
    case_rngs,
    make_case,
)
from .essay_haystack import DEPTHS, EssayHaystack, Placed, lines_context
from .filler_items import fill, shared_stream
from .filler_text import NOISE, Context, Piece, piece
from .size_search import niah_steps, searched
from .values import Draw


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
class Haystack:
    """A case's haystack: built for a token budget (the filled cell) or for a number of units
    (RULER's size search), where it comes from, and its largest uncuttable unit (0: prose)."""

    build: Callable[[int], Context]
    units: Callable[[int], Context]
    source: str
    granularity: int


@dataclass(frozen=True)
class Draws:
    """One question's keys and needles."""

    query: list[str]
    golds: list[tuple[str, str]]
    """(key, value) of every needle that answers the question."""
    distractors: list[tuple[str, str]]


@dataclass
class NiahTask:
    """A RULER NIAH variant; see the module docstring for the prompt and the placement."""

    metric: ClassVar[ScoreMetric] = STRING_MATCH_ALL
    name: str
    haystack: str
    """'noise' (one repeated line), 'essay' (natural prose) or 'needle' (distractor needles)."""
    key_kind: str = "word"
    value_kind: str = "number"
    distractors: int = 0
    """Needles with other keys (multi-key essay)."""
    values: int = 1
    """Values of the queried key (multi-value)."""
    queries: int = 1
    """Keys asked at once (multi-query)."""
    max_new_tokens: int = 50
    sampled: bool = False
    """Every needle's depth sampled per case, as RULER (no depth axis)."""
    use_chat_template: bool = USE_CHAT_TEMPLATE
    ruler: str = HELMET_RULER
    """The RULER version whose size search it follows (``--lceval-ruler``)."""
    size: str = REFERENCE
    """``--lceval-context-size``: RULER's search (``reference``) or the filled cell."""
    uses_depth: bool = field(init=False)

    def __post_init__(self) -> None:
        if self.haystack not in ("noise", "essay", "needle"):
            raise ValueError(f"{self.name}: unknown haystack {self.haystack!r}")
        if self.size not in SIZES:
            raise ValueError(f"{self.name}: unknown context size {self.size!r}")
        single = self.values == 1 and self.queries == 1
        self.uses_depth = single and not self.sampled
        self.wording = Wording(self.value_kind, multi=not single)

    @property
    def fallbacks(self) -> Fallbacks:
        """An essay haystack without pg_essays/ is made of the self-made essays."""
        return ((ESSAY_FOLDER, "its haystacks are the self-made essays"),) \
            if self.haystack == "essay" else ()

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        return [self._case(cell, context, index) for index in range(cell.samples)]

    def score(self, output: str, case: Case) -> float:
        return string_match_all(helmet_scored(output, case.meta), case.gold)

    def _case(self, cell: Cell, context: BuildContext, index: int) -> Case:
        rng, filler_rng = case_rngs(context, self.name, index)
        keys, values = Draw(rng, self.key_kind), Draw(rng, self.value_kind)
        test = self._draw(keys, values)
        depth = cell.depth if self.uses_depth else None
        needles = self._placed(context, test, depth, rng)
        key_tokens = sum(placed.item.tokens for placed in needles)
        haystack = self._builder(context, needles, filler_rng, (keys, values), index)
        frame = Frame(self.wording.instruction() + "\n", "\n" + self.wording.question(test.query),
                      CUE_SEPARATOR + self.wording.prefix(test.query))
        what = f"{self.name} at {cell.length} tokens"
        fitted = fit(frame, haystack.build, context.renderer, cell.length, self.max_new_tokens,
                     key_tokens, what, haystack.granularity)
        golds = [value for _, value in test.golds]
        if self.size == REFERENCE and self.ruler == HELMET_RULER:
            fitted = searched(lambda units: render(frame, haystack.units(units), context.renderer),
                              niah_steps(self.haystack, cell.length, self.max_new_tokens, golds),
                              fitted.context.units, context.renderer, what)
        achieved = fitted.context.depth_of("gold") if depth is not None else None
        meta = {"source": haystack.source, "requested_depth": cell.depth,
                "haystack": self.haystack, "keys": test.query, "context_size": self.size,
                "haystack_units": fitted.context.units,
                "needles": [[placed.item.text, placed.depth, placed.by_tokens, at] for placed, at
                            in zip(needles, fitted.context.insertions, strict=True)]}
        return make_case(index, fitted, golds, context.renderer, self.max_new_tokens, achieved,
                         meta)

    def _placed(self, context: BuildContext, test: Draws, depth: float | None,
                rng: random.Random) -> list[Placed]:
        """Every needle with its depth: the queried one at the cell's ``depth``, the others
        (all of them without a depth axis) at depths RULER would sample."""
        golds = [(pair, "gold") for pair in test.golds]
        distractors = [(pair, "distractor") for pair in test.distractors]
        free = distractors if depth is not None else distractors + golds
        depths = self._sample(len(free), rng)
        axis = [Placed(self._needle(context, pair, tag), depth, by_tokens=True)
                for pair, tag in golds if depth is not None]
        return axis + [Placed(self._needle(context, pair, tag), at)
                       for (pair, tag), at in zip(free, depths, strict=True)]

    def _needle(self, context: BuildContext, pair: tuple[str, str], tag: str) -> Piece:
        return piece(context.tokenizer, self._lead + self.wording.needle(*pair), tag)

    def _sample(self, count: int, rng: random.Random) -> list[float]:
        """Depths of ``count`` needles as RULER samples them: distinct depths of its forty in an
        essay; a uniformly random line (as a depth: ``int(lines * depth / 100)``) otherwise."""
        if self.haystack == "essay":
            return [float(depth) for depth in rng.sample(DEPTHS, count)]
        return [100 * rng.random() for _ in range(count)]

    @property
    def _lead(self) -> str:
        """What separates a needle from the text before it: a space between an essay's
        sentences, a line break between noise lines or needles (RULER's joins)."""
        return " " if self.haystack == "essay" else "\n"

    def _draw(self, keys: Draw, values: Draw) -> Draws:
        query = keys.many(self.queries)
        golds = [(key, values()) for key in query for _ in range(self.values)]
        return Draws(query, golds, [(keys(), values()) for _ in range(self.distractors)])

    def _builder(self, context: BuildContext, needles: list[Placed], filler_rng: random.Random,
                 drawn: tuple[Draw, Draw], index: int) -> Haystack:
        """The haystack for this case's needles."""
        tokenizer = context.tokenizer
        key_tokens = sum(placed.item.tokens for placed in needles)
        if self.haystack == "essay":
            texts, source = context.data.essays()
            essay = EssayHaystack(texts, tokenizer)

            def words(count: int) -> Context:
                return essay.context(count, needles)

            return Haystack(lambda budget: words(essay.words_for(max(budget - key_tokens, 0))),
                            words, source, 0)
        if self.haystack == "noise":
            line = piece(tokenizer, "\n" + NOISE)

            def lines(count: int) -> Context:
                return lines_context([line] * count, needles)

            return Haystack(lambda budget: lines(max((budget - key_tokens) // line.tokens, 0)),
                            lines, SYNTHETIC, line.tokens)
        keys, values = drawn

        def needles_text() -> Iterator[str]:
            return self._filler(Draw(filler_rng, self.key_kind, set(keys.taken)),
                                Draw(filler_rng, self.value_kind, set(values.taken)))

        stream = shared_stream(tokenizer, (self.name, context.seed, index), needles_text)
        return Haystack(lambda budget: lines_context(fill(stream, budget - key_tokens), needles),
                        lambda count: lines_context([stream[i] for i in range(count)], needles),
                        SYNTHETIC, stream.largest())

    def _filler(self, keys: Draw, values: Draw) -> Iterator[str]:
        while True:
            yield self._lead + self.wording.needle(keys(), values())
