"""Retrieved passages as HELMET lays them out, and how many of them fit a token budget.

HELMET sets a RAG or citation prompt's length by the number k of passages it holds (a file per
k). Here k is found per case: the most passages, taken in their given order, whose whole
rendered prompt plus the generation budget fits the cell's length. A passage is never cut, so a
prompt ends within one passage of its length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...models.base import Tokenizer
from ...tasks.base import CellDoesNotFit

PASSAGE = "Document (Title: {title}): {text}"
"""HELMET's passage template (``load_qa``)."""
SEPARATOR = "\n\n"
"""Between passages, as HELMET joins them."""
MAX_MEASUREMENTS = 8
"""Most renderings of a full prompt counted per case: the estimate is corrected by the
measured error, so the search rarely needs more than three."""


@dataclass(frozen=True)
class Doc:
    """One passage: a Wikipedia title and its text."""

    title: str
    text: str

    def render(self) -> str:
        return PASSAGE.format(title=self.title, text=self.text)


def render_docs(docs: Sequence[Doc]) -> str:
    return SEPARATOR.join(doc.render() for doc in docs)


def place(distractors: Sequence[Doc], golds: Sequence[tuple[Doc, float]]) -> list[Doc]:
    """``distractors`` with each gold at its relative position (0 first, 1 last) of the final
    list; golds are inserted in order of position."""
    docs = list(distractors)
    total = len(docs) + len(golds)
    for doc, position in sorted(golds, key=lambda pair: pair[1]):
        docs.insert(round(position * (total - 1)), doc)
    return docs


def position_depth(docs: Sequence[Doc], doc: Doc) -> float:
    """Where ``doc`` sits among ``docs``: its index in percent of the last index."""
    return 100.0 * docs.index(doc) / max(len(docs) - 1, 1)


@dataclass(frozen=True)
class Packed:
    """The largest prompt that fits: how many distractors it holds, its text and length."""

    count: int
    text: str
    tokens: int


def pack(render: Callable[[int], str], count: Callable[[str], int], tokenizer: Tokenizer,
         distractors: Sequence[Doc], budget: int, what: str) -> Packed:
    """The largest n such that ``render(n)`` (the prompt with the first n distractors) takes at
    most ``budget`` tokens; raises CellDoesNotFit when even n = 0 does not fit.

    Each distractor's cost is estimated with the tokenizer, then the guess is measured on the
    rendered prompt and corrected by the measured error, stepping one passage at a time near
    the boundary; at most MAX_MEASUREMENTS renderings are counted.
    """
    least = count(render(0))
    if least > budget:
        raise CellDoesNotFit(f"{what}: the prompt with no distractor passage takes {least} "
                             f"tokens, over the budget of {budget} tokens")
    sums = [0]
    for doc in distractors:  # beyond the budget no estimate is needed
        if sums[-1] > budget:
            break
        sums.append(sums[-1] + len(tokenizer.encode(SEPARATOR + doc.render())))
    fits, over = 0, len(sums)
    best = Packed(0, render(0), least)
    error = least
    for _ in range(MAX_MEASUREMENTS):
        guess = max((n for n in range(fits + 1, over) if sums[n] + error <= budget),
                    default=fits + 1)
        if guess >= over:
            break
        text = render(guess)
        tokens = count(text)
        if tokens <= budget:
            fits, best = guess, Packed(guess, text, tokens)
        else:
            over = guess
        error = tokens - sums[guess]
        if fits + 1 >= over:
            return best
    return best
