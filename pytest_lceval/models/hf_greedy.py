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
  haystack up to the first needle (at depth 50, half the prompt): a prompt that shares
  ``MIN_SHARED`` tokens or more with one already prefilled starts from a copy of its keys and
  values. Bit for bit what a whole prefill gives (the same products, causal attention over the
  same keys; ``tests/test_hf_greedy.py``).
- **The KV cache copied at every step.** transformers' dynamic cache concatenates each new key
  and value onto the whole cache, a copy of all of it per layer and step. ``GrowingLayer`` writes
  into a buffer sized for the prompt and the budget and hands back views of it: the same values,
  so the same bits.
- **Decode products of a few rows.** MKL's fp32 kernel is slow on a product of 2 or 3 rows by
  a wide matrix (``x @ W.T``): SmolLM2's LM head (49152 x 576) for two rows takes 24 ms, the same
  product as ``W @ x.T`` 7.5 ms, near the memory's speed. ``narrow_products`` computes every
  product of a decode step that way, and those that read one input (a layer's q, k and v; gate
  and up) as one product (``StackedProducts``): a decode step is hundreds of small parallel
  regions, and where torch's idle threads sleep (``foundation/cpu_wait.py``) each region waits
  for one to wake; 5 regions a layer instead of 8 took a step from 137-148 ms to 106-112 ms
  (SmolLM2, 2 rows over 1k tokens, 2 cores). The same bits: each output element is the same
  dot product over a weight that starts where it did modulo a cache line.

Answers: the batch is decoded as ``model.generate`` decodes it (the same stopping criteria, the
same padding token after a finished row, the same budget), but a padded prompt's attention and
every decode step's products round differently (by ~1e-5 in a logit), so a greedy token could
flip where two candidates tie that closely. ``bench/bench_main_job.py`` compares every answer
both ways; the backend takes this path by default only because none differed
(``hf.GREEDY_ON_CPU`` says where).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer
from transformers.generation.stopping_criteria import (
    EosTokenCriteria,
    StoppingCriteriaList,
    StopStringCriteria,
)

NARROW_ROWS = 16
"""Rows up to which a product runs as ``W @ x.T``: a decode step's (one per prompt). Faster
there at every size measured; a prefill (hundreds of rows) keeps ``F.linear`` and its bits."""

ALIGNMENT = 64
"""Bytes modulo which a stacked weight starts where it started alone (a cache line)."""

MIN_SHARED = 64
"""Shared tokens from which a prompt starts from another's cache rather than from nothing."""
MIN_REST = 16
"""Tokens a prompt prefills after a shared start, at least: MKL rounds a product's row alike
from 15 rows up, differently below."""


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
        self._key_buffer[:, :, self.length:end] = key_states
        self._value_buffer[:, :, self.length:end] = value_states
        return self._filled_to(end)

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


def _shared_start(done: list[DynamicCache], prompts: list[list[int]],
                  ids: list[int]) -> tuple[DynamicCache, int]:
    """A cache to prefill ``ids`` on, and where its prefill starts: the keys and values of the
    longest start it shares with a prompt already prefilled (the cases of one cell share their
    instruction, and a haystack up to its first needle), or an empty cache. The rest is
    prefilled over it with the same products (``MIN_REST`` rows or more) and causal attention
    over the same keys, so the prompt reads what it read prefilled whole."""
    shared, source = max(((common_start(prompts[index], ids), index)
                          for index in range(len(done))), default=(0, -1))
    shared = min(shared, len(ids) - MIN_REST)
    if shared < MIN_SHARED:
        return DynamicCache(), 0
    cache = DynamicCache()
    layers: list[Any] = done[source].layers
    for index, layer in enumerate(layers):
        cache.update(layer.keys[:, :, :shared], layer.values[:, :, :shared], index)
    return cache, shared


