"""Greedy answers of a padded batch on a CPU, without the work ``model.generate`` wastes there.

``model.generate`` on a left-padded batch spends time where a CPU need not:

- **Prefill attention over padding.** A padding mask makes the attention kernel compute the
  whole square of scores (masked, then discarded) instead of its causal half: at 2k tokens a
  layer's attention costs as much as its matrix products. Here each prompt is prefilled alone,
  unpadded, with causal attention. The matrix products give a row the same bits whether it is
  one prompt's or the padded batch's (MKL's fp32 kernel rounds a row alike at 15 rows and more;
  a prompt is longer than that), so a prompt that needed no padding reads exactly what it read
  in the batch.
- **The same start prefilled twice.** The cases of a cell share their instruction, and RULER's
  haystack up to the first needle (at depth 50, half the prompt), and the next cell's often
  start alike: a prompt that shares ``MIN_SHARED`` tokens or more with one prefilled in this
  batch or the last (``Prefilled``) starts from a copy of its keys and values. The same
  products and causal attention over the same keys, but in other blocks: bit for bit what a
  whole prefill gives only where the kernels round the rest's rows as they round them in the
  whole prompt, which ``decoder_probe`` checks.
- **The KV cache copied at every step.** transformers' dynamic cache concatenates each new key
  and value onto the whole cache, a copy of all of it per layer and step. ``GrowingLayer`` writes
  into a buffer sized for the prompt and the budget (moved to a larger one when drafts fill it)
  and hands back views of it: the same values, so the same bits.
- **One token a pass.** A decode pass reads every weight for a row or two, and answers that copy
  from their context are guessable: each pass feeds a row's next token and a lookup draft
  (``prompt_lookup``), and keeps the draft up to its first token greedy decoding would not have
  chosen. The tokens a pass checks get the bits of a pass each only where the attention
  kernel rounds a query row alike however many share its call (``decoder_probe``).
- **Products.** ``cpu_products``: linears that read one input (a layer's q, k and v; gate and
  up) compute as one product; a decode pass's products, a few rows by a wide matrix where
  MKL's fp32 kernel is slow, run over weights packed for oneDNN, which can round a row alike
  whatever rows share its product. ``decode_attention`` packs a pass's query heads by
  key/value head rather than copying the cache for every head.

Each shortcut is exact only where the host's kernels make it so: ``decoder_probe`` checks each
on the loaded model, and ``Shortcuts`` turns off those that round otherwise, for the exact path
(whole prefills, products apart, MKL's products, transformers' attention, one token a pass,
ended rows kept).

Answers: the batch is decoded as ``model.generate`` decodes it (the same stopping criteria, the
same padding token after a finished row, the same budget), but a padded prompt's attention and
the decode's packed products round otherwise than ``model.generate``'s, and with drafts on, so
does the attention over positions drafts left, so a greedy token could flip where two
candidates tie that closely. ``bench/bench_main_job.py`` compares every answer both ways; the
backend takes this path by default only because none differed (the README says where).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer
from transformers.generation.stopping_criteria import StopStringCriteria

from .cpu_products import CpuProducts, cpu_products
from .decode_attention import grouped_decode_attention
from .prompt_lookup import DRAFT_TOKENS, lookup_draft

MIN_SHARED = 64
"""Shared tokens from which a prompt starts from another's cache rather than from nothing."""
MIN_REST = 16
"""Tokens a prompt prefills after a shared start, at least: MKL rounds a product's row alike
from 15 rows up, differently below."""
MAX_KEPT = 8192
"""Prompt tokens whose caches ``Prefilled`` keeps from one batch for the next (SmolLM2: 46 KB a
token in fp32, 377 MB in all)."""


