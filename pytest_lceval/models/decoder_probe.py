"""Which of the CPU greedy decoder's shortcuts give, on this host, the bits they stand in for.

Each shortcut of ``hf_greedy.greedy_batch`` computes something in pieces that the exact path
computes whole, and is exact only where the kernels under it round a row alike either way.
That is up to MKL's and oneDNN's blocking, which depends on the processor's instruction set
(their AVX2 and AVX-512 kernels block a product differently), the thread count and the shapes:
a split that reads the same bits on one host reads others on another. So ``probe`` checks each
shortcut on the loaded model, once per load, with the run's threads, the model's own shapes and
the decoder's own code, the split computation against the whole one bit for bit:

- **shared-start prefill**: a prompt prefilled over a copy of another prompt's first keys and
  values (``Prefilled``, split at half the prompt and at ``MIN_REST`` tokens from its end)
  against its whole prefill: every layer's keys and values, and the next-token logits;
- **stacked products**: each group of linears that read one input (q, k, v; gate, up) as one
  product against each linear alone, by MKL and over packed weights, at ``PROMPT_ROWS`` rows;
- **packed weights**: a decode pass's products over oneDNN-packed weights, each row of
  ``PASS_ROWS`` rows against the same row in a larger product and alone;
- **grouped decode attention**: a pass of several tokens with the query heads packed by key/value
  head against transformers' SDPA path;
- **drafts**: a pass of a token and a draft against a pass per token;
- **rows leaving the batch**: a row's pass beside another row against its pass alone, after
  ``keep_rows``.

A shortcut that differs anywhere is off for the run (``Shortcuts``) and the decoder takes its
exact path; the checks after it run with it off, as the run will. The prompts are token ids
drawn with a fixed seed: rounding depends on the shapes, not on what the tokens say. A check
passed at the probe's shapes is evidence, not proof, for the run's others;
``bench/bench_main_job.py`` compares the answers of a whole job.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch
from transformers.cache_utils import DynamicCache

from .cpu_products import ALIGNMENT, CpuProducts, cpu_products, pack, packed_linear
from .decode_attention import grouped_decode_attention
from .hf_greedy import (
    Prefilled,
    Shortcuts,
    decode_pass,
    left_mask,
    padded_cache,
    prefill,
)

PROMPT_TOKENS = 256
"""The probe prompt's length: the prompt split, and the one it shares a start with, are about
this long."""
PASS_ROWS = (1, 2, 3, 8, 16, 17, 64)
"""Row counts of a decode pass's products checked: a row or a few per prompt, with drafts up
to 8 a row."""
PROMPT_ROWS = (*PASS_ROWS, 257)
"""Row counts of a stacked product checked: a decode pass's, and a prefill's (``MIN_REST``
and up)."""
WIDTH = 4
"""Tokens a row of the probe's decode passes feeds: the next one and a draft of three."""
SEED = 0
"""Of the probe's token ids and product inputs: the same probe at every load."""

PARTS = {"shared_start": "shared-start prefill", "stacked": "stacked products",
         "packed": "packed weights", "grouped": "grouped decode attention", "drafts": "drafts",
         "leaving": "rows leaving the batch"}
"""``Shortcuts``' fields as the header names them."""


@dataclass(frozen=True)
class Verdict:
    """What the probe found: the shortcuts the run takes, why each one off is, and its cost."""

    shortcuts: Shortcuts
    why: dict[str, str] = field(default_factory=dict)
    """By ``Shortcuts`` field: what differed, for each shortcut off."""
    seconds: float = 0.0

    def line(self) -> str:
        """The run's one line about it (``HFBackend.notes``)."""
        off = [f"{PARTS[name]} ({why})" for name, why in self.why.items()]
        exact = [PARTS[part.name] for part in fields(Shortcuts)
                 if getattr(self.shortcuts, part.name)]
        said = (f"off on this host: {'; '.join(off)}; exact: {', '.join(exact) or 'none'}"
                if off else f"every shortcut exact on this host: {', '.join(exact)}")
        return f"lceval: CPU decoder: {said} (probe {self.seconds:.1f} s)"


