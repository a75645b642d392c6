"""How many prompts of a given padded length one forward pass of the HF backend may hold.

On a CPU the limit is a fixed number of padded tokens (rows x longest row, ``CPU_BATCH_TOKENS``):
memory is not what binds there, and more rows than that buy no speed on a few cores.

On a GPU a fixed token count is the wrong limit. 32k padded tokens is one 32k prompt, so a cell
of 32k prompts ran one row at a time while an 80 GB card sat mostly empty, and per-step decoding
overhead, not arithmetic, set the speed (issue #14: "a large one in half-empty batches"). There
the limit is the memory this process may use once its weights are in, over what one row of
padded length S costs (``RowCost``):

* its KV cache: S x (2 x key/value heads x head size x bytes) per full-attention layer, and at
  most the window's worth of tokens per sliding-window layer;
* one layer's prefill activations at a time (the layers run in turn): P x (3 x MLP width +
  6 x hidden size) x bytes, P being S or the prefill chunk;
* the attention mask that SDPA receives when rows are padded: P x S booleans, which it turns
  into an additive mask of the model's dtype, so P x S x (1 + bytes).

That is an estimate: kernels, the allocator's fragmentation and other processes on the card are
not in it. So the budget takes 90 % of the memory it is given, and an out-of-memory error halves
the batch, retries both halves, and lowers the budget to what the failed batch would have needed
halved, for the rest of the session (``BatchMemory.shrink``). Rows and their order change no
answer's ids; on a GPU, like any change of batch make-up, they can move bf16 logits by rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

CPU_BATCH_TOKENS = 32768
"""Padded tokens per forward pass on a CPU (rows x longest row)."""
GPU_HEADROOM = 0.9
"""Share of the memory given to batches that the estimate may fill; the rest absorbs what the
estimate leaves out (kernel workspaces, fragmentation)."""


@dataclass(frozen=True)
class RowCost:
    """Bytes one row of a batch costs on the GPU, as a function of its padded length."""

    kv_per_token: int
    """KV-cache bytes per token, summed over the full-attention layers."""
    sliding: tuple[tuple[int, int], ...] = ()
    """(window, KV bytes per token) of each sliding-window layer: it caches at most its window."""
    activations_per_token: int = 0
    """Prefill activation bytes per token of the widest layer (layers run one at a time)."""
    mask_per_entry: int = 0
    """Bytes per (query, key) entry of a padded batch's attention mask."""
    prefill_chunk: int | None = None
    """Tokens per prefill step when the prompt is read in chunks; None = whole."""

    def __call__(self, length: int) -> int:
        prefill = min(length, self.prefill_chunk or length)
        kv = length * self.kv_per_token + sum(min(length, window) * size
                                              for window, size in self.sliding)
        return kv + prefill * (self.activations_per_token + length * self.mask_per_entry)

    @classmethod
    def of(cls, config: object, dtype_bytes: int, prefill_chunk: int | None) -> RowCost | None:
        """The cost of a decoder read from its config; None when the config does not say
        what the formula needs (then the CPU rule is the fallback)."""
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        sizes = [getattr(text, name, None) for name in
                 ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")]
        if not all(isinstance(size, int) and size > 0 for size in sizes):
            return None
        layers, hidden, heads, width = (size for size in sizes if isinstance(size, int))
        kv_heads = getattr(text, "num_key_value_heads", None) or heads
        head_size = getattr(text, "head_dim", None) or hidden // heads
        per_layer = 2 * kv_heads * head_size * dtype_bytes
        window = getattr(text, "sliding_window", None)
        kinds = list(getattr(text, "layer_types", None) or ["full_attention"] * layers)
        sliding = tuple((int(window), per_layer) for kind in kinds
                        if kind != "full_attention" and window)
        return cls(kv_per_token=per_layer * (len(kinds) - len(sliding)), sliding=sliding,
                   activations_per_token=(3 * width + 6 * hidden) * dtype_bytes,
                   mask_per_entry=1 + dtype_bytes, prefill_chunk=prefill_chunk)


def _tokens(length: int) -> int:
    return length


@dataclass
class BatchMemory:
    """The budget of one backend: ``fits`` decides a batch, ``shrink`` learns from a failure."""

    budget: float
    """What a batch may cost in all, in the unit of ``cost``."""
    cost: Callable[[int], int] = _tokens
    """Cost of one row of a padded length: its length (the CPU rule) or a ``RowCost``."""

    def fits(self, rows: int, longest: int) -> bool:
        """Whether ``rows`` rows padded to ``longest`` fit; a single row always does (it must
        run whatever the estimate says: the error, if any, is then the case's own)."""
        return rows <= 1 or rows * self.cost(longest) <= self.budget

    def shrink(self, rows: int, longest: int) -> bool:
        """After running out of memory at ``rows`` x ``longest``: from now on at most half as
        many rows of that length fit. False when there is nothing to halve (one row)."""
        if rows <= 1:
            return False
        self.budget = min(self.budget, rows // 2 * self.cost(longest))
        return True

    @classmethod
    def for_cpu(cls) -> BatchMemory:
        return cls(CPU_BATCH_TOKENS)

    @classmethod
    def for_gpu(cls, cost: RowCost, free: int, total: int, share: float,
                in_use: int) -> BatchMemory:
        """``share`` of the card's ``total`` bytes is this process's, ``in_use`` of them
        already taken (the weights); never more than the ``free`` bytes the card reports."""
        available = max(0, min(free, total * share - in_use))
        return cls(GPU_HEADROOM * available, cost)
