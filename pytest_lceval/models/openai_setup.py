"""Setting up an OpenAI-compatible backend: the API key, how tokens are counted, the window.

Kept apart from openai_api.py (the requests) because none of it talks to the model: it decides
which tokenizer stands for the served model (a local HF tokenizer counts exactly; tiktoken counts
OpenAI models, plus the chat format's fixed overhead), where the context window comes from, and
what identifies the weights in the fingerprint (the same for every replica listed).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import openai

from .base import Renderer
from .deadline import DeadlineTransport
from .hf_text import HFText, config_window, load_hf_text
from .options import MissingDependencyError
from .serving import ServingOptions, redact_url

T = TypeVar("T")

LOOPBACK_KEY = "EMPTY"
"""Placeholder key for servers that need none (vLLM and others accept any)."""
CHAT_OVERHEAD = 7
"""Tokens the OpenAI chat format adds to one user message and the reply's start (3 per message,
1 for the role, 3 to prime the reply), per OpenAI's counting guide."""
OPENAI_WINDOWS = {"gpt-4.1": 1_047_576, "gpt-4o": 128_000, "gpt-4-turbo": 128_000,
                  "gpt-3.5-turbo": 16_385, "o1": 200_000, "o3": 200_000, "o4": 200_000}
"""Context windows of OpenAI model families (name prefixes), for names the server cannot tell."""
DEFAULT_WINDOW = 8192
"""Assumed, with a warning, when nothing tells the window."""
HEALTH_TIMEOUT = 5.0
"""Seconds the start-up check waits for the server's model list."""
SERVED_FIELDS = ("owned_by", "root", "parent", "max_model_len", "meta")
"""Fields of a /models entry that describe the served weights (see served_identity)."""


class TextSide(Protocol):
    """Tokenizer, renderer and option tokens of the served model (HFText or TiktokenText)."""

    renderer: Renderer

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def identity(self) -> dict[str, Any]: ...

    @property
    def label(self) -> str: ...


class TiktokenText:
    """tiktoken counting for OpenAI models; in chat mode the 'template' is the chat format's
    fixed overhead, which the API adds to whatever user text is sent."""

    def __init__(self, encoding: Any, chat: bool) -> None:
        self.encoding = encoding
        self.chat = chat
        overhead = CHAT_OVERHEAD if chat else 0
        self.renderer = Renderer(_unchanged if chat else None,
                                 lambda text: len(self.encode(text)) + overhead)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.encoding.encode(text, disallowed_special=())
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self.encoding.decode(list(ids))
        return text

    def identity(self) -> dict[str, Any]:
        return {"tiktoken": self.encoding.name, "chat": self.chat}

    @property
    def label(self) -> str:
        return f"tiktoken:{self.encoding.name}"


def _unchanged(user: str) -> str:
    return user


def api_key(base_url: str | None) -> str | None:
    """The key for the client: $OPENAI_API_KEY, or a placeholder for self-hosted servers."""
    own_server = base_url or os.environ.get("OPENAI_BASE_URL")
    return os.environ.get("OPENAI_API_KEY") or (LOOPBACK_KEY if own_server else None)


def make_clients(serving: ServingOptions, timeout: float, retries: int) -> list[openai.OpenAI]:
    """One client per endpoint of --lceval-base-url (the client's default when none is given);
    ValueError when no key is set for a server that needs one."""
    try:
        return [openai.OpenAI(api_key=api_key(serving.base_url), base_url=url, timeout=timeout,
                              max_retries=retries, http_client=_http_client())
                for url in serving.base_urls or (None,)]
    except openai.OpenAIError:
        raise ValueError(f"no API key: set $OPENAI_API_KEY, or point {serving.url_option} at "
                         f"a server that needs none") from None


def _http_client() -> Any:
    """The client's own HTTP client, its requests given a wall-clock deadline (deadline.py):
    ``timeout`` is then the most one request attempt takes, however slowly the server sends."""
    return openai.DefaultHttpxClient(
        transport=DeadlineTransport(limits=openai.DEFAULT_CONNECTION_LIMITS))


def endpoint_of(client: openai.OpenAI) -> str:
    """The client's endpoint as headers, reports and errors show it (no credentials)."""
    return redact_url(str(client.base_url).rstrip("/"))


def health_check(serving: ServingOptions) -> None:
    """One GET /models per endpoint, with a short timeout and no retries, before any cell runs.

    A server that is down would otherwise cost every cell its full retry budget (about 19 s
    with the default 5 retries) before failing; a refused key would fail every cell alike; a
    mistyped replica is better named now than failed over all run. Raises ValueError naming
    --lceval-base-url or $OPENAI_API_KEY and the fix. Any other answer (even an HTTP error:
    some servers have no /models) means the server is there.
    """
    for client in make_clients(serving, HEALTH_TIMEOUT, 0):
        _check_reachable(client, serving.url_option)


def _check_reachable(client: openai.OpenAI, url_option: str) -> None:
    endpoint = endpoint_of(client)
    try:
        models_listing(client, url_option)
    except openai.APIConnectionError as exc:
        if isinstance(exc, openai.APITimeoutError):
            cause = f"no answer in {HEALTH_TIMEOUT:g} s"
        else:
            cause = type(exc.__cause__ or exc.__context__ or exc).__name__
        raise ValueError(f"cannot reach the server at {endpoint} ({cause}): start it, or point "
                         f"{url_option} (or $OPENAI_BASE_URL) at it") from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise ValueError(f"the server at {endpoint} refused the API key (HTTP "
                         f"{exc.status_code}): set $OPENAI_API_KEY to a valid key") from None
    except openai.APIError:
        return


