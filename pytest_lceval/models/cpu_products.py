"""The matrix products of the CPU greedy path (``hf_greedy``): a prompt's, and a decode pass's.

**Products of one input as one.** A layer's q, k and v read the same input one after another,
as do gate and up. Computed as one product over their weights stacked, a prefill's take 14 %
less time (2k rows on 2 cores; a larger product uses MKL's kernel better) and a decode pass has
5 parallel regions a layer instead of 8, each a wait for a sleeping thread to wake
(``foundation/cpu_wait.py``). The first decode pass, computed linear by linear, shows which
linears share an input; their weights then move into one buffer that each linear's weight
views, each starting where it started modulo a cache line: MKL's fp32 bits depend on where a
matrix starts (SmolLM2's GGUF-loaded weights start 40 bytes past one), and so placed every
output element of a prompt's products keeps its bits where MKL blocks a stacked product's
columns as it blocks each alone (``tests/test_cpu_products.py``; ``decoder_probe`` checks it on
the host it runs on, and where it fails each linear stays its own product).

**A decode pass's products over packed weights.** A pass multiplies one row per prompt (a few
more with lookup drafts) by each weight, and MKL's kernel is slow there: on 2 AVX2 cores
SmolLM2's products for 2 rows take 46 ms a pass where one row takes 18 ms, and 22 rows 109 ms.
oneDNN's kernel over a weight packed for it (``torch.ops.mkldnn``, what torch's own compiler
uses for CPU linears) takes 32 ms for 2 rows and 59 ms for 22, close to the time it takes to
read the weights once. Where it was measured its rounding of a row did not depend on the other
rows (1 to 2,000 rows, 1 or 2 threads, a weight packed alone or stacked), which is what lets a
row leave the batch, and a pass check drafted tokens, without changing the bits of the others;
``decoder_probe`` checks it where it runs, and where it fails a decode pass's products are
MKL's. It rounds differently from MKL
(by ~1e-6 of a product), so a decode's logits differ from ``model.generate``'s by as much;
``bench/bench_main_job.py`` compares every answer. The packed weights are a copy: a CPU greedy
decode holds the linears' weights twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import torch

ALIGNMENT = 64
"""Bytes modulo which a stacked weight starts where it started alone (a cache line)."""


def packing_available() -> bool:
    """Whether this torch has oneDNN's packed linear (x86 and Arm builds do)."""
    mkldnn = torch.ops.mkldnn
    return (torch.backends.mkldnn.is_available() and hasattr(mkldnn, "_reorder_linear_weight")
            and hasattr(mkldnn, "_linear_pointwise"))


class _Group:
    """Linears that read one input one after another, in order, and their weights: stacked in
    one buffer the members' weights view (None where their alignments do not allow it), and
    packed for oneDNN (made at the first decode pass that needs them)."""

    def __init__(self, members: list[torch.nn.Linear], tied: set[int]) -> None:
        self.members = members
        self.sizes = [member.out_features for member in members]
        self.stacked = _stacked(members, tied) if len(members) > 1 else None
        biases = [member.bias for member in members]
        self.bias = None if all(bias is None for bias in biases) else torch.cat(
            [member.weight.new_zeros(member.out_features) if bias is None else bias.detach()
             for member, bias in zip(members, biases, strict=True)])
        self.packed: torch.Tensor | None = None

    def product(self, rows: torch.Tensor, packed: bool) -> torch.Tensor:
        """The group's outputs for ``rows`` ([rows, in]), side by side: over the packed weights,
        or by MKL over the stacked ones."""
        if not packed:
            assert self.stacked is not None
            return torch.nn.functional.linear(rows, self.stacked, self.bias)
        if self.packed is None:
            self.packed = pack(self.stacked if self.stacked is not None else torch.cat(
                [member.weight.detach() for member in self.members]))
        return packed_linear(rows, self.packed, self.bias)


