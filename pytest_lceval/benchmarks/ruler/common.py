"""What the recall tasks share: seeds, corpora, the answer prefix and turning a fit into a Case.

Answer prefix. HELMET appends the answer prefix ("The special magic number for X mentioned in the
provided text is", "Corresponding value:") for base models, after a newline, and also for
chat-template models, right after the assistant marker; we do the same in both modes. It makes
the answer's position predictable for every model and keeps the two modes comparable.

Decoding. HELMET's recall and RULER configs set ``stop_new_line: false`` and score the whole
output, so a recall case has no stop string: an answer after a leading newline, or values on
several lines, still count. The generation budget (and the model's end-of-turn token) ends it.

Scoring. Without a chat template HELMET's ``eval.py`` scores the answer prefix and the output
together (``helmet.output.helmet_scored``).

Chat template. HELMET's recall and RULER configs set ``use_chat_template: false``: under
``--chat-template auto`` the recall tasks get the raw prompt even from an instruct model
(``USE_CHAT_TEMPLATE``, resolved in ``chat_choice``); ``on`` and ``off`` still decide.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ...foundation.grid import Cell, case_seed
from ...models.base import Renderer
from ...results.records import Case
from ...results.score_metric import STRING_MATCH_ALL, ScoreMetric
from ...tasks.base import BuildContext
from ...tasks.context_size import REFERENCE, SIZES
from ...tasks.fitting import Fitted
from ...tasks.metrics import string_match_all
from ..helmet.output import OUTPUT_PREFIX, helmet_scored
from .filler_text import Context, Piece, insert_at_depth

DEMOS = 2
"""JSON KV's in-context demonstrations, as HELMET (``shots: 2``). HELMET gives the RULER tasks
none (its loader drops shots for them), so the NIAH tasks have none either."""
USE_CHAT_TEMPLATE = False
"""HELMET's ``use_chat_template`` for recall (configs/recall.yaml, configs/ruler.yaml)."""
SYNTHETIC = "synthetic"
"""The ``source`` of haystacks generated rather than read (noise, needles, JSON)."""
RULER_CODES = ("f682453", "c3f5e3b")
"""``--lceval-ruler``: the NVIDIA/RULER commit whose generators VT, CWE and FWE follow where
RULER's code changed. f682453 (July 2024) generated HELMET's recall files, so it is what
produced HELMET's numbers (the default); c3f5e3b is the RULER pinned in ``../shared/reference``
(its generators as rewritten in 2025). NIAH writes the same cases in both."""
HELMET_RULER = RULER_CODES[0]


def case_rngs(context: BuildContext, task: str, index: int) -> tuple[random.Random, random.Random]:
    """The case's rng (keys, values, demonstrations, positions) and its haystack-filler rng.

    Seeded by (run seed, task, sample index) only: case i asks the same question with the same
    demonstrations at every length and depth, so rows and columns of a heatmap are paired.
    """
    return (random.Random(case_seed(context.seed, task, index)),
            random.Random(case_seed(context.seed, task, index, "filler")))


Placements = list[tuple[Piece, float]]
"""Key items with the depth (percent) each should sit at."""


def place(pieces: list[Piece], items: Placements) -> list[Piece]:
    """Insert (item, depth) pairs in order; the later ones are placed over the earlier ones."""
    for item, depth in items:
        pieces = insert_at_depth(pieces, item, depth)
    return pieces


CUE_SEPARATOR = "\n"
"""What comes between the question and the answer prefix in a raw prompt (HELMET's recall
``prompt_template``); under a chat template the whole cue is left out (``Prompt.cue``)."""


def largest(least: int, most: int, tokens: Callable[[int], int], budget: int) -> int:
    """The largest n in [least, most] with tokens(n) <= budget (``tokens`` grows with n);
    ``least`` when none fits (the fitting then reports the numbers)."""
    fitting = bisect_right(range(least, most + 1), budget, key=tokens)
    return least + max(fitting - 1, 0)


def make_case(index: int, fitted: Fitted[Context], gold: list[str], renderer: Renderer,
              max_new_tokens: int, depth: float | None, meta: dict[str, Any]) -> Case:
    """A Case from a fitted prompt; ``meta`` gets the context's length, every key's depth and
    the text HELMET scores before the output (``helmet.output.helmet_scored``)."""
    prefix = "" if renderer.uses_template else fitted.prompt.cue.removeprefix(CUE_SEPARATOR)
    meta = {**meta, "context_tokens": fitted.context.tokens,
            "key_depths": [round(d, 3) for _, d in fitted.context.depths],
            OUTPUT_PREFIX: prefix}
    return Case(index=index, prompt=fitted.rendered, gold=tuple(gold),
                prompt_tokens=fitted.prompt_tokens, depth=depth, max_new_tokens=max_new_tokens,
                chat=renderer.chat_source(fitted.prompt), meta=meta)


@dataclass
class WholeContextTask:
    """A recall task with no depth axis (its items spread over the whole context) scored by
    RULER's string_match_all, generated as one RULER version does: VT, CWE and FWE differ only
    in how they draw one case."""

    metric: ClassVar[ScoreMetric] = STRING_MATCH_ALL
    case_notes: ClassVar[tuple[str, ...]] = ("ruler",)
    """The cell's result records which RULER version wrote its prompts (``NotesCases``)."""
    name: str = ""
    uses_depth: bool = False
    use_chat_template: bool = USE_CHAT_TEMPLATE
    max_new_tokens: int = 50
    ruler: str = HELMET_RULER
    """The RULER version whose generator it follows (``--lceval-ruler``, RULER_CODES)."""
    size: str = REFERENCE
    """``--lceval-context-size``: that RULER's size search (``reference``) or the filled cell."""

    def __post_init__(self) -> None:
        if self.ruler not in RULER_CODES:
            raise ValueError(f"{self.name}: unknown RULER version {self.ruler!r}; known: "
                             f"{', '.join(RULER_CODES)}")
        if self.size not in SIZES:
            raise ValueError(f"{self.name}: unknown context size {self.size!r}")

    @property
    def searches(self) -> bool:
        """Whether the size is f682453's search (c3f5e3b's binary search fills the cell)."""
        return self.size == REFERENCE and self.ruler == HELMET_RULER

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        return [self._case(cell, context, index) for index in range(cell.samples)]

    def score(self, output: str, case: Case) -> float:
        return string_match_all(helmet_scored(output, case.meta), case.gold)

    def _case(self, cell: Cell, context: BuildContext, index: int) -> Case:
        raise NotImplementedError