def load_counter(model: str, serving: ServingOptions, chat_template: str) -> HFText | Any:
    """HFText for --lceval-tokenizer (or the model name when it is a local folder), else the
    tiktoken encoding of --lceval-tokenizer tiktoken:NAME or of the OpenAI model's name."""
    choice = serving.tokenizer
    if choice is None and Path(model).is_dir():
        choice = model
    if choice and not choice.startswith("tiktoken:"):
        return load_hf_text(choice, chat_template)
    try:
        import tiktoken
    except ImportError as exc:
        raise MissingDependencyError(
            "counting tokens of OpenAI models needs tiktoken: pip install "
            "'pytest-lceval[openai]', or give --lceval-tokenizer with an HF tokenizer") from exc
    try:
        if choice:
            return tiktoken.get_encoding(choice.removeprefix("tiktoken:"))
        return tiktoken.encoding_for_model(model)
    except KeyError:
        raise ValueError(
            f"cannot count tokens for model {model!r}: tiktoken does not know it. Give "
            f"--lceval-tokenizer with the served model's HF tokenizer (folder or id), or "
            f"tiktoken:o200k_base for an approximate count") from None
    except Exception as exc:  # tiktoken downloads an encoding once, then caches it
        raise ValueError(
            f"tiktoken could not load its encoding for {model!r} ({type(exc).__name__}); it "
            f"downloads it on first use: run once online, or set TIKTOKEN_CACHE_DIR to a folder "
            f"that holds it") from None


def models_listing(client: openai.OpenAI, url_option: str) -> list[dict[str, Any]]:
    """The entries of the server's GET /models, as it sent them. An answer that is not the
    API's JSON (a login portal's HTML page, sent with status 200) is a ValueError naming
    ``url_option``: the client's own parsing fails on it deep inside, with an AttributeError."""
    raw = client.models.with_raw_response.list()
    try:
        body = json.loads(raw.text)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        kind = raw.headers.get("content-type", "no content type").split(";")[0]
        raise ValueError(f"the server at {endpoint_of(client)} answered GET /models with "
                         f"{kind}, not the OpenAI API's JSON (a login page or a proxy?): point "
                         f"{url_option} at the API itself, the URL that ends in /v1")
    data = body.get("data")
    return [entry for entry in data if isinstance(entry, dict)] if isinstance(data, list) else []


def served_entry(client: openai.OpenAI, model: str) -> dict[str, Any]:
    """The server's /models entry for ``model``, every field it sent; {} when it lists none."""
    try:
        listing = models_listing(client.with_options(max_retries=0, timeout=10.0),
                                 "--lceval-base-url")
    except (openai.APIError, ValueError):
        return {}
    return next((entry for entry in listing if entry.get("id") == model), {})


def served_identity(entry: dict[str, Any]) -> dict[str, Any]:
    """What a /models entry says about the weights behind the name, for the fingerprint: the
    owner, vLLM's root (the weights' path or hub id) and max_model_len, llama.cpp's meta
    (parameters, size, vocabulary, trained context), parents. Never ``created``, which vLLM,
    SGLang and llama.cpp set to the time of the request, nor vLLM's ``permission`` (new ids on
    every request): each run, each worker would get a new fingerprint and reuse nothing."""
    return {field: entry[field] for field in SERVED_FIELDS if field in entry}


def agreed(model: str, facts: dict[str, T]) -> T:
    """What every endpoint (by URL) reports about ``model``, when they all report the same.

    Replicas share one fingerprint, so they must serve the same weights: answers of one model
    must never be stored as another's. ValueError naming the URLs otherwise."""
    first = next(iter(facts.values()))
    if any(fact != first for fact in facts.values()):
        said = "; ".join(f"{url}: {fact}" for url, fact in facts.items())
        raise ValueError(f"--lceval-base-url: the endpoints do not serve the same {model!r} "
                         f"(window, weights as their /models entry reports them: {said}); "
                         f"list replicas of one model only")
    return first


def context_window(reported: int | None, model: str, text: TextSide,
                   serving: ServingOptions) -> tuple[int, str]:
    """(window, where it came from): the server's report, the model folder's config, the
    tokenizer's limit, OpenAI's published windows, or an assumed default with a warning."""
    if reported:
        return reported, "server"
    if isinstance(text, HFText):
        window = config_window(model) or config_window(serving.tokenizer or "")
        if window:
            return window, "model config"
        limit = int(getattr(text.hf, "model_max_length", 0) or 0)
        if 0 < limit < 10_000_000:
            return limit, "tokenizer"
    for prefix, window in OPENAI_WINDOWS.items():
        if model.startswith(prefix):
            return window, "OpenAI model table"
    warnings.warn(f"pytest-lceval: context window of {model!r} unknown; assuming "
                  f"{DEFAULT_WINDOW} tokens", stacklevel=2)
    return DEFAULT_WINDOW, "assumed"