class _Probe:
    """One probe's state: the model, its products, and the shortcuts found so far."""

    def __init__(self, model: Any, products: CpuProducts, cache_keyword: str) -> None:
        self.model, self.products, self.keyword = model, products, cache_keyword
        self.shortcuts = Shortcuts()
        self.why: dict[str, str] = {}
        self.random = torch.Generator().manual_seed(SEED + 1)
        self.fed = torch.tensor([self.ids(WIDTH) for _ in range(2)], device=model.device)
        """The tokens every decode check feeds its two rows."""
        if not products.packing:
            self.off("packed", "this torch has no oneDNN packed linear")

    @property
    def vocabulary(self) -> int:
        vocabulary: int = self.model.get_input_embeddings().num_embeddings
        return vocabulary

    def ids(self, count: int) -> list[int]:
        return _ids(self.random, self.vocabulary, count)

    def off(self, name: str, why: str | None) -> None:
        """Shortcut ``name`` is off for the run when ``why`` (what differed) is not None."""
        if why is not None:
            self.shortcuts = replace(self.shortcuts, **{name: False})
            self.why[name] = why

    def learn_groups(self) -> None:
        """Two one-token passes in decode mode, by MKL: which linears share an input."""
        packing, self.products.packing = self.products.packing, False
        self.products.decoding = True
        cache = DynamicCache()
        for token in self.ids(2):
            self.model(input_ids=torch.tensor([[token]], device=self.model.device),
                       use_cache=True, **{self.keyword: cache})
        self.products.decoding, self.products.packing = False, packing

    def products_check(self) -> None:
        """Stacked products, then (with stacking as found) packed weights."""
        packed = self.shortcuts.packed
        self.off("stacked", _first(_stacked_differs(group, packed)
                                   for group in _distinct(self.products)
                                   if len(group.members) > 1))
        self.products.configure(packed, self.shortcuts.stacked)
        if packed:
            self.off("packed", _first(_rows_differ(group) for group in _distinct(self.products)))
            self.products.configure(self.shortcuts.packed, self.shortcuts.stacked)

    def shared_start_check(self) -> list[tuple[list[int], DynamicCache]]:
        """``shared_start_prompts``: the first prefilled whole, then each of the others
        whole and (while the shortcut holds) split as ``Prefilled`` splits it. The first two
        prompts and their whole caches, for the decode checks."""
        prefilled, wholes = Prefilled(), []
        for ids in shared_start_prompts(self.vocabulary):
            whole = DynamicCache()
            logits = prefill(self.model, ids, whole, 0, self.keyword)
            wholes.append((ids, whole))
            if not prefilled.prompts:
                prefilled.add(ids, whole)
            elif self.shortcuts.shared_start:
                cache, start = prefilled.start(ids)
                split = prefill(self.model, ids, cache, start, self.keyword)
                differs = _caches_differ(cache, whole) or (
                    None if torch.equal(split, logits) else "its next-token logits")
                self.off("shared_start", None if differs is None else (
                    f"a {len(ids)}-token prompt prefilled over another's first {start} tokens: "
                    f"{differs} differ from its whole prefill's"))
        return wholes[:2]

    def decode_checks(self, prompts: list[tuple[list[int], DynamicCache]]) -> None:
        """A batch of two prompts, left-padded: grouped attention, drafts, a row leaving."""
        self.products.decoding = True
        with grouped_decode_attention(self.model):
            grouped = self.passes(prompts, [WIDTH])
        self.off("grouped", None if torch.equal(grouped, self.passes(prompts, [WIDTH])) else
                 f"a pass of {WIDTH} tokens attends otherwise than by transformers' SDPA path")
        with grouped_decode_attention(self.model) if self.shortcuts.grouped else nullcontext():
            self.off("drafts", self.drafts_differ(prompts))
            widths = [WIDTH if self.shortcuts.drafts else 1]
            beside = self.passes(prompts, widths)[1:]
            self.off("leaving", None if torch.equal(beside, self.passes(prompts, widths, [1]))
                     else "a row's logits change when the row beside it leaves the batch")

    def drafts_differ(self, prompts: list[tuple[list[int], DynamicCache]]) -> str | None:
        """A pass of a token and a draft of ``WIDTH - 1``, the draft kept up to its first
        token, then a pass of the next token, against a pass per token: the logits of every
        position kept."""
        drafted = self.passes(prompts, [WIDTH, 1], kept=2)
        plain = self.passes(prompts, [1, 1, 1])
        if torch.equal(drafted, plain):
            return None
        return (f"a pass of {WIDTH} tokens, 2 kept, rounds otherwise than a pass per kept "
                "token")

    def passes(self, prompts: list[tuple[list[int], DynamicCache]], widths: list[int],
               rows: list[int] | None = None, kept: int | None = None) -> torch.Tensor:
        """The logits ([rows, positions, vocab]) of decode passes of ``widths`` tokens a row
        over a new left-padded batch of ``prompts`` (or of only its ``rows``, as
        ``keep_rows`` leaves them), feeding the probe's tokens in turn: each pass's first
        ``kept`` positions stay in the cache (the rest masked, as a draft not kept is), and
        their logits are returned."""
        device = self.model.device
        lengths = [len(ids) for ids, _ in prompts]
        cache = padded_cache([row for _, row in prompts], max(lengths) + sum(widths))
        index = torch.tensor(range(len(prompts)) if rows is None else rows, device=device)
        mask = left_mask(lengths, device)[index]
        if rows is not None:
            for layer in cache.layers:
                layer.keep_rows(index)  # type: ignore[union-attr]
        tokens = self.fed[index]
        logits, done = [], 0
        for width in widths:
            out, mask = decode_pass(self.model, cache, mask, tokens[:, done:done + width],
                                    self.keyword)
            keep = width if kept is None else min(kept, width)
            mask[:, mask.shape[1] - width + keep:] = 0
            logits.append(out[:, :keep])
            done += keep
        return torch.cat(logits, dim=1)