@contextmanager
def narrow_products(model: Any) -> Iterator[None]:
    """The model's linear layers compute few rows as ``W @ x.T`` while this lasts, those that
    read one input one after another in one product (``StackedProducts``)."""
    products = _products_of(model)
    linears = [module for module in model.modules() if type(module) is torch.nn.Linear]
    for linear in linears:
        linear.forward = partial(products.forward, linear)  # type: ignore[method-assign]
    try:
        yield
    finally:
        products.waiting.clear()
        for linear in linears:
            del linear.forward


class StackedProducts:
    """A decode step's products of few rows, those of linears that read the same input one
    after another (a layer's q, k and v; gate and up) as one product over their weights
    stacked: fewer, larger products, each a parallel region whose sleeping threads have to be
    woken (``foundation/cpu_wait.py``). Each output element is the same dot product, so the same
    bits (MKL's kernel, checked for 1-16 rows). The first decode step, computed linear by linear,
    shows which linears share an input; their weights then move into one buffer that each
    linear's weight views, so the model's memory and every other product stay as they were."""

    def __init__(self, tied: set[int]) -> None:
        self.tied = tied
        """The ids of weights more than one module holds (an LM head tied to the embeddings):
        they stay where they are."""
        self.seen: list[tuple[torch.nn.Linear, torch.Tensor]] | None = []
        """The first step's products in order, with their inputs; None once learnt."""
        self.stacks: dict[torch.nn.Linear, tuple[torch.Tensor, list[torch.nn.Linear]]] = {}
        """By a group's first linear: its stacked weights, and the group in order."""
        self.waiting: dict[torch.nn.Linear, tuple[torch.Tensor, torch.Tensor]] = {}
        """Outputs computed with an earlier linear's product, with the input they are of."""

    def forward(self, linear: torch.nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
        rows = inputs.numel() // inputs.shape[-1]
        if rows > NARROW_ROWS:
            return torch.nn.functional.linear(inputs, linear.weight, linear.bias)
        if self.seen is not None:
            self._learn(linear, inputs)
        waiting = self.waiting.pop(linear, None)
        if waiting is not None and waiting[0] is inputs:
            return waiting[1]
        stack = self.stacks.get(linear)
        if stack is None:
            return _narrow(linear, inputs, torch.mm(linear.weight, _rows(inputs).t()).t())
        weights, group = stack
        product = torch.mm(weights, _rows(inputs).t()).t()
        outputs = torch.split(product, [member.out_features for member in group], dim=1)
        for member, output in zip(group[1:], outputs[1:], strict=True):
            self.waiting[member] = (inputs, _narrow(member, inputs, output))
        return _narrow(linear, inputs, outputs[0])

    def _stackable(self, first: torch.nn.Linear, other: torch.nn.Linear) -> bool:
        """Whether ``other``'s weight can join ``first``'s in one buffer: same input size,
        dtype and device, neither tied to another module."""
        return (first.in_features == other.in_features
                and first.weight.dtype == other.weight.dtype
                and first.weight.device == other.weight.device
                and id(first.weight) not in self.tied and id(other.weight) not in self.tied)

    def _learn(self, linear: torch.nn.Linear, inputs: torch.Tensor) -> None:
        assert self.seen is not None
        if all(seen is not linear for seen, _ in self.seen):
            self.seen.append((linear, inputs))
            return
        runs: list[list[torch.nn.Linear]] = []
        previous = None
        for seen, seen_inputs in self.seen:
            if runs and seen_inputs is previous and self._stackable(runs[-1][0], seen):
                runs[-1].append(seen)
            else:
                runs.append([seen])
            previous = seen_inputs
        self.seen = None
        for group in runs:
            weights = _stacked(group) if len(group) > 1 else None
            if weights is not None:
                start = 0
                for member in group:
                    member.weight.data = weights[start:start + member.out_features]
                    start += member.out_features
                self.stacks[group[0]] = (weights, group)


def _stacked(group: list[torch.nn.Linear]) -> torch.Tensor | None:
    """The group's weights one after another in a new buffer, each starting where its own did
    modulo ``ALIGNMENT`` bytes (MKL's result depends on where a matrix starts: a weight copied
    to another alignment gives other bits), or None where no buffer can do that."""
    weights = [member.weight.detach() for member in group]
    offset = weights[0].data_ptr() % ALIGNMENT
    size = weights[0].element_size()
    if offset % size or any(weight.data_ptr() % ALIGNMENT != offset
                            or weight.nbytes % ALIGNMENT for weight in weights):
        return None
    total = sum(weight.numel() for weight in weights)
    buffer = weights[0].new_empty(total + ALIGNMENT // size)
    start = ((offset - buffer.data_ptr()) % ALIGNMENT) // size
    stacked = buffer[start:start + total].view(-1, weights[0].shape[1])
    torch.cat(weights, out=stacked)
    return stacked


def _products_of(model: Any) -> StackedProducts:
    """The model's stacked products, learnt at its first decode step and kept with it."""
    products = getattr(model, "_lceval_products", None)
    if products is None:
        uses = Counter(id(weight) for module in model.modules()
                       for weight in module.parameters(recurse=False))
        products = StackedProducts({weight for weight, count in uses.items() if count > 1})
        model._lceval_products = products
    return products


def _rows(inputs: torch.Tensor) -> torch.Tensor:
    return inputs.reshape(inputs.numel() // inputs.shape[-1], inputs.shape[-1])


def _narrow(linear: torch.nn.Linear, inputs: torch.Tensor, product: torch.Tensor) -> torch.Tensor:
    """``linear``'s output from its product of ``inputs``' rows ([rows, out])."""
    if linear.bias is not None:
        product = product + linear.bias
    # contiguous, as F.linear's: the attention kernel takes only rows stored contiguously
    return product.contiguous().reshape(*inputs.shape[:-1], linear.out_features)


@torch.inference_mode()
def greedy_batch(model: Any, prompts: list[list[int]], budget: int, eos: list[int], pad: int,
                 stop: list[str], tokenizer: Any, cache_keyword: str) -> list[list[int]]:
    """The new tokens of each prompt, as ``model.generate`` returns them for the left-padded
    batch: ``budget`` at most, a row that ended (an EOS token, a stop string) padded with
    ``pad`` until every row has ended."""
    device = model.device
    rows: list[DynamicCache] = []
    first = []
    for ids in prompts:
        cache, start = _shared_start(rows, prompts, ids)
        output = model(input_ids=torch.tensor([ids[start:]], device=device), use_cache=True,
                       logits_to_keep=1, **{cache_keyword: cache})
        rows.append(cache)
        first.append(output.logits[0, -1].float())
    longest = max(len(ids) for ids in prompts)
    cache = padded_cache(rows, longest + budget)
    del rows
    mask = torch.zeros(len(prompts), longest, dtype=torch.long, device=device)
    sequences = torch.full((len(prompts), longest), pad, dtype=torch.long, device=device)
    for row, ids in enumerate(prompts):
        mask[row, longest - len(ids):] = 1
        sequences[row, longest - len(ids):] = torch.tensor(ids, device=device)
    criteria = StoppingCriteriaList([EosTokenCriteria(eos)])
    if stop:
        criteria.append(StopStringCriteria(tokenizer, stop))
    unfinished = torch.ones(len(prompts), dtype=torch.bool, device=device)
    logits = torch.stack(first)
    with narrow_products(model):
        for step in range(budget):
            tokens = torch.where(unfinished, logits.argmax(-1), pad)
            sequences = torch.cat([sequences, tokens[:, None]], dim=-1)
            unfinished &= ~criteria(sequences, logits)
            if step == budget - 1 or not unfinished.any():
                break
            mask = torch.cat([mask, mask.new_ones(len(prompts), 1)], dim=-1)
            positions = mask.sum(-1, keepdim=True) - 1
            output = model(input_ids=tokens[:, None], attention_mask=mask,
                           position_ids=positions, use_cache=True, logits_to_keep=1,
                           **{cache_keyword: cache})
            logits = output.logits[:, -1].float()
    new_tokens: list[list[int]] = sequences[:, longest:].tolist()
    return new_tokens


def common_start(one: Sequence[int], other: Sequence[int]) -> int:
    """How many tokens two sequences share from their start."""
    return next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b),
                min(len(one), len(other)))