def pack(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` ([out, in]) laid out for oneDNN's linear (a copy)."""
    packed: torch.Tensor = torch.ops.mkldnn._reorder_linear_weight(weight, 2)
    return packed


def packed_linear(rows: torch.Tensor, packed: torch.Tensor,
                  bias: torch.Tensor | None) -> torch.Tensor:
    """``rows`` ([rows, in]) times a weight ``pack`` made, plus ``bias``, by oneDNN."""
    product: torch.Tensor = torch.ops.mkldnn._linear_pointwise(rows, packed, bias, "none", [],
                                                               "")
    return product


class CpuProducts:
    """A model's fp32 linears, computed as the module docstring says while ``cpu_products``
    lasts."""

    def __init__(self, tied: set[int]) -> None:
        self.tied = tied
        """The ids of weights more than one module holds (an LM head tied to the embeddings):
        they stay where they are."""
        self.decoding = False
        """Whether the products are a decode pass's (packed weights) or a prompt's (MKL's, the
        bits ``model.generate`` gives a prompt, its first token's logits included)."""
        self.packing = False
        """Whether a decode pass uses packed weights (where this torch has oneDNN's packed
        linear and the caller allows them: set at each ``cpu_products``)."""
        self.stacking = True
        """Whether linears that read one input compute as one product (the caller's choice,
        set at each ``cpu_products``); otherwise each is its own group."""
        self.seen: list[tuple[torch.nn.Linear, torch.Tensor]] | None = []
        """The first decode pass's products in order, with their inputs; None once learnt."""
        self.groups: dict[torch.nn.Linear, _Group] = {}
        """By a linear: its group (of one where it shares its input with none)."""
        self.waiting: dict[torch.nn.Linear, tuple[torch.Tensor, torch.Tensor]] = {}
        """Outputs computed with an earlier linear's product, with the input they are of."""

    def forward(self, linear: torch.nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
        if linear.weight.dtype != torch.float32:
            return torch.nn.functional.linear(inputs, linear.weight, linear.bias)
        if self.decoding and self.seen is not None:
            self._learn(linear, inputs)
        waiting = self.waiting.pop(linear, None)
        if waiting is not None and waiting[0] is inputs:
            return waiting[1]
        packed = self.decoding and self.packing
        group = self.groups.get(linear)
        if group is None and packed:
            group = self.groups[linear] = _Group([linear], self.tied)
        if (group is None or group.members[0] is not linear
                or (not packed and group.stacked is None)):
            return torch.nn.functional.linear(inputs, linear.weight, linear.bias)
        rows = inputs.numel() // inputs.shape[-1]
        product = group.product(inputs.reshape(rows, inputs.shape[-1]), packed)
        outputs = torch.split(product, group.sizes, dim=1)
        for member, output in zip(group.members[1:], outputs[1:], strict=True):
            self.waiting[member] = (inputs, _shaped(member, inputs, output))
        return _shaped(linear, inputs, outputs[0])

    def _learn(self, linear: torch.nn.Linear, inputs: torch.Tensor) -> None:
        """Record the first decode pass's products; at the first linear seen twice, group the
        runs of linears that read the same input (same input size and device; all are fp32)."""
        assert self.seen is not None
        if all(seen is not linear for seen, _ in self.seen):
            self.seen.append((linear, inputs))
            return
        runs: list[list[torch.nn.Linear]] = []
        previous = None
        for seen, seen_inputs in self.seen:
            first = runs[-1][0] if runs else None
            if (first is not None and seen_inputs is previous
                    and first.in_features == seen.in_features
                    and first.weight.device == seen.weight.device):
                runs[-1].append(seen)
            else:
                runs.append([seen])
            previous = seen_inputs
        self.seen = None
        self.groups = {}
        for run in runs:
            self._group(run)

    def _group(self, run: list[torch.nn.Linear]) -> None:
        """``run`` (linears that read one input) as one group, or one each without stacking."""
        for members in [run] if self.stacking else [[member] for member in run]:
            group = _Group(members, self.tied)
            self.groups.update((member, group) for member in members)

    def configure(self, packed: bool, stacked: bool) -> None:
        """Packed weights where allowed and available, stacked products where allowed: groups
        learnt stacked split into one per linear when stacking is no longer allowed, and
        packed copies no longer used are let go."""
        self.packing = packed and packing_available()
        if not stacked and self.stacking:
            runs = {id(group): group.members for group in self.groups.values()}
            self.stacking, self.groups = False, {}
            for members in runs.values():
                self._group(members)
        if not self.packing:
            for group in self.groups.values():
                group.packed = None


def _stacked(group: list[torch.nn.Linear], tied: set[int]) -> torch.Tensor | None:
    """The group's weights one after another in a new buffer that the members' weights then
    view, each starting where it started modulo ``ALIGNMENT`` bytes; None (nothing moved) where
    a weight is tied to another module or no buffer can keep the alignments."""
    weights = [member.weight.detach() for member in group]
    offset = weights[0].data_ptr() % ALIGNMENT
    size = weights[0].element_size()
    if (offset % size or any(id(member.weight) in tied for member in group)
            or any(weight.data_ptr() % ALIGNMENT != offset or weight.nbytes % ALIGNMENT
                   for weight in weights)):
        return None
    total = sum(weight.numel() for weight in weights)
    buffer = weights[0].new_empty(total + ALIGNMENT // size)
    start = ((offset - buffer.data_ptr()) % ALIGNMENT) // size
    stacked = buffer[start:start + total].view(-1, weights[0].shape[1])
    torch.cat(weights, out=stacked)
    first = 0
    for member in group:
        member.weight.data = stacked[first:first + member.out_features]
        first += member.out_features
    return stacked


def _shaped(linear: torch.nn.Linear, inputs: torch.Tensor, product: torch.Tensor) -> torch.Tensor:
    """``linear``'s output from its columns of a group's product ([rows, out]), stored
    contiguously as ``F.linear``'s is (left as a view of the product, a 2k-token prompt's
    prefill took 9 % longer)."""
    return product.contiguous().reshape(*inputs.shape[:-1], linear.out_features)


@contextmanager
def cpu_products(model: Any, packed: bool = True, stacked: bool = True) -> Iterator[CpuProducts]:
    """The model's fp32 linears compute as the module docstring says while this lasts: a
    prompt's products, and a decode pass's once ``decoding`` is set on what this yields.
    ``packed`` and ``stacked`` False keep a decode pass's products on MKL and every linear its
    own product (where ``decoder_probe`` found them to round otherwise on this host); once
    unstacked, a model's products stay so."""
    products = getattr(model, "_lceval_products", None)
    if products is None:
        uses = Counter(id(weight) for module in model.modules()
                       for weight in module.parameters(recurse=False))
        products = CpuProducts({weight for weight, count in uses.items() if count > 1})
        model._lceval_products = products
    products.configure(packed, stacked)
    linears = [module for module in model.modules() if type(module) is torch.nn.Linear]
    for linear in linears:
        linear.forward = partial(products.forward, linear)  # type: ignore[method-assign]
    try:
        yield products
    finally:
        products.decoding = False
        products.waiting.clear()
        for linear in linears:
            del linear.forward