@torch.inference_mode()
def probe(model: Any, cache_keyword: str) -> Verdict:
    """Which shortcuts of ``greedy_batch`` give their exact path's bits on this host (see the
    module docstring); the model's products are left grouped and packed as the verdict says."""
    started = time.perf_counter()
    with cpu_products(model) as products:
        checks = _Probe(model, products, cache_keyword)
        if products.seen is not None:
            checks.learn_groups()
        checks.products_check()
        checks.decode_checks(checks.shared_start_check())
    return Verdict(checks.shortcuts, checks.why, time.perf_counter() - started)


def shared_start_prompts(vocabulary: int) -> list[list[int]]:
    """The probe's prompts of shared starts: one to start from, 5 tokens longer than
    ``PROMPT_TOKENS``; one sharing its first half; and its first ``PROMPT_TOKENS``, which
    ``Prefilled`` splits ``MIN_REST`` tokens from the end."""
    random = torch.Generator().manual_seed(SEED)
    source = _ids(random, vocabulary, PROMPT_TOKENS + 5)
    half = PROMPT_TOKENS // 2
    return [source, source[:half] + _ids(random, vocabulary, PROMPT_TOKENS - half),
            source[:PROMPT_TOKENS]]


def _ids(random: torch.Generator, vocabulary: int, count: int) -> list[int]:
    ids: list[int] = torch.randint(0, vocabulary, (count,), generator=random).tolist()
    return ids


def _distinct(products: CpuProducts) -> list[Any]:
    """One group of each kind: the same sizes, biases and weight placement round alike."""
    kinds: dict[tuple[Any, ...], Any] = {}
    for group in products.groups.values():
        weights = [member.weight for member in group.members]
        kinds.setdefault((tuple(group.sizes), weights[0].shape[1], group.bias is None,
                          tuple(weight.data_ptr() % ALIGNMENT for weight in weights)), group)
    return list(kinds.values())


def _inputs(group: Any, rows: int) -> torch.Tensor:
    """``rows`` rows of random input for ``group``'s linears."""
    weight = group.members[0].weight
    generator = torch.Generator().manual_seed(SEED + rows)
    return torch.randn(rows, weight.shape[1], generator=generator, dtype=weight.dtype).to(
        weight.device)


def _shapes(group: Any) -> str:
    return " and ".join(f"{member.in_features}->{member.out_features}"
                        for member in group.members)


def _stacked_differs(group: Any, packed: bool) -> str | None:
    """Where ``group``'s products as one differ from its linears' own: by MKL, and over
    packed weights when ``packed``."""
    singles = [pack(member.weight.detach()) for member in group.members] if packed else []
    for rows in PROMPT_ROWS:
        inputs = _inputs(group, rows)
        apart = torch.cat([torch.nn.functional.linear(inputs, member.weight, member.bias)
                           for member in group.members], dim=1)
        if not torch.equal(group.product(inputs, False), apart):
            return f"linears {_shapes(group)} as one product by MKL at {rows} rows"
        if packed and not torch.equal(group.product(inputs, True), torch.cat(
                [packed_linear(inputs, single, member.bias)
                 for single, member in zip(singles, group.members, strict=True)], dim=1)):
            return f"linears {_shapes(group)} as one product over packed weights at {rows} rows"
    return None


def _rows_differ(group: Any) -> str | None:
    """Where a row of ``group``'s packed products rounds otherwise among others."""
    inputs = _inputs(group, max(PASS_ROWS))
    largest = group.product(inputs, True)
    for rows in PASS_ROWS:
        if not (torch.equal(group.product(inputs[:rows], True), largest[:rows])
                and torch.equal(group.product(inputs[rows - 1:rows], True),
                                largest[rows - 1:rows])):
            return f"a row of {_shapes(group)} rounds otherwise alone than among {max(PASS_ROWS)}"
    return None


def _first(found: Iterator[str | None]) -> str | None:
    """The first difference that ``found``'s checks report, None when none does."""
    return next((why for why in found if why is not None), None)


def _caches_differ(one: DynamicCache, other: DynamicCache) -> str | None:
    """The first layer's keys or values that differ between two caches, named."""
    for index, (a, b) in enumerate(zip(one.layers, other.layers, strict=True)):
        for name in ("keys", "values"):
            if not torch.equal(getattr(a, name), getattr(b, name)):
                return f"layer {index}'s {name}"
    return None
