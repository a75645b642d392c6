"""Transformers backend: a local HF folder, a hub id, or a ``.gguf`` file, answered in batches.

Spec: ``hf:PATH_OR_HUB_ID`` or ``hf:/path/model.gguf``.

Decoding is greedy (``do_sample=False``, one beam, no repetition penalty) whatever the model's
own generation config says: an evaluation must not sample by accident (METHODS §6.6).

Token ids. A rendered prompt is fed as ``tokenizer(text)`` with the tokenizer's own special
tokens, except when the text already starts with the BOS token's text (chat templates write it
themselves): then nothing is added, so no model ever sees two BOS tokens. ``renderer.count`` uses
the same function, so the length budget counts exactly the ids that the model reads. That text
side (ids, template, option tokens) is ``hf_text.HFText``, shared with the server backends, so a
prompt counts the same whichever backend answers it.

Rank requests (``prefix`` + ``suffix``) are tokenised in two pieces: the prefix as a prompt (with
special tokens, as above) and the suffix as plain text in the prefix's context
(``hf_text.suffix_ids``: no SentencePiece dummy-prefix token at the seam), and the model reads
exactly that concatenation. Tokenising the pieces apart can differ from tokenising the joined
string at the seam (a merge across it), but it is what lets one prefix computation serve every
suffix, and the cached and uncached paths read identical ids, so their scores agree to float
rounding.

Prefill. A model with sliding-window layers reads a long prompt in chunks of ``PREFILL_CHUNK``
tokens (generation and rank prefixes alike), so those layers attend to their window's cache
rather than the whole prompt; the chunk size is part of the fingerprint.

Greedy decoding on a CPU. With ``greedy_on_cpu`` (``GREEDY_ON_CPU``; models without sliding
layers) a generate batch is decoded by ``hf_greedy.greedy_batch`` rather than ``model.generate``:
each prompt prefilled alone with causal attention (no square of masked scores), the padded
batch decoded over a KV cache that grows in place, each pass checking a lookup draft, with
products and attention that suit a few rows. The same stopping rules and padding; rounding that
differs from ``model.generate``'s in a padded prompt's attention and in the decode's products
and attention, measured on the main job (``GREEDY_ON_CPU``). Before its first batch,
``decoder_probe`` checks on the loaded model which of the decoder's shortcuts give, on this
host, the bits of the computation they stand in for; the others are off for the run, and the
run's output says which and why (``decoder_verdict``).
On a GPU ``model.generate`` stays.

Lazy weights. The backend is built from the tokenizer and the configs alone: they give the
renderer, the context window and the whole fingerprint (the dtype is the one asked for, which is
the one loaded). The weights load at the first request that reaches the model, so a rerun whose
answers are all stored never loads them; a load that fails there is ``ModelUnavailable``, which
stops the run at that cell as a failure to build the backend does.
"""

from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any, TypeVar

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from transformers.utils import logging as hf_logging

from ..foundation.workers import worker_count
from ..results.records import GenerateRequest, Generation, Ranking, RankRequest
from .backend import BaseBackend, Stopwatch, model_unavailable, split_rank
from .base import cut_at_stop
from .batch_memory import BatchMemory, RowCost
from .decoder_probe import Verdict, probe
from .hf_greedy import Prefilled, common_start, greedy_batch
from .hf_text import HFText, suffix_ids
from .model_args import args_text, chosen_window, override_config
from .options import LoadOptions
from .serving import DEFAULT_GPU_MEMORY
from .topk_rank import FULL_VOCABULARY, REFERENCE_TOP_K, rank_from_top
from .weights import weights_identity

RANK_ROWS = 16
"""Suffixes per rank forward pass: batched, its logits are [rows, distinct suffix lengths,
vocab], which for Gemma's 262k vocabulary reaches 268 MB at 16 rows."""
PACK_TOKENS = 2048
"""Suffix tokens per packed rank forward pass (see ``HFBackend._packed_logits``)."""
MIN_HEAD = 8
"""Common start, in tokens, from which packed suffixes share one copy of it."""
PREFILL_CHUNK = 1024
"""Prompt tokens per prefill step for models with sliding-window layers. In chunks, those layers
attend to their window's cache instead of the whole prompt: Gemma 3 270M on 2 CPU threads
answered a 16k prompt 3.1x faster (176 s -> 57 s; 8k: 2.2x) with the same greedy tokens
(bench/bench_prefill_chunks.py). A model with only full attention gains nothing and loses 6-13 %
(SmolLM2 at 8k), so it prefills whole."""
GREEDY_ON_CPU = True
"""Whether a CPU decodes generate batches with ``hf_greedy.greedy_batch`` (see the module
docstring): by default, because replayed call by call against ``model.generate``
(``bench/bench_main_job.py``) no answer of the main job differed; the README says on which
hosts, and with which shortcuts the probe kept."""
_SANE_MAX_LENGTH = 10_000_000
"""Tokenizers without a known limit report ~1e30 as model_max_length; anything above is unset."""
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_Row = TypeVar("_Row")
_T = TypeVar("_T")


