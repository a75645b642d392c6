"""Fitting a prompt into a cell's token budget by measuring the rendered prompt, a bounded number
of times.

The budget covers everything the model reads (instructions, demonstrations, question, chat
template, BOS) plus the generation budget. A builder predicts its context's length by adding
token counts (see :mod:`.haystack_text`); BPE merges where the context meets the template can
make the real count differ a little, so the rendered prompt is measured with the model's own
``Renderer.count`` and the context budget corrected by the measured error. At most
``MAX_ROUNDS`` measurements are made: a cell that does not fit raises CellDoesNotFit with the
numbers, never loops (METHODS mistake 9).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from ..models.base import Renderer
from ..models.joined_count import Part
from ..results.records import Prompt
from .base import CellDoesNotFit

FILL = 0.99
"""A fitted prompt plus its generation budget lies in [FILL * length, length]."""
MAX_ROUNDS = 4
"""Most measurements of a full rendered prompt per case (each costs one tokenisation)."""


class Built(Protocol):
    """What a context builder returns: the context text and its predicted token count."""

    @property
    def text(self) -> str: ...

    @property
    def tokens(self) -> int: ...


@runtime_checkable
class Joined(Protocol):
    """A built context that keeps the parts it was joined from (the ``Context`` of
    benchmarks/ruler/filler_text.py)."""

    @property
    def text(self) -> str: ...

    @property
    def parts(self) -> Sequence[Part]: ...

    @property
    def trim(self) -> tuple[int, int]: ...


B = TypeVar("B", bound=Built)


@dataclass(frozen=True)
class Frame:
    """Everything around the context: the user text is ``head + context + tail``, and a raw
    prompt ends with ``cue`` (``Prompt.cue``: HELMET's answer prefix, which a chat template
    leaves out)."""

    head: str
    tail: str
    cue: str = ""

    def prompt(self, context: str) -> Prompt:
        return Prompt(self.head + context + self.tail, cue=self.cue)


@dataclass(frozen=True)
class Fitted(Generic[B]):
    """A prompt that fits: the built context, the prompt, its rendering and measured length."""

    context: B
    prompt: Prompt
    rendered: str
    prompt_tokens: int


def window(length: int) -> tuple[int, int]:
    """The accepted totals (prompt + generation budget) for a cell length."""
    return math.ceil(FILL * length), length


def fit(frame: Frame, build: Callable[[int], B], renderer: Renderer, length: int,
        max_new_tokens: int, key_tokens: int, what: str, granularity: int = 0) -> Fitted[B]:
    """Build the context whose rendered prompt + ``max_new_tokens`` lands in ``window(length)``.

    ``build(n)`` makes a context of at most ``n`` predicted tokens, as close as it can and
    deterministically in ``n``; ``key_tokens`` is the least context that still holds the key
    items. ``granularity`` is the size of the haystack's uncuttable items (0 for prose): when
    items are coarser than the 1 % window, a prompt within one item of the length is accepted.
    """
    low, high = window(length)
    overhead = renderer.count(renderer.render(frame.prompt("")))
    least = overhead + key_tokens + max_new_tokens
    if least > high:
        raise CellDoesNotFit(
            f"{what}: instructions, demonstrations, question and template take {overhead} "
            f"tokens, the key items {key_tokens} and the generation budget {max_new_tokens}: "
            f"{least} tokens > cell length {length}")
    aim = high - max(0, (high - low) // 4)
    budget = aim - max_new_tokens - overhead
    totals: list[int] = []
    best: Fitted[B] | None = None
    for _ in range(MAX_ROUNDS):
        fitted = render(frame, build(max(budget, key_tokens)), renderer)
        total = fitted.prompt_tokens + max_new_tokens
        totals.append(total)
        if low <= total <= high:
            return fitted
        if total <= high and (best is None or fitted.prompt_tokens > best.prompt_tokens):
            best = fitted
        # Aim the context at what the measurement says it may take: the builder's prediction
        # error is stable, so this lands from below instead of oscillating around the target.
        corrected = aim - (total - fitted.context.tokens)
        if corrected == budget and total <= high:
            # The prediction was exact and this is the most the builder gives for the budget
            # (its next item would overshoot, e.g. an ICL task's next round draws other demos).
            return fitted
        if corrected == budget or (budget <= key_tokens and total > high):
            break
        budget = corrected
    if best is not None and best.prompt_tokens + max_new_tokens > high - granularity:
        return best
    raise CellDoesNotFit(
        f"{what}: could not fit {length} tokens (accepting {low}..{high}) in {len(totals)} "
        f"measurements; prompt + generation budget measured {totals} tokens")


def render(frame: Frame, context: B, renderer: Renderer) -> Fitted[B]:
    """The prompt around ``context``, rendered and measured (whether or not it fits)."""
    prompt = frame.prompt(context.text)
    rendered = renderer.render(prompt)
    return Fitted(context, prompt, rendered, _count(renderer, rendered, context))


def count_with(fitted: Fitted[B], suffix: str, renderer: Renderer) -> int:
    """The tokens of the rendered prompt with ``suffix`` after it: RULER's size search measures
    each try with its answer appended (``benchmarks/ruler/size_search.py``)."""
    return fitted.prompt_tokens if not suffix else \
        _count(renderer, fitted.rendered + suffix, fitted.context)


def _count(renderer: Renderer, rendered: str, context: Built) -> int:
    """The rendered prompt's count; from the context's parts when they were kept and the
    renderer can add their counts exactly (a 128k prompt is then never tokenised whole)."""
    if isinstance(context, Joined) and renderer.count_joined is not None:
        counted = renderer.count_joined(rendered, context.text, context.parts, context.trim)
        if counted is not None:
            return counted
    return renderer.count(rendered)
