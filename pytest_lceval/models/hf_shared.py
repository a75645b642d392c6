"""Greedy generation of one batch whose prompts share prefixes: each shared prefix is prefilled
once, each prompt's own rest once, no padding; then one batched greedy decode.

Why. ``model.generate`` prefills a left-padded batch: every row pays for its padding and for the
prefix it shares with the other rows. In the main job the prompts of a batch share a lot: a RULER
cell's cases read one essay haystack up to the needle, and tasks of one length share the
instruction and that haystack up to their first needle; HELMET's and 100-LongBench's cases share
instructions and demonstrations. Here the prompts are sorted, the longest prefix each shares with
its neighbours is computed once (a stack of KV-cache checkpoints walks the sorted prompts as a
radix tree would, the way vLLM's automatic prefix caching reuses the longest cached prefix), and
only then is each prompt's rest prefilled on a copy of its checkpoint, one row at a time, so no
row pays for padding. The rows' caches are laid side by side, left-padded, for the decode, and a
row that has finished leaves the batch, so the steps after it cost less.

Decoding is what ``generate`` does with the backend's settings (greedy, fp32 argmax of the last
logits, the EOS ids, the stop strings read by transformers' own ``StopStringCriteria`` on the
prompt and the answer, a finished row padded), and the rows come back as ``generate`` gives them:
new tokens, pad after a finished row, as wide as the longest-running row of the batch.

Rounding. The arithmetic is the same but not its grouping: a prompt prefilled in two pieces, or
a row alone instead of in a padded batch, rounds fp32 sums differently (logits differ by ~1e-5),
which flips a greedy token only where two logits tie that closely. ``bench/bench_main_job.py``
counts the answers that differ and times both paths; ``hf.SHARE_PREFIXES`` says what it found
and why the backend uses this path only when ``share_prefixes`` is set.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

MIN_SHARED = 64
"""Shortest common prefix, in tokens, worth a checkpoint of its own: below it the copy of the
cache and the extra forward pass cost about what the shared tokens would."""

StopCheck = Callable[[torch.Tensor], torch.Tensor]
"""Stop strings: the full sequences so far, [rows, length] -> which rows have just stopped."""


@dataclass(frozen=True)
class Runner:
    """A causal LM's forward pass as the backend calls it: its cache keyword (``cache`` or
    ``past_key_values``, see ``HFBackend._cache_argument``), its device, greedy settings."""

    model: Any
    cache_keyword: str
    cache_of: Callable[[Any], Any]
    """The cache a forward returned (``hf.cache_of``)."""
    eos: tuple[int, ...]
    pad: int

    def __call__(self, ids: torch.Tensor, cache: Any, **extra: Any) -> tuple[torch.Tensor, Any]:
        """(last-position logits in fp32 [rows, vocab], the cache) after ``ids`` [rows, n]."""
        output = self.model(input_ids=ids.to(self.model.device), **{self.cache_keyword: cache},
                            use_cache=True, logits_to_keep=1, **extra)
        return output.logits[:, -1].float(), self.cache_of(output)


def generate_shared(run: Runner, prompts: Sequence[list[int]], budget: int,
                    stop: StopCheck | None) -> list[list[int]]:
    """New tokens per prompt, as ``generate`` returns them (see the module docstring)."""
    caches, logits = prefill_shared(run, prompts)
    cache, mask = _side_by_side(caches, [len(ids) for ids in prompts])
    del caches
    return _decode(run, cache, mask, torch.cat(logits), prompts, budget, stop)


def prefill_shared(run: Runner, prompts: Sequence[list[int]]) -> tuple[list[Any],
                                                                         list[torch.Tensor]]:
    """(KV cache of one row, last-position logits [1, vocab]) per prompt, each shared prefix of
    at least MIN_SHARED tokens computed once.

    Sorted, the prompts after one share with it a shrinking start: with the next one what they
    share, with each further one the least of the shares on the way. So a stack of checkpoints
    (length, cache) walks them as a radix tree: for the prompt at hand, the checkpoints longer
    than what it shares with the previous prompt are popped, the top one is its start, a
    checkpoint is pushed at each length it shares with a later prompt, then its own rest runs.
    A checkpoint stops one token short of a prompt's end, so every prompt runs a token of its
    own (its logits).
    """
    order = sorted(range(len(prompts)), key=lambda index: prompts[index])
    shared_next = [common_start(prompts[one], prompts[other])
                   for one, other in zip(order, order[1:], strict=False)] + [0]
    checkpoints: list[tuple[int, Any]] = []
    caches: list[Any] = [None] * len(prompts)
    logits: list[torch.Tensor] = [torch.empty(0)] * len(prompts)
    shared_previous = 0
    for position, index in enumerate(order):
        ids = prompts[index]
        last = len(ids) - 1
        while checkpoints and checkpoints[-1][0] > min(shared_previous, last):
            checkpoints.pop()
        start, cache = (checkpoints[-1][0], copy.deepcopy(checkpoints[-1][1])) if checkpoints \
            else (0, None)
        for share in _later_shares(shared_next[position:], start, last):
            _, cache = run(torch.tensor([ids[start:share]]), cache)
            checkpoints.append((share, copy.deepcopy(cache)))
            start = share
        logits[index], caches[index] = run(torch.tensor([ids[start:]]), cache)
        shared_previous = shared_next[position]
    return caches, logits


def _later_shares(shared_next: list[int], start: int, last: int) -> list[int]:
    """The lengths, shortest first, that a prompt shares with the prompts sorted after it
    (``shared_next`` from it on), of at least MIN_SHARED tokens, past ``start``, before
    ``last``."""
    shares: set[int] = set()
    share = last
    for following in shared_next:
        share = min(share, following)
        if share < MIN_SHARED or share <= start:
            break
        shares.add(share)
    return sorted(shares)


def _side_by_side(caches: list[Any], lengths: list[int]) -> tuple[DynamicCache, torch.Tensor]:
    """The rows' caches in one batch, left-padded to the longest, and its attention mask."""
    longest = max(lengths)
    batched = DynamicCache()
    for layer in range(len(caches[0].layers)):
        states = []
        for kind in ("keys", "values"):
            first = getattr(caches[0].layers[layer], kind)
            stacked = first.new_zeros(len(caches), first.shape[1], longest, first.shape[3])
            for row, (cache, length) in enumerate(zip(caches, lengths, strict=True)):
                stacked[row, :, longest - length:] = getattr(cache.layers[layer], kind)[0]
            states.append(stacked)
        batched.update(states[0], states[1], layer)
    mask = torch.zeros(len(caches), longest, dtype=torch.long, device=states[0].device)
    for row, length in enumerate(lengths):
        mask[row, longest - length:] = 1
    return batched, mask