@dataclass
class _PrefixState:
    """A computed prefix: its KV cache and the logits of the token that follows it."""

    ids: tuple[int, ...]
    cache: Any
    next_logits: torch.Tensor
    """Shape [vocab]."""


@dataclass(frozen=True)
class Checkpoint:
    """Where the weights are and how they are loaded (see "Lazy weights" in the module)."""

    source: str
    """A folder or hub id; with ``gguf_file``, the folder of that file."""
    gguf_file: str | None
    device: torch.device
    dtype: torch.dtype
    gpu_memory: float = DEFAULT_GPU_MEMORY
    """Share of the GPU's memory this process's model may use: weights, KV cache, activations
    (``--lceval-gpu-memory``; divided among xdist workers that share a GPU)."""
    config: Any = None
    """The config with ``--lceval-model-args`` applied, which the weights load with (as
    HELMET's ``--rope_theta``); None = the checkpoint's own."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """What those overrides changed (``model_args.Overridden.changes``): the fingerprint's."""

    def load(self) -> Any:
        if self.device.type == "cpu":
            torch.set_num_threads(cpu_threads_per_worker())
        # device_map streams weights straight to a GPU; on the CPU it only adds a second
        device_map = self.device if self.device.type != "cpu" else None
        config = {"config": self.config} if self.config is not None else {}
        with _no_progress_bars():
            return AutoModelForCausalLM.from_pretrained(self.source, gguf_file=self.gguf_file,
                                                        dtype=self.dtype, device_map=device_map,
                                                        **config)


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers' own bars ("Loading weights: 100%") while the weights load: they land in
    the captured stderr of whichever test loads the model first, and the run's progress line
    already says the model is loading."""
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


class HFBackend(BaseBackend):
    """The Backend protocol on a transformers causal LM; see the module docstring."""

    def __init__(self, spec: str, checkpoint: Checkpoint, tokenizer: Any, config: Any,
                 eos: list[int], options: LoadOptions, weights: dict[str, Any]) -> None:
        self.text = HFText(tokenizer, options.chat_template)
        window, self.window_source = chosen_window(options.window, options.model_args,
                                                   partial(_context_window, config, tokenizer))
        super().__init__(spec, self.text, self.text.renderer, window)
        self.checkpoint = checkpoint
        self.config = config
        """The model's config as read without the weights (the loaded model has its own)."""
        self.hf_tokenizer = tokenizer
        self.prompt_ids = self.text.prompt_ids
        self.weights = weights
        self._eos = eos
        self._pad: int = next(i for i in (tokenizer.pad_token_id, *self._eos, 0) if i is not None)
        if tokenizer.pad_token_id is None:  # e.g. Llama 3: pad with EOS, masked out anyway
            tokenizer.pad_token_id = self._pad  # before the fingerprint, which sees it
        self._last_prefix: _PrefixState | None = None
        self.prefill_chunk: int | None = PREFILL_CHUNK if _has_sliding_layers(config) else None
        """Prompt tokens per prefill step; None prefills the prompt in one forward pass."""
        self.greedy_on_cpu = (GREEDY_ON_CPU and self.device.type == "cpu"
                              and self.prefill_chunk is None)
        """Whether generate batches go through ``hf_greedy.greedy_batch`` rather than
        ``model.generate``. Not on a GPU, whose kernels are another matter, nor for
        sliding-window models, whose chunked prefill and window caches it does not handle."""
        self._prefilled = Prefilled()
        """The last generate batch's prompts and caches, where the next one's may start."""
        self.decoder_verdict: Verdict | None = None
        """Which shortcuts of the CPU decoder give their exact path's bits on this host
        (``decoder_probe``), found as the weights load; None before, or off the decoder's
        path."""
        self.rank_top_k = rank_top_k(options)

    @cached_property
    def model(self) -> Any:
        """The weights, loaded by the first request that reaches the model; on the CPU
        decoder's path probed at once (``decoder_verdict``), before anything else runs on it."""
        if self.greedy_on_cpu:
            self._probed()
        return self._loaded

    @cached_property
    def _loaded(self) -> Any:
        try:
            return self.checkpoint.load()
        except Exception as exc:  # whatever the loader raises: this cell says it, the run stops
            raise model_unavailable(self.spec, exc) from exc

    def _probed(self) -> Verdict:
        """The verdict, the probe run (and its line added to ``notes``) the first time."""
        if self.decoder_verdict is None:
            self.decoder_verdict = probe(self._loaded, self._cache_keyword)
            self.notes.append(self.decoder_verdict.line())
        return self.decoder_verdict

    @cached_property
    def memory(self) -> BatchMemory:
        """How many rows a forward pass may hold (see ``batch_memory``): read on a GPU once
        the weights are in, since what they leave is what batches may use."""
        if self.device.type != "cuda":
            return BatchMemory.for_cpu()
        cost = RowCost.of(self.model.config, self.checkpoint.dtype.itemsize, self.prefill_chunk)
        if cost is None:
            return BatchMemory.for_cpu()
        free, total = torch.cuda.mem_get_info(self.device)
        return BatchMemory.for_gpu(cost, free, total, self.checkpoint.gpu_memory,
                                   torch.cuda.memory_allocated(self.device))

    def _halving(self, run: Callable[[list[_Row]], list[_T]], batch: list[_Row],
                 longest: int) -> list[_T]:
        """``run(batch)``; when the GPU runs out of memory, the budget shrinks and each half of
        the batch runs on its own. One row that does not fit raises as before."""
        try:
            return run(batch)
        except torch.OutOfMemoryError:
            if not self.memory.shrink(len(batch), longest):
                raise
        torch.cuda.empty_cache()  # outside the handler, whose traceback holds the batch
        half = len(batch) // 2
        return (self._halving(run, batch[:half], longest)
                + self._halving(run, batch[half:], longest))

    def identity(self) -> dict[str, Any]:
        return {
            "weights": self.weights,
            **self.text.identity(),
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "dtype": str(self.checkpoint.dtype),
            "decoding": "greedy",
            **({"prefill_chunk": self.prefill_chunk} if self.prefill_chunk else {}),
            **({"config_overrides": self.checkpoint.overrides} if self.checkpoint.overrides
               else {}),
            # the default rule is part of RANK_RULES; the other keys its own stored rankings
            **({"rank": FULL_VOCABULARY} if self.rank_top_k is None else {}),
        }

    @property
    def device(self) -> torch.device:
        return self.checkpoint.device

    def describe(self) -> dict[str, str]:
        return {
            "backend": "hf",
            "model": self.spec,
            "source": str(self.config.name_or_path),
            "device": str(self.device),
            "dtype": str(self.checkpoint.dtype).removeprefix("torch."),
            "window": f"{self.context_window} ({self.window_source})",
            "chat_template": "on" if self.text.chat_template else "off",
            "engine": f"transformers {transformers.__version__}, torch {torch.__version__}",
            **({"config_overrides": args_text(self.checkpoint.overrides)}
               if self.checkpoint.overrides else {}),
        }

    def _check_fits(self, tokens: int, budget: int) -> None:
        if tokens + budget > self.context_window:
            raise ValueError(
                f"{self.spec}: prompt of {tokens} tokens + {budget} to generate exceeds the "
                f"context window of {self.context_window}; the caller must skip such cases")

    # -- generate ------------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Greedy answers, batched by (budget, stop strings) and by padded size, in order."""
        answers: dict[int, Generation] = {}
        prompts = [self.prompt_ids(request.prompt) for request in requests]
        for index, request in enumerate(requests):
            self._check_fits(len(prompts[index]), request.max_new_tokens)
        groups: dict[tuple[int, tuple[str, ...]], list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault((request.max_new_tokens, request.stop), []).append(index)
        for (budget, stop), members in groups.items():
            sizes = [len(prompts[i]) + budget for i in members]
            for batch in _batches(members, sizes, self.memory.fits):
                clock = Stopwatch()
                outputs = self._halving(partial(self._generate_batch, budget=budget, stop=stop),
                                        [prompts[i] for i in batch],
                                        len(prompts[batch[0]]) + budget)  # longest first
                seconds = clock.per(len(batch))
                for index, (text, produced) in zip(batch, outputs, strict=True):
                    answers[index] = Generation(text, len(prompts[index]), produced, seconds)
        return [answers[index] for index in range(len(requests))]

    @torch.inference_mode()
    def _generate_batch(self, prompts: list[list[int]], budget: int,
                        stop: tuple[str, ...]) -> list[tuple[str, int]]:
        """(text cut at the first stop string, tokens generated) per prompt of one batch."""
        tokenizer = self.hf_tokenizer if stop else None
        stop_strings = [text for text in stop if text]
        if self.greedy_on_cpu:
            rows = greedy_batch(self.model, prompts, budget, self._eos, self._pad, stop_strings,
                                tokenizer, self._cache_keyword, self._prefilled,
                                self._probed().shortcuts)
            return [self._finish(row, stop) for row in rows]
        config = GenerationConfig(
            max_new_tokens=budget, do_sample=False, num_beams=1, repetition_penalty=1.0,
            eos_token_id=self._eos, pad_token_id=self._pad, prefill_chunk_size=self.prefill_chunk,
            stop_strings=stop_strings or None)
        inputs = self.hf_tokenizer.pad({"input_ids": prompts}, padding_side="left",
                                       return_tensors="pt").to(self.device)
        output = self.model.generate(**inputs, generation_config=config, tokenizer=tokenizer)
        new_tokens = output[:, inputs["input_ids"].shape[1]:].tolist()
        return [self._finish(row, stop) for row in new_tokens]

    def _finish(self, row: list[int], stop: tuple[str, ...]) -> tuple[str, int]:
        """Drop the end-of-sequence token and the padding after it; cut at the stop strings."""
        ends = {*self._eos, self._pad}
        length = next((i for i, token in enumerate(row) if token in ends), len(row))
        produced = min(length + 1, len(row))
        text = self.hf_tokenizer.decode(row[:length], skip_special_tokens=True)
        return cut_at_stop(text, stop), produced

    # -- rank ----------------------------------------------------------------------------------

    def rank(self, requests: Sequence[RankRequest]) -> list[Ranking]:
        """First-token log-probabilities; each distinct prefix is computed once (see module)."""
        answers: dict[int, Ranking] = {}
        for prefix, members in _group_by_prefix(requests).items():
            group = self._rank_group(prefix, [requests[i] for i in members])
            answers.update(zip(members, group, strict=True))
        return [answers[index] for index in range(len(requests))]

    def _rank_group(self, prefix: str, requests: list[RankRequest]) -> list[Ranking]:
        clock = Stopwatch()
        prefix_ids = self.prompt_ids(prefix)
        suffixes = [split_rank(request)[1] for request in requests]
        suffix_tokens = [suffix_ids(self.text, prefix, suffix) for suffix in suffixes]
        for ids in suffix_tokens:
            self._check_fits(len(prefix_ids) + len(ids), 1)
        targets = [self.text.option_ids(prefix + suffix, request.options)
                   for request, suffix in zip(requests, suffixes, strict=True)]
        logits = self._next_logits(self._prefix_state(prefix_ids), suffix_tokens)
        seconds = clock.per(len(requests))
        return [_ranking(logits[row], targets[row], len(prefix_ids) + len(suffix_tokens[row]),
                         seconds, self.rank_top_k) for row in range(len(requests))]

    @torch.inference_mode()
    def _prefix_state(self, ids: list[int]) -> _PrefixState:
        """Run the prefix once; the last one is kept, as consecutive batches often share it."""
        if self._last_prefix is not None and self._last_prefix.ids == tuple(ids):
            return self._last_prefix
        self._last_prefix = None  # free the old cache before building the new one
        step = self.prefill_chunk or len(ids)
        cache = None
        for start in range(0, len(ids), step):
            chunk = torch.tensor([ids[start:start + step]], device=self.device)
            output = self.model(input_ids=chunk, **self._cache_argument(cache), use_cache=True,
                                logits_to_keep=1)
            cache = cache_of(output)
        self._last_prefix = _PrefixState(tuple(ids), cache, output.logits[0, -1])
        return self._last_prefix

    @torch.inference_mode()
    def _next_logits(self, state: _PrefixState, suffixes: list[list[int]]) -> torch.Tensor:
        """Next-token logits after prefix + each suffix, [len(suffixes), vocab]."""
        rows: dict[int, torch.Tensor] = {}
        nonempty = [i for i, suffix in enumerate(suffixes) if suffix]
        for i in set(range(len(suffixes))) - set(nonempty):
            rows[i] = state.next_logits
        if self._packable:  # sorted, so that suffixes with a common start share a pack
            ordered = sorted(nonempty, key=lambda i: suffixes[i])
            for pack in _packs(ordered, [len(suffixes[i]) for i in ordered]):
                rows.update(zip(pack, self._packed_logits(state, [suffixes[i] for i in pack]),
                                strict=True))
        else:
            for batch in _batches(nonempty, [len(state.ids) + len(suffixes[i]) for i in nonempty],
                                  self.memory.fits, RANK_ROWS):
                rows.update(zip(batch, self._halving(
                    lambda part: list(self._batched_logits(state, part)),
                    [suffixes[i] for i in batch], len(state.ids) + len(suffixes[batch[0]])),
                    strict=True))
        return torch.stack([rows[i] for i in range(len(suffixes))])

    def _packed_logits(self, state: _PrefixState, suffixes: list[list[int]]) -> torch.Tensor:
        """Suffixes laid end to end in one row after the prefix cache, each seeing only the
        prefix, its group's shared head and itself (a block-causal 4D mask), at the positions
        it would have alone.

        The prefix cache is read once per forward, not once per suffix: copying it into a
        batch row per suffix dominated the time of short suffixes after a long prefix (0.8 s
        per 70-token suffix after 4k tokens on SmolLM2, against 0.38 s packed). Suffixes that
        start with the same tokens (Task Haystack's instruction before each test input) store
        that head once: it is computed once and the rest of each suffix attends to it. Needs
        every layer to attend over the full cache; see ``_packable``.
        """
        prefix = len(state.ids)
        ids: list[int] = []
        spans: list[tuple[int, int, int, int]] = []  # (start, end, head start, head end)
        last = [0] * len(suffixes)
        for head, members in _shared_heads(suffixes):
            head_start = len(ids)
            ids += suffixes[members[0]][:head]
            spans.append((head_start, len(ids), head_start, head_start))
            for member in members:
                start = len(ids)
                ids += suffixes[member][head:]
                spans.append((start, len(ids), head_start, head_start + head))
                last[member] = len(ids) - 1
        visible = torch.zeros(len(ids), prefix + len(ids), dtype=torch.bool)
        visible[:, :prefix] = True
        positions = [0] * len(ids)
        for start, end, head_start, head_end in spans:
            visible[start:end, prefix + start:prefix + end] = torch.ones(
                end - start, end - start, dtype=torch.bool).tril()
            visible[start:end, prefix + head_start:prefix + head_end] = True
            offset = prefix + head_end - head_start
            positions[start:end] = range(offset, offset + end - start)
        mask = torch.zeros(visible.shape, dtype=self.model.dtype).masked_fill(
            ~visible, torch.finfo(self.model.dtype).min)
        logits = self.model(input_ids=torch.tensor([ids], device=self.device),
                            attention_mask=mask[None, None].to(self.device),
                            position_ids=torch.tensor([positions], device=self.device),
                            **self._cache_argument(copy.deepcopy(state.cache)), use_cache=True,
                            logits_to_keep=torch.tensor(last, device=self.device)).logits
        return logits[0]

    def _batched_logits(self, state: _PrefixState, suffixes: list[list[int]]) -> torch.Tensor:
        """Suffixes right-padded into one batch over a copy of the prefix cache: causal
        attention keeps the padding (after the real tokens) invisible, and only the last real
        position of each row goes through the LM head. A copy, not a cache cropped back,
        because sliding-window layers (Gemma 3) drop the old tokens that a crop would need.
        """
        width = max(len(suffix) for suffix in suffixes)
        padded = [suffix + [self._pad] * (width - len(suffix)) for suffix in suffixes]
        last = [len(suffix) - 1 for suffix in suffixes]
        keep = sorted(set(last))
        cache = copy.deepcopy(state.cache)
        if len(suffixes) > 1:
            cache.batch_repeat_interleave(len(suffixes))
        logits = self.model(input_ids=torch.tensor(padded, device=self.device),
                            **self._cache_argument(cache), use_cache=True,
                            logits_to_keep=torch.tensor(keep, device=self.device)).logits
        return torch.stack([logits[row, keep.index(position)]  # [rows, len(keep), vocab]
                            for row, position in enumerate(last)])

    def _cache_argument(self, cache: Any) -> dict[str, Any]:
        """The KV cache as the forward's keyword: ``cache`` from transformers 5.24
        (``past_key_values`` is deprecated there and goes in 5.40), ``past_key_values`` before
        it, as on the GPU bench machine's 5.17 (``bench/gpu/README.md``)."""
        return {self._cache_keyword: cache}

    @cached_property
    def _cache_keyword(self) -> str:
        return cache_keyword(self._loaded)

    @property
    def _packable(self) -> bool:
        """Whether suffixes may share one row (``_packed_logits``): only when the attention
        honours a custom 4D mask (sdpa, eager; flash-attention kernels take padding masks
        only) and no layer has a sliding window, whose cache keeps just its last tokens and
        whose own mask a custom mask would replace. Otherwise ``_batched_logits``."""
        config = self.model.config
        return (getattr(config, "_attn_implementation", None) in ("sdpa", "eager")
                and not _has_sliding_layers(config))


def _has_sliding_layers(config: Any) -> bool:
    layer_types = getattr(config, "layer_types", None)
    if layer_types:
        return any(kind != "full_attention" for kind in layer_types)
    return bool(getattr(config, "sliding_window", None)
                and getattr(config, "use_sliding_window", True))


def rank_top_k(options: LoadOptions) -> int | None:
    """How many most likely next tokens rank reads: the reference's 100; None, every option
    from the whole vocabulary (--lceval-rank full)."""
    return None if options.rank == "full" else REFERENCE_TOP_K


def _ranking(logits: torch.Tensor, targets: list[int], prompt_tokens: int,
             seconds: float, top_k: int | None) -> Ranking:
    """The options' first-token log-probabilities: from the ``top_k`` most likely tokens, as
    the reference's vLLM call returns them (``topk_rank.rank_from_top``: an option outside them
    unscored, none in them no prediction), or every option exactly when ``top_k`` is None."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    if top_k is not None:
        values, ids = torch.topk(logprobs, min(top_k, logprobs.numel()))
        return rank_from_top(dict(zip(ids.tolist(), values.tolist(), strict=True)),
                             [[target] for target in targets], prompt_tokens, seconds)
    top = int(torch.argmax(logprobs))
    return Ranking(tuple(float(logprobs[t]) for t in targets), top in targets, prompt_tokens,
                   seconds, FULL_VOCABULARY)


def _group_by_prefix(requests: Sequence[RankRequest]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for index, request in enumerate(requests):
        groups.setdefault(split_rank(request)[0], []).append(index)
    return groups


def _packs(members: list[int], lengths: list[int]) -> Iterator[list[int]]:
    """Suffixes per packed forward pass, in order: at most RANK_ROWS of them (their logits are
    [rows, vocab]) and PACK_TOKENS tokens (the mask grows with the square of that)."""
    pack: list[int] = []
    used = 0
    for length, member in zip(lengths, members, strict=True):
        if pack and (len(pack) >= RANK_ROWS or used + length > PACK_TOKENS):
            yield pack
            pack, used = [], 0
        pack.append(member)
        used += length
    if pack:
        yield pack


def _shared_heads(suffixes: list[list[int]]) -> list[tuple[int, list[int]]]:
    """(head length, members) groups of consecutive (sorted) suffixes whose common start is at
    least MIN_HEAD tokens; the head stops one token short of the shortest member, so every
    member keeps a token of its own to be scored at. A lone suffix has no head."""
    groups: list[tuple[int, list[int]]] = []
    for index, suffix in enumerate(suffixes):
        if groups:
            head, members = groups[-1]
            shared = min(head, common_start(suffixes[members[0]], suffix))
            if shared >= MIN_HEAD:
                groups[-1] = (shared, [*members, index])
                continue
        groups.append((len(suffix), [index]))
    return [(min(head, *(len(suffixes[m]) - 1 for m in members)) if len(members) > 1 else 0,
             members) for head, members in groups]


def _batches(members: list[int], sizes: list[int], fits: Callable[[int, int], bool],
             max_rows: int | None = None) -> Iterator[list[int]]:
    """Members in batches that ``fits(rows, longest)`` accepts.

    Longest first, so rows of similar length share a batch, padding stays small, and a batch's
    first member is its longest.
    """
    batch: list[int] = []
    longest = 0
    for size, member in sorted(zip(sizes, members, strict=True), key=lambda pair: -pair[0]):
        too_many = max_rows is not None and len(batch) >= max_rows
        if batch and (too_many or not fits(len(batch) + 1, longest)):
            yield batch
            batch = []
        if not batch:
            longest = size
        batch.append(member)
    if batch:
        yield batch


def _as_list(value: int | list[int] | None) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)


def _context_window(config: Any, tokenizer: Any) -> tuple[int, str]:
    """(window, where it came from): the config's max_position_embeddings, else the tokenizer's
    model_max_length."""
    window = getattr(config.get_text_config(), "max_position_embeddings", None)
    if window:
        return int(window), "model config"
    if 0 < tokenizer.model_max_length < _SANE_MAX_LENGTH:
        return int(tokenizer.model_max_length), "tokenizer"
    raise ValueError("cannot tell the context window: the config has no "
                     "max_position_embeddings and the tokenizer no model_max_length (give "
                     "--lceval-window N)")


def resolve_device(option: str) -> torch.device:
    """'auto' is the first GPU when there is one, else the CPU; anything else is torch's."""
    if option == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(option)


def resolve_dtype(option: str, device: torch.device) -> torch.dtype:
    """'auto' is bfloat16 on GPUs (fast, safe range) and float32 on CPUs (bf16 is slow there)."""
    if option == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if option not in _DTYPES:
        raise ValueError(f"dtype must be auto or one of {', '.join(_DTYPES)}, not {option!r}")
    return _DTYPES[option]


def cpu_threads_per_worker() -> int:
    """The cores divided among xdist workers: torch's default (all cores in every worker)
    oversubscribes the CPU, and contended threads make small matrix products many times slower."""
    return max(1, (os.cpu_count() or 1) // worker_count())


def load_hf(rest: str, options: LoadOptions, spec: str | None = None) -> HFBackend:
    """``rest`` (folder, hub id or .gguf file) without its weights, which load at the first
    answer; ``spec`` overrides the name in reports."""
    source, gguf_file = rest, None
    if rest.endswith(".gguf"):
        source, gguf_file = str(Path(rest).parent), Path(rest).name
    device = resolve_device(options.device)
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf_file)
    own = AutoConfig.from_pretrained(source, gguf_file=gguf_file)
    overridden = override_config(own, options.model_args)
    config = overridden.config
    checkpoint = Checkpoint(source, gguf_file, device, resolve_dtype(options.dtype, device),
                            options.serving.gpu_memory or DEFAULT_GPU_MEMORY,
                            config if overridden.changes else None, overridden.changes)
    eos = _as_list(_generation_config(source, gguf_file, own).eos_token_id)
    return HFBackend(spec or f"hf:{rest}", checkpoint, tokenizer, config, eos, options,
                     weights_identity(source, gguf_file))


def _generation_config(source: str, gguf_file: str | None, config: Any) -> GenerationConfig:
    """The generation config that ``from_pretrained`` gives the model, read without it: the
    folder's generation_config.json, else one made from config.json (a GGUF: from its config).
    Its EOS ids end answers and pad a tokenizer without a pad token, which the fingerprint
    sees, so they must be the loaded model's (a test compares them)."""
    if gguf_file is not None:
        return GenerationConfig.from_model_config(config)
    try:
        return GenerationConfig.from_pretrained(source)
    except OSError:
        return GenerationConfig.from_pretrained(source, config_file_name="config.json",
                                                _from_model_config=True)


def cache_keyword(model: Any) -> str:
    """The keyword ``model``'s forward takes its KV cache by (see ``_cache_argument``)."""
    accepted = inspect.signature(model.forward).parameters
    return "cache" if "cache" in accepted else "past_key_values"


def cache_of(output: Any) -> Any:
    """The KV cache a forward returned: ``output.cache`` from transformers 5.24, where reading
    ``past_key_values`` warns that it is deprecated; ``past_key_values`` before it."""
    cache = getattr(output, "cache", None)
    return output.past_key_values if cache is None else cache

