"""What the recall tasks share: seeds, corpora, the answer prefix and turning a fit into a Case.

Answer prefix. HELMET appends the answer prefix ("The special magic number for X mentioned in the
provided text is", "Corresponding value:") for base models, after a newline, and also for
chat-template models, right after the assistant marker; we do the same in both modes. It makes
the answer's position predictable for every model and keeps the two modes comparable.
"""

from __future__ import annotations

import random
from typing import Any

from ..grid import case_seed
from ..models.base import Renderer, Tokenizer
from ..records import Case
from .base import BuildContext
from .fitting import Fitted
from .haystack_text import (
    Context,
    Piece,
    Splitter,
    TokenizedCorpus,
    insert_at_depth,
    noise_units,
    sentence_units,
    split_piece,
    tokenized,
)

DEMOS = 2
"""In-context demonstrations per prompt, as HELMET."""
STOP = ("\n",)
"""Every recall answer is one line (the demonstrations show it so)."""
SYNTHETIC = "synthetic"
"""The ``source`` of haystacks generated rather than read (noise, needles, JSON)."""


def case_rngs(context: BuildContext, task: str, index: int) -> tuple[random.Random, random.Random]:
    """The case's rng (keys, values, demonstrations, positions) and its haystack-filler rng.

    Seeded by (run seed, task, sample index) only: case i asks the same question with the same
    demonstrations at every length and depth, so rows and columns of a heatmap are paired.
    """
    return (random.Random(case_seed(context.seed, task, index)),
            random.Random(case_seed(context.seed, task, index, "filler")))


def corpus(kind: str, context: BuildContext) -> tuple[TokenizedCorpus, str]:
    """The tokenised prose haystack ('essay' or 'noise') and where its text came from."""
    if kind == "noise":
        return tokenized(context.tokenizer, noise_units()), SYNTHETIC
    texts, source = context.data.essays()
    return tokenized(context.tokenizer, sentence_units(texts)), source


def whole_units(text: TokenizedCorpus, start: int, count: int) -> list[Piece]:
    """``count`` whole sentences from ``start`` (cycling): the short haystack of a demonstration."""
    size = len(text.units)
    pieces = [Piece(text.units[(start + i) % size], len(text.ids[(start + i) % size]))
              for i in range(count)]
    return pieces


Placements = list[tuple[Piece, float]]
"""Key items with the depth (percent) each should sit at."""


def place(pieces: list[Piece], items: Placements, split: Splitter | None = None) -> list[Piece]:
    """Insert (item, depth) pairs in order; the later ones are placed over the earlier ones."""
    for item, depth in items:
        pieces = insert_at_depth(pieces, item, depth, split)
    return pieces


def splitter(tokenizer: Tokenizer) -> Splitter:
    """Cuts prose of ``tokenizer`` at a word boundary (see split_piece)."""
    return lambda part, tokens: split_piece(tokenizer, part, tokens)


def answer_separator(renderer: Renderer) -> str:
    """Base models read the prefix on its own line; with a template it opens the assistant turn."""
    return "" if renderer.uses_template else "\n"


def make_case(index: int, fitted: Fitted[Context], gold: list[str], renderer: Renderer,
              max_new_tokens: int, depth: float | None, meta: dict[str, Any]) -> Case:
    """A Case from a fitted prompt; ``meta`` gets the context's length and every key's depth."""
    meta = {**meta, "context_tokens": fitted.context.tokens,
            "key_depths": [round(d, 3) for _, d in fitted.context.depths]}
    return Case(index=index, prompt=fitted.rendered, gold=tuple(gold),
                prompt_tokens=fitted.prompt_tokens, depth=depth, max_new_tokens=max_new_tokens,
                stop=STOP, chat=renderer.chat_source(fitted.prompt), meta=meta)