def _decode(run: Runner, cache: DynamicCache, mask: torch.Tensor, logits: torch.Tensor,
            prompts: Sequence[list[int]], budget: int, stop: StopCheck | None) -> list[list[int]]:
    """Greedy steps as ``generate`` takes them; a finished row leaves the batch."""
    device = mask.device
    rows, longest = mask.shape
    sequences = torch.full((rows, longest), run.pad, dtype=torch.long, device=device)
    for row, ids in enumerate(prompts):
        sequences[row, longest - len(ids):] = torch.tensor(ids, device=device)
    ends = torch.tensor(run.eos, device=device)
    positions = torch.tensor([len(ids) for ids in prompts], device=device)
    active = torch.arange(rows, device=device)  # the rows still in the batch
    unfinished = torch.ones(rows, dtype=torch.bool, device=device)
    next_tokens = logits.argmax(dim=-1)
    produced: list[torch.Tensor] = []
    for step in range(budget):
        tokens = torch.where(unfinished, next_tokens, run.pad)
        produced.append(tokens)
        sequences = torch.cat([sequences, tokens[:, None]], dim=1)
        done = torch.isin(tokens, ends)
        if stop is not None:
            done |= stop(sequences)
        unfinished &= ~done
        if step == budget - 1 or not bool(unfinished.any()):
            break
        if not bool(unfinished[active].all()):
            kept = unfinished[active].nonzero().squeeze(1)
            cache.batch_select_indices(kept)
            mask, positions, active = mask[kept], positions[kept], active[kept]
        mask = torch.cat([mask, mask.new_ones(len(active), 1)], dim=1)
        step_logits, cache = run(tokens[active][:, None], cache, attention_mask=mask,
                                 position_ids=(positions + step)[:, None])
        next_tokens[active] = step_logits.argmax(dim=-1)
    rows_out: list[list[int]] = torch.stack(produced, dim=1).tolist()
    return rows_out


def common_start(one: Sequence[int], other: Sequence[int]) -> int:
    """How many tokens two sequences share from their start."""
    return next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b),
                min(len(one), len(other)))
