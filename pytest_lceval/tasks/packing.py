"""Whole passages packed into a prompt "just under" a token budget, as 100-LongBench builds its
contexts: choose passages by their estimated cost, then render the real prompt, count it with the
model's own renderer and drop passages until it fits.

Estimating first keeps a build linear in the context (counting the full prompt once per added
passage would be quadratic); the exact count at the end makes the budget a guarantee rather
than an estimate. Passages that carry the answer are *pinned* and never dropped.
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from ..models.base import Tokenizer
from .base import BuildContext, CellDoesNotFit

Render = Callable[[Sequence["Passage"]], str]
"""The whole rendered prompt (template included) for passages in context order."""

_COSTS: weakref.WeakKeyDictionary[object, dict[str, int]] = weakref.WeakKeyDictionary()
"""Estimated token costs per tokenizer, shared by every case of a process."""


@dataclass(frozen=True)
class Passage:
    """One passage of a context."""

    text: str
    article: int = -1
    """Index of the source article in the pool (repeats share it); -1 for made-up text."""
    pinned: bool = False
    """Carries the answer (gold article, key-value pair, penguin count): never dropped."""


@dataclass(frozen=True)
class Fitted:
    """A packed prompt that fits its budget, measured with the model's renderer."""

    passages: tuple[Passage, ...]
    text: str
    """The rendered prompt."""
    tokens: int


class Packer:
    """Fills and fits contexts for one case. ``unit`` is how a passage appears in the context
    (separator and label included), so that its estimated cost matches its real one."""

    def __init__(self, context: BuildContext, unit: Callable[[str], str]) -> None:
        self.context = context
        self.unit = unit
        self._costs = _cost_cache(context.tokenizer)

    def cost(self, text: str) -> int:
        """Estimated tokens that ``text`` adds to a context."""
        unit = self.unit(text)
        cost = self._costs.get(unit)
        if cost is None:
            cost = self._costs[unit] = len(self.context.tokenizer.encode(unit))
        return cost

    def count(self, text: str) -> int:
        return self.context.renderer.count(text)

    def room(self, render: Render, pinned: Sequence[Passage], budget: int, reserve: int = 0) -> int:
        """Estimated tokens left for more passages once the prompt holds ``pinned`` and
        ``reserve`` tokens of text still to be inserted; raises CellDoesNotFit when nothing is
        left (the instructions and question alone fill the budget)."""
        fixed = self.count(render(pinned))
        room = budget - fixed - reserve
        if room <= 0:
            raise CellDoesNotFit(
                f"the prompt without distractors already takes {fixed} tokens (+{reserve} "
                f"reserved for inserted sentences); the budget is {budget} tokens")
        return room

    def fill(self, candidates: Iterable[Passage], room: int, chosen: Sequence[Passage] = (),
             patience: int | None = None) -> list[Passage]:
        """First fit: take every candidate whose estimated cost still fits in ``room``, so small
        passages close the gap that a large one left. ``patience``: stop after that many
        candidates in a row did not fit (None = try them all; 0 = stop at the first)."""
        packed = list(chosen)
        misses = 0
        for passage in candidates:
            if room <= 0 or (patience is not None and misses > patience):
                break
            cost = self.cost(passage.text)
            if cost <= room:
                packed.append(passage)
                room -= cost
                misses = 0
            else:
                misses += 1
        return packed

    def fit(self, passages: Sequence[Passage], render: Render, budget: int,
            spares: Sequence[Passage] = ()) -> Fitted:
        """Render and count; while over budget drop an unpinned passage and count again. The
        estimate errs both ways (a drop can leave a gap as large as the passage; token merges at
        passage joins make a sum of costs too high), so once the prompt fits, ``spares``
        (candidates not packed) close the gap the count shows, where a passage was dropped or
        else at the end, as long as the prompt still fits. Ends: each round drops or uses up a
        passage, and with none left to drop it raises CellDoesNotFit."""
        kept, unused = list(passages), list(spares)
        fitted: Fitted | None = None
        at = len(kept)
        while True:
            text = render(kept)
            tokens = self.count(text)
            if tokens <= budget:
                fitted = Fitted(tuple(kept), text, tokens)
                added = self.fill(unused, budget - tokens)
                if not added:
                    return fitted
                unused = [passage for passage in unused if passage not in added]
                kept[at:at] = added
                continue
            if fitted is not None:  # the spares' estimate overshot: keep the prompt that fit
                return fitted
            over = tokens - budget
            droppable = [i for i, passage in enumerate(kept) if not passage.pinned]
            if not droppable:
                raise CellDoesNotFit(
                    f"the prompt with only its answer-bearing passages takes {tokens} tokens; "
                    f"the budget is {budget} tokens")
            at = self._least_loss(kept, droppable, over)
            kept.pop(at)

    def _least_loss(self, passages: Sequence[Passage], droppable: Sequence[int],
                    over: int) -> int:
        """The passage to drop: the smallest that covers the overshoot by estimate (so the
        prompt stays as close to the budget as it can), else the largest."""
        costs = {i: self.cost(passages[i].text) for i in droppable}
        covering = [i for i in droppable if costs[i] >= over]
        if covering:
            return min(covering, key=costs.__getitem__)
        return max(droppable, key=costs.__getitem__)


def insert_sentence(passage: Passage, sentence: str, rng: random.Random | None) -> Passage:
    """``sentence`` inside ``passage`` at a random sentence end (``rng``) or at its end
    (``rng=None``); the passage becomes pinned."""
    text = passage.text.rstrip()
    ends = [i + 1 for i, char in enumerate(text) if char in ".!?" and text[i + 1:i + 2] == " "]
    cut = rng.choice([*ends, len(text)]) if rng is not None else len(text)
    return replace(passage, text=f"{text[:cut]} {sentence}{text[cut:]}", pinned=True)


def depth_of(text: str, marker: str) -> float | None:
    """Where ``marker`` starts in ``text``, in percent of the text (None if absent)."""
    position = text.find(marker)
    return None if position < 0 else 100.0 * position / max(len(text), 1)


def _cost_cache(tokenizer: Tokenizer) -> dict[str, int]:
    try:
        return _COSTS.setdefault(tokenizer, {})
    except TypeError:  # a tokenizer that cannot be weakly referenced: cache for this case only
        return {}