class GrowingLayer(DynamicLayer):
    """One layer's KV cache in a buffer of ``capacity`` positions: an update writes the new keys
    and values after the last ones and returns views of the filled part, where
    ``DynamicLayer`` returns a new concatenation of the whole cache."""

    def __init__(self, like: torch.Tensor, rows: int, capacity: int) -> None:
        """Room for ``rows`` sequences of ``capacity`` positions of ``like``'s heads (a
        [batch, heads, positions, head size] cache tensor)."""
        super().__init__()
        shape = (rows, like.shape[1], capacity, like.shape[3])
        self._key_buffer = like.new_zeros(shape)
        self._value_buffer = like.new_zeros(shape)
        self.length = 0
        self.device = like.device
        self.is_initialized = True

    def fill(self, index: int, keys: torch.Tensor, values: torch.Tensor, end: int) -> None:
        """Row ``index``'s keys and values ([1, heads, n, head size]) to end at ``end``."""
        start = end - keys.shape[-2]
        self._key_buffer[index, :, start:end] = keys[0]
        self._value_buffer[index, :, start:end] = values[0]
        self._filled_to(max(self.length, end))

    def _filled_to(self, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``end`` positions are the cache: ``keys`` and ``values`` view them."""
        self.length = end
        keys, values = self._key_buffer[:, :, :end], self._value_buffer[:, :, :end]
        self.keys, self.values = keys, values
        return keys, values

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + key_states.shape[-2]
        if end > self._key_buffer.shape[2]:
            self._grow(2 * end)
        self._key_buffer[:, :, self.length:end] = key_states
        self._value_buffer[:, :, self.length:end] = value_states
        return self._filled_to(end)

    def _grow(self, capacity: int) -> None:
        """Move the cache into buffers of ``capacity`` positions (drafts kept few of their
        positions more often than the first capacity allowed for)."""
        for name in ("_key_buffer", "_value_buffer"):
            old = getattr(self, name)
            new = old.new_zeros((*old.shape[:2], capacity, old.shape[3]))
            new[:, :, :self.length] = old[:, :, :self.length]
            setattr(self, name, new)

    def keep_rows(self, rows: torch.Tensor) -> None:
        """Only these rows (indices) stay in the cache: the others' answers have ended."""
        self._key_buffer = self._key_buffer[rows]
        self._value_buffer = self._value_buffer[rows]
        self._filled_to(self.length)

    def get_seq_length(self) -> int:
        return self.length


def padded_cache(rows: list[Any], capacity: int) -> DynamicCache:
    """One batch cache from each prompt's own (a ``DynamicCache`` of one row), each row's keys
    and values at the right end of its first ``max length`` positions, as left padding puts
    them. The padding's keys and values are zeros: the attention mask hides them, so what they
    hold never reaches an answer."""
    longest = max(row.get_seq_length() for row in rows)
    batch = DynamicCache()
    layers: list[Any] = []
    for index, first in enumerate(rows[0].layers):
        layer = GrowingLayer(first.keys, len(rows), capacity)
        for row, cache in enumerate(rows):
            layer.fill(row, cache.layers[index].keys, cache.layers[index].values, longest)
        layers.append(layer)
    batch.layers = layers
    return batch


class Prefilled:
    """Prompts prefilled lately, with their caches: a prompt that starts as one of them did
    starts from a copy of those keys and values. The cases of a cell share their instruction and
    a haystack up to its first needle; the next cell's prompts often start as this cell's did
    (on the README's main job, kept from one batch to the next, 10,236 of 93,655 prompt tokens
    are not prefilled again; within each batch alone, 5,386)."""

    def __init__(self) -> None:
        self.prompts: list[list[int]] = []
        self.caches: list[DynamicCache] = []

    def start(self, ids: list[int]) -> tuple[DynamicCache, int]:
        """A cache to prefill ``ids`` on, and where its prefill starts: the keys and values of
        the longest start it shares with a prompt here, or an empty cache. The rest is
        prefilled over it with the same products (``MIN_REST`` rows or more) and causal
        attention over the same keys, so the prompt reads what it read prefilled whole."""
        shared, source = max(((common_start(prompt, ids), index)
                              for index, prompt in enumerate(self.prompts)), default=(0, -1))
        shared = min(shared, len(ids) - MIN_REST)
        if shared < MIN_SHARED:
            return DynamicCache(), 0
        cache = DynamicCache()
        layers: list[Any] = self.caches[source].layers
        for index, layer in enumerate(layers):
            cache.update(layer.keys[:, :, :shared], layer.values[:, :, :shared], index)
        return cache, shared

    def add(self, ids: list[int], cache: DynamicCache) -> None:
        self.prompts.append(ids)
        self.caches.append(cache)

    def keep_latest(self, count: int) -> None:
        """Keep the ``count`` prompts added last, the newest of them up to ``MAX_KEPT`` tokens:
        what the next batch most likely shares, in a bounded share of memory."""
        kept, tokens = 0, 0
        for ids in reversed(self.prompts[-count:] if count else []):
            if tokens + len(ids) > MAX_KEPT:
                break
            kept, tokens = kept + 1, tokens + len(ids)
        self.prompts = self.prompts[len(self.prompts) - kept:]
        self.caches = self.caches[len(self.caches) - kept:]


class _Answer:
    """One prompt's new tokens as greedy decoding emits them, and whether it has ended: at an
    EOS token, a stop string or the budget, where ``model.generate`` ends a row."""

    def __init__(self, ids: list[int], budget: int, eos: set[int],
                 stop: StopStringCriteria | None) -> None:
        self.ids = list(ids)
        """The prompt and the tokens emitted so far."""
        self.new = 0
        self.budget, self.eos, self.stop = budget, eos, stop
        self.ended = False

    def emit(self, token: int) -> None:
        self.ids.append(token)
        self.new += 1
        self.ended = (token in self.eos or self.new == self.budget
                      or (self.stop is not None and bool(self.stop(
                          torch.tensor([self.ids[-self.stop.maximum_token_len:]]), None)[0])))

    def draft(self, size: int) -> list[int]:
        """Up to ``size`` tokens to check after the next one (none once ended, none past the
        budget)."""
        room = self.budget - self.new - 1
        return [] if self.ended else lookup_draft(self.ids, min(size, room))

    def accept(self, greedy: list[int], draft: list[int]) -> int:
        """Emit the greedy tokens of a pass that fed the last token and then ``draft``, up to
        the first draft token that is not the greedy choice; how many fed positions hold the
        answer's tokens (the last emitted token is fed by the next pass)."""
        for position, token in enumerate(greedy):
            self.emit(token)
            if self.ended or position >= len(draft) or draft[position] != token:
                return position + 1
        raise AssertionError("a pass has one greedy token more than its draft")


@dataclass(frozen=True)
class Shortcuts:
    """The shortcuts of the module docstring that a batch takes; each one off takes the exact
    path instead (``decoder_probe`` finds which round otherwise on this host)."""

    shared_start: bool = True
    """A prompt starts from another's keys and values (``Prefilled``); off, each prefills
    whole."""
    stacked: bool = True
    """Linears of one input compute as one product (``cpu_products``); off, each alone."""
    packed: bool = True
    """A decode pass's products run over oneDNN-packed weights; off, MKL's as a prompt's."""
    grouped: bool = True
    """A pass of several tokens packs its query heads (``decode_attention``); off,
    transformers' SDPA path."""
    drafts: bool = True
    """A pass checks a lookup draft after each row's next token; off, one token a pass."""
    leaving: bool = True
    """A row whose answer ended leaves the batch; off, it stays and is fed padding, as
    ``model.generate`` keeps it."""


@torch.inference_mode()
def greedy_batch(model: Any, prompts: list[list[int]], budget: int, eos: list[int], pad: int,
                 stop: list[str], tokenizer: Any, cache_keyword: str,
                 prefilled: Prefilled | None = None,
                 shortcuts: Shortcuts = Shortcuts()) -> list[list[int]]:
    """The new tokens of each prompt, as ``model.generate`` returns them for the left-padded
    batch: ``budget`` at most, a row that ended (an EOS token, a stop string) padded with
    ``pad`` until every row has ended. Prompts start from ``prefilled``'s shared starts, and
    this batch's prompts replace those there.

    Each pass feeds every row's last token and its draft (``prompt_lookup``), padded to the
    longest draft; a row keeps what its greedy choices confirm, and the positions it does not
    keep stay in the cache with the attention mask hiding them, as left padding is hidden. A
    row whose answer has ended leaves the batch (its products and attention are each row's
    own, so the others' bits do not change); ``model.generate`` pads it instead, which the
    answer returned here does too. ``shortcuts`` says which of these the batch takes."""
    with cpu_products(model, shortcuts.packed, shortcuts.stacked) as products:
        return _greedy_batch(model, prompts, budget, eos, pad, stop, tokenizer, cache_keyword,
                             Prefilled() if prefilled is None else prefilled, products,
                             shortcuts)


def _greedy_batch(model: Any, prompts: list[list[int]], budget: int, eos: list[int], pad: int,
                  stop: list[str], tokenizer: Any, cache_keyword: str, prefilled: Prefilled,
                  products: CpuProducts, shortcuts: Shortcuts) -> list[list[int]]:
    device = model.device
    rows: list[DynamicCache] = []
    first = []
    for ids in prompts:
        cache, start = prefilled.start(ids) if shortcuts.shared_start else (DynamicCache(), 0)
        first.append(int(prefill(model, ids, cache, start, cache_keyword).float().argmax()))
        rows.append(cache)
        if shortcuts.shared_start:
            prefilled.add(ids, cache)
    prefilled.keep_latest(len(prompts) if shortcuts.shared_start else 0)
    draft_tokens = DRAFT_TOKENS if shortcuts.drafts else 0
    lengths = [len(ids) for ids in prompts]
    cache = padded_cache(rows, max(lengths) + budget + draft_tokens)
    del rows
    mask = left_mask(lengths, device)
    criteria = StopStringCriteria(tokenizer, stop) if stop else None
    answers = [_Answer(ids, budget, set(eos), criteria) for ids in prompts]
    for answer, token in zip(answers, first, strict=True):
        answer.emit(token)
    products.decoding = True
    decoding = answers  # the rows still in the batch, in order
    with grouped_decode_attention(model) if shortcuts.grouped else nullcontext():
        while True:
            if shortcuts.leaving and any(answer.ended for answer in decoding):
                staying = [row for row, answer in enumerate(decoding) if not answer.ended]
                decoding = [decoding[row] for row in staying]
                if staying:
                    index = torch.tensor(staying, dtype=torch.long, device=device)
                    mask = mask[index]
                    layers: list[GrowingLayer] = cache.layers  # type: ignore[assignment]
                    for layer in layers:
                        layer.keep_rows(index)
            if all(answer.ended for answer in decoding):
                break
            drafts = [answer.draft(draft_tokens) for answer in decoding]
            width = 1 + max(len(draft) for draft in drafts)
            fed = [[pad if answer.ended else answer.ids[-1], *draft]
                   + [pad] * (width - 1 - len(draft))
                   for answer, draft in zip(decoding, drafts, strict=True)]
            logits, mask = decode_pass(model, cache, mask, torch.tensor(fed, device=device),
                                       cache_keyword)
            greedy = logits.float().argmax(-1).tolist()
            for row, (answer, draft) in enumerate(zip(decoding, drafts, strict=True)):
                if not answer.ended:  # a row that stays after its end is only padding
                    kept = answer.accept(greedy[row], draft)
                    mask[row, mask.shape[1] - width + kept:] = 0
    width = max(answer.new for answer in answers)
    return [answer.ids[len(ids):] + [pad] * (width - answer.new)
            for answer, ids in zip(answers, prompts, strict=True)]


def prefill(model: Any, ids: list[int], cache: DynamicCache, start: int,
            cache_keyword: str) -> torch.Tensor:
    """The next-token logits ([vocab]) of ``ids``, prefilled from position ``start`` on into
    ``cache`` (which holds the keys and values before it)."""
    output = model(input_ids=torch.tensor([ids[start:]], device=model.device), use_cache=True,
                   logits_to_keep=1, **{cache_keyword: cache})
    logits: torch.Tensor = output.logits[0, -1]
    return logits


def left_mask(lengths: list[int], device: torch.device) -> torch.Tensor:
    """The attention mask of prompts of ``lengths`` left-padded to the longest, as
    ``padded_cache`` lays out their keys and values."""
    mask = torch.zeros(len(lengths), max(lengths), dtype=torch.long, device=device)
    for row, length in enumerate(lengths):
        mask[row, max(lengths) - length:] = 1
    return mask


def decode_pass(model: Any, cache: DynamicCache, mask: torch.Tensor, fed: torch.Tensor,
                cache_keyword: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits ([rows, width, vocab]) of ``fed`` ([rows, width] ids), each row's fed after
    the positions its row of ``mask`` ([rows, positions]) shows, and the mask with the fed
    positions added."""
    rows, width = fed.shape
    positions = mask.sum(-1, keepdim=True) + torch.arange(width, device=fed.device)
    mask = torch.cat([mask, mask.new_ones(rows, width)], dim=-1)
    output = model(input_ids=fed, attention_mask=mask, position_ids=positions, use_cache=True,
                   logits_to_keep=width, **{cache_keyword: cache})
    logits: torch.Tensor = output.logits
    return logits, mask


def common_start(one: Sequence[int], other: Sequence[int]) -> int:
    """How many tokens two sequences share from their start."""
    return next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b),
                min(len(one), len(other)))
