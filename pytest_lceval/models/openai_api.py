"""Any OpenAI-compatible server (OpenAI, vLLM, SGLang, TGI, ``transformers serve``) as a backend.

Spec: ``openai:MODEL`` with ``--lceval-base-url`` (or $OPENAI_BASE_URL), one endpoint or several
replicas of the model, comma-separated; the key comes from
$OPENAI_API_KEY only, straight into the client, so it never sits in settings, reports, store
keys or this module's locals (loopback servers get a placeholder when none is set).

Modes. *completions* sends the rendered prompt: the server reads exactly the text whose tokens
we counted (the default when a local tokenizer is known). *chat* sends the untemplated prompt as
messages and the server applies its own template; the answer prefix goes as an assistant turn to
be continued (``continue_final_message``) where the server accepts that, and otherwise at the end
of the user message, with a warning, as OpenAI's own API does not continue assistant turns.
HELMET's answer prefix (``Prompt.cue``) is never sent: its API models get the user message alone.

Counting. A local model's HF tokenizer (``--lceval-tokenizer``, or the model name when it is a
local folder) counts exactly; OpenAI models are counted with tiktoken, plus the few tokens the
chat format adds. ``describe()`` says which.

Failures. The official client retries 408/409/429/5xx, timeouts and refused connections with
exponential backoff (0.5 s doubling to 8 s, minus up to 25 % jitter), or waits the Retry-After
the server sends (up to 2 min); ``--lceval-retries`` sets how often. When retries run out the
request raises ServerError, which fails the cell with the reason; answers stored before are kept.

Replicas. Each endpoint has its own client and ``--lceval-concurrency`` threads; a batch's
requests are taken one at a time by whichever thread is free, so a faster server answers more.
When an endpoint fails (cannot connect, times out, or 408/409/429/5xx once the client's retries
are spent), its in-flight and untaken requests go to the others, and it rests ENDPOINT_REST
seconds before it is given work again (sooner when every endpoint rests); each request is
answered once. Only when every endpoint failed does ServerError name them all. Other errors
(a 400, a refused key) would fail anywhere, and fail the cell at once.

Fingerprint. Beyond the name, mode, tokenizer and decoding settings: the files of a model
folder the name points to, and what the server's /models entry reports about the weights
(openai_setup.served_identity), so other weights served under the same name get new answers.
Never the endpoints: replicas must report the same (checked at load), and share the answers.

Rank. Top-k log-probabilities where the server returns them (topk_rank explains the bound for
options outside the top k); otherwise generate-match, recorded in Ranking.method and warned
about once. Rank requests go to the completions endpoint when the prompt was rendered with a
local tokenizer, so that the server reads exactly the prompt.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any, Generic, TypeVar

import openai

from ..results.records import GenerateRequest, Generation, Prompt, Ranking, RankRequest
from . import topk_rank
from .backend import BaseBackend, Stopwatch
from .base import cut_at_stop
from .hf_text import HFText
from .model_args import chosen_window
from .openai_setup import (
    TextSide,
    TiktokenText,
    agreed,
    context_window,
    endpoint_of,
    load_counter,
    make_clients,
    served_entry,
    served_identity,
)
from .options import LoadOptions, RequestFailed
from .serving import ServingOptions
from .weights import weights_of

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B", bound="OpenAIBackend")

TOP_K = 20
"""Log-probabilities asked per position (vLLM's and OpenAI chat's maximum)."""
TOP_K_OPENAI_COMPLETIONS = 5
"""OpenAI's legacy completions endpoint allows at most 5."""
MATCH_TOKENS = 8
"""Tokens generated to match options when the server gives no log-probabilities."""
PREFILL_FIELDS = {"continue_final_message": True, "add_generation_prompt": False}
"""vLLM's fields for continuing the last (assistant) message instead of starting a new turn."""
ENDPOINT_REST = 30.0
"""Seconds a failed endpoint gets no new work while another endpoint answers."""


class ServerError(RequestFailed):
    """The server did not answer (after every retry); the message says why and what to do."""


class RankFallbackWarning(UserWarning):
    """Rank requests are answered by generate-match, not log-probabilities."""


class PrefillWarning(UserWarning):
    """The server cannot continue an assistant turn; the answer prefix ends the user message."""


class OpenAIBackend(BaseBackend):
    """The Backend protocol over an OpenAI-compatible endpoint; see the module docstring.

    A server with more to say about itself is a subclass (llamacpp.py): ``kind`` names it in
    specs and reports, ``inspect_server`` reads its window and weights from what it serves.
    ``client`` is one client, or one per replica; ``endpoint`` names them in describe()."""

    kind = "openai"

    def __init__(self, spec: str, model: str, client: openai.OpenAI | Sequence[openai.OpenAI],
                 text: TextSide, mode: str, serving: ServingOptions, window: tuple[int, str],
                 endpoint: str, weights: dict[str, Any] | None = None,
                 served: dict[str, Any] | None = None) -> None:
        super().__init__(spec, text,
                         replace(text.renderer, fixed=True) if mode == "chat" else text.renderer,
                         window[0])
        self.model = model
        clients = [client] if isinstance(client, openai.OpenAI) else list(client)
        self.text = text
        self.mode = mode
        self.serving = serving
        self._window_source = window[1]
        self.endpoint = endpoint
        self.weights = weights
        self.served = served or {}
        """What the server reports about the weights behind the name (served_identity)."""
        self.official = serving.base_url is None and "api.openai.com" in str(clients[0].base_url)
        self._prefill: bool | None = False if self.official else None
        self._logprobs: bool | None = None
        self._lock = threading.Lock()
        self._thread = threading.local()
        """``endpoint``: the _Endpoint whose threads this thread is one of."""
        self._endpoints = [_Endpoint(each, serving.concurrency, self._bind) for each in clients]

    def identity(self) -> dict[str, Any]:
        """The served facts join only when the server reports some, so that the fingerprint of
        a server that reports nothing stays what it was before they were read."""
        return {
            "backend": "openai", "model": self.model, "weights": self.weights, "mode": self.mode,
            "text": self.text.identity(), "decoding": {"temperature": 0, "top_p": 1},
            "prefill": "continue_final_message-or-append", "rank": [TOP_K, MATCH_TOKENS],
            **({"served": self.served} if self.served else {}),
        }

    @classmethod
    def inspect_server(cls, client: openai.OpenAI,
                       entry: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
        """(the window the server reports, what it reports about the weights), read from the
        served model's /models entry (vLLM's and SGLang's max_model_len)."""
        window = entry.get("max_model_len")
        return (int(window) if window else None), served_identity(entry)

    @classmethod
    def load(cls: type[B], model: str, options: LoadOptions) -> B:
        """The backend for ``KIND:MODEL``; contacts the server only to read what it serves."""
        serving = options.serving
        if not model:
            raise ValueError(f"give the served model's name: --model={cls.kind}:NAME")
        clients = make_clients(serving, serving.timeout, serving.retries)
        counter = load_counter(model, serving, options.chat_template)
        is_hf = isinstance(counter, HFText)
        mode = serving.api_mode or ("completions" if is_hf else "chat")
        if mode == "chat" and options.chat_template == "off":
            raise ValueError("--lceval-api-mode chat makes the server apply its chat template; "
                             "with --chat-template off use --lceval-api-mode completions")
        if mode == "completions" and not is_hf and options.chat_template == "on":
            raise ValueError("--chat-template on with tiktoken counting needs "
                             "--lceval-api-mode chat")
        text: TextSide = counter if is_hf else TiktokenText(counter, chat=mode == "chat")
        reported, served = agreed(model, {
            endpoint_of(client): cls.inspect_server(client, served_entry(client, model))
            for client in clients})
        window = chosen_window(options.window, {},
                               lambda: context_window(reported, model, text, serving))
        endpoint = ",".join(endpoint_of(client) for client in clients)
        return cls(f"{cls.kind}:{model}", model, clients, text, mode, serving, window, endpoint,
                   weights_of(model), served)

    def describe(self) -> dict[str, str]:
        prefill = {None: "untested", True: "continue_final_message",
                   False: "appended to the user message"}[self._prefill]
        rank = {None: "untested", True: f"top-{self._top_k()} logprobs",
                False: f"{topk_rank.GENERATE_MATCH} (server gives no logprobs)"}[self._logprobs]
        return {
            "backend": self.kind, "model": self.model, "endpoint": self.endpoint,
            "mode": self.mode, "tokenizer": self.text.label,
            "window": f"{self.context_window} ({self._window_source})",
            "answer_prefix": prefill if self.mode == "chat" else "in the prompt", "rank": rank,
            "concurrency": str(self.serving.concurrency) if len(self._endpoints) == 1
            else f"{self.serving.concurrency} per endpoint, {len(self._endpoints)} endpoints",
            "engine": f"openai-python {openai.__version__}",
        }

    def answered_by(self) -> dict[str, int]:
        if len(self._endpoints) == 1:
            return {}
        return {endpoint.url: endpoint.answered for endpoint in self._endpoints}

    # -- generate ------------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        return self._map(self._generate_one, requests)

    def _generate_one(self, request: GenerateRequest) -> Generation:
        clock = Stopwatch()
        if self.mode == "completions":
            reply = self._call("generate", lambda: self._complete(
                prompt=request.prompt, max_tokens=request.max_new_tokens, **_stop(request.stop)))
            text = self._choice(reply, "generate").text or ""
        else:
            text, reply = self._chat(request.chat or Prompt(request.prompt),
                                     request.max_new_tokens, request.stop)
        usage = reply.usage
        text = cut_at_stop(text, request.stop)
        return Generation(
            text,
            usage.prompt_tokens if usage else self.renderer.count(request.prompt),
            usage.completion_tokens if usage else len(self.text.encode(text)),
            clock.per(1))

    def _chat(self, prompt: Prompt, budget: int, stop: Sequence[str], refusable: bool = False,
              **extra: Any) -> tuple[str, Any]:
        """One chat call; tries an assistant prefill once and falls back if it is refused.
        ``refusable``: raise _Refused when the server rejects the ``extra`` fields."""
        prefill = bool(prompt.answer_prefix) and self._prefill is not False
        probing = prefill and self._prefill is None
        messages: list[dict[str, str]] = [{"role": "user", "content": prompt.user}]
        if prefill:
            messages.append({"role": "assistant", "content": prompt.answer_prefix})
        else:
            messages[0]["content"] += prompt.answer_prefix
        try:
            reply = self._call("generate", lambda: self._converse(
                messages=messages, max_completion_tokens=budget, **_stop(stop), **extra,
                **({"extra_body": PREFILL_FIELDS} if prefill else {})),
                refused=probing or refusable)
        except _Refused:
            if not probing:
                raise
            self._set_prefill(False)
            return self._chat(prompt, budget, stop, refusable, **extra)
        if prefill:
            self._set_prefill(True)
        return self._choice(reply, "generate", chat=True).message.content or "", reply

    def _set_prefill(self, supported: bool) -> None:
        with self._lock:
            changed, self._prefill = self._prefill is None, supported
        if changed and not supported:
            warnings.warn(PrefillWarning(
                f"pytest-lceval: {self.endpoint} refuses continue_final_message, so the answer "
                f"prefix is appended to the user message in chat mode; use "
                f"--lceval-api-mode completions with the model's tokenizer for exact prompts"),
                stacklevel=2)

    # -- rank ----------------------------------------------------------------------------------

    def rank(self, requests: Sequence[RankRequest]) -> list[Ranking]:
        return self._map(self._rank_one, requests)

    def _rank_one(self, request: RankRequest) -> Ranking:
        clock = Stopwatch()
        prompt = request.prefix + request.suffix
        want_logprobs = self._logprobs is not False
        budget = 1 if self._logprobs else MATCH_TOKENS
        try:
            text, top, tokens = self._rank_call(prompt, budget, want_logprobs)
        except _Refused:
            self._set_logprobs(False)
            text, top, tokens = self._rank_call(prompt, MATCH_TOKENS, False)
        tokens = tokens or self.renderer.count(prompt)
        seconds = clock.per(1)
        if top:
            self._set_logprobs(True)
            return topk_rank.rank_from_top(top, topk_rank.spellings(self.text, request.options),
                                           tokens, seconds)
        if want_logprobs:
            self._set_logprobs(False)
        if budget == 1:  # logprobs were offered before but not this time: ask for text
            text, _, _ = self._rank_call(prompt, MATCH_TOKENS, False)
        return topk_rank.rank_by_match(text, request.options, tokens, seconds)

    def _rank_call(self, prompt: str, budget: int,
                   logprobs: bool) -> tuple[str, dict[str, float], int | None]:
        """(generated text, top log-probabilities of the first token, prompt tokens)."""
        refusable = logprobs and self._logprobs is None
        if self.mode == "completions" or isinstance(self.text, HFText):
            reply = self._call("rank", lambda: self._complete(
                prompt=prompt, max_tokens=budget,
                **({"logprobs": self._top_k()} if logprobs else {})), refused=refusable)
            choice = self._choice(reply, "rank")
            rows = choice.logprobs.top_logprobs if choice.logprobs else None
            top = dict(rows[0]) if rows else {}
            text = choice.text or ""
        else:
            extra = {"logprobs": True, "top_logprobs": TOP_K} if logprobs else {}
            text, reply = self._chat(Prompt(prompt), budget, (), refusable, **extra)
            offered = self._choice(reply, "rank", chat=True).logprobs
            content = offered.content if offered else None
            top = {item.token: item.logprob for item in content[0].top_logprobs} \
                if content else {}
        return text, top, reply.usage.prompt_tokens if reply.usage else None

    def _set_logprobs(self, offered: bool) -> None:
        with self._lock:
            changed, self._logprobs = self._logprobs is None, offered
        if changed and not offered:
            warnings.warn(RankFallbackWarning(
                f"pytest-lceval: {self.endpoint} returns no log-probabilities, so rank requests "
                f"generate {MATCH_TOKENS} tokens and match the options "
                f"(Ranking.method='{topk_rank.GENERATE_MATCH}'): the matched option scores 0, "
                f"not a probability, and an answer that starts with no option is no "
                f"prediction (scored wrong)"),
                stacklevel=2)

    def _top_k(self) -> int:
        return TOP_K_OPENAI_COMPLETIONS if self.official and self.mode == "completions" \
            else TOP_K

    # -- plumbing ------------------------------------------------------------------------------

    def _complete(self, **params: Any) -> Any:
        """A greedy completions call (the only decoding settings this backend sends)."""
        return self._client().completions.create(model=self.model, temperature=0, top_p=1,
                                                 **params)

    def _converse(self, **params: Any) -> Any:
        """A greedy chat call."""
        return self._client().chat.completions.create(model=self.model, temperature=0, top_p=1,
                                                      **params)

    def _bind(self, endpoint: _Endpoint) -> None:
        """Start of each of ``endpoint``'s threads: its calls go to that endpoint for good."""
        self._thread.endpoint = endpoint

    def _client(self) -> openai.OpenAI:
        """The client of the endpoint this thread works for (calls run on those threads only)."""
        client: openai.OpenAI = self._thread.endpoint.client
        return client

    def _map(self, function: Callable[[T], A], items: Sequence[T]) -> list[A]:
        """``function`` over ``items``, results in order, spread over the endpoints with at most
        ``concurrency`` in flight on each (see the module docstring on replicas).

        Works in rounds: the endpoints that have not failed in this batch (those not resting,
        else all of them) drain one shared queue; the requests of an endpoint that fails go back
        into it for the next round. On any other failure no new request starts and it is
        raised."""
        batch: _Batch[T, A] = _Batch(items)
        while batch.pending and batch.error is None:
            untried = [each for each in self._endpoints if each.url not in batch.failed]
            if not untried:
                raise self._everywhere_failed(batch.failed)
            now = time.monotonic()
            ready = [each for each in untried if each.rests_until <= now] or untried
            drains = [endpoint.pool.submit(self._drain, endpoint, function, batch)
                      for endpoint in ready for _ in range(self.serving.concurrency)]
            try:
                wait(drains)
            except BaseException as exc:  # interrupted while waiting: start nothing more
                batch.stop(exc)
                raise
        if batch.error is not None:
            raise batch.error
        return [batch.results[index] for index in range(len(items))]

    def _drain(self, endpoint: _Endpoint, function: Callable[[T], A], batch: _Batch[T, A]) -> None:
        """Answer requests of ``batch`` on this (``endpoint``'s) thread until none is left or
        the endpoint fails, which gives its request back and rests the endpoint."""
        while (index := batch.take(endpoint.url)) is not None:
            try:
                batch.results[index] = function(batch.items[index])
                endpoint.count_answer()
            except _EndpointDown as down:
                endpoint.rests_until = time.monotonic() + ENDPOINT_REST
                batch.give_back(index, endpoint.url, down)
            except BaseException as exc:
                batch.stop(exc)

    def _everywhere_failed(self, failed: dict[str, _EndpointDown]) -> ServerError:
        """One endpoint: its failure as it always read; several: each one's, as listed."""
        if len(failed) == 1:
            ((url, down),) = failed.items()
            return self._failure(f"{down.what} to {url}", down.reason)
        first = failed[self._endpoints[0].url]
        said = "; ".join(f"{each.url}: {failed[each.url].reason}" for each in self._endpoints)
        return self._failure(f"{first.what} on every endpoint", said)

    def _call(self, what: str, request: Callable[[], T], refused: bool = False) -> T:
        """Run one client call; turn client errors into one clear ServerError (no key, no
        traceback into the client, whose frames hold the request headers), or _EndpointDown
        when the server rather than the request failed, so that another endpoint answers."""
        try:
            return request()
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            if refused:
                raise _Refused from None
            error: openai.APIError = exc
        except openai.APIError as exc:
            error = exc
        reason = _describe_error(error, self.serving)
        if _server_failed(error):
            raise _EndpointDown(f"{what} request", reason) from None
        raise self._failure(f"{what} request to {self._thread.endpoint.url}", reason) from None

    def _choice(self, reply: Any, what: str, chat: bool = False) -> Any:
        """The reply's first choice (with its message, in chat mode). A reply that has none
        (HTTP 200 with ``choices: []``, no choices at all, a body that is no object) fails the
        request with what the server sent."""
        choices = getattr(reply, "choices", None)
        if choices and (not chat or getattr(choices[0], "message", None) is not None):
            return choices[0]
        missing = "a choice without a message" if choices else "no choices"
        raise self._failure(f"{what} request to {self._thread.endpoint.url}",
                            f"the server answered with {missing}: it sent {_sent(reply)}")

    def _failure(self, what: str, reason: str) -> ServerError:
        servers = "the server answers" if len(self._endpoints) == 1 else "the servers answer"
        return ServerError(f"openai backend: {what} (model {self.model}) failed: {reason}. "
                           f"Answers stored before this are kept: rerun once {servers}.")


class _Refused(Exception):
    """The server rejected an optional field (prefill, logprobs): retry without it."""


class _EndpointDown(Exception):
    """The server failed, not the request (_server_failed): another endpoint may answer it."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(reason)
        self.what = what
        self.reason = reason


class _Endpoint:
    """One server: its client, its ``threads`` (each bound to it by ``bind``), the time
    before which it gets no new work because it failed, and how many requests it answered."""

    def __init__(self, client: openai.OpenAI, threads: int,
                 bind: Callable[[_Endpoint], None]) -> None:
        self.client = client
        self.url = endpoint_of(client)
        self.rests_until = 0.0
        self.answered = 0
        self._lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lceval-openai",
                                       initializer=bind, initargs=(self,))

    def count_answer(self) -> None:
        with self._lock:  # the endpoint's threads answer at once
            self.answered += 1


class _Batch(Generic[T, A]):
    """The requests of one generate or rank call, shared by the endpoints' threads: each takes
    the next request not yet answered; one whose endpoint failed is given back, first in line.
    A request is in the queue, on one thread, or answered: never two of these at once."""

    def __init__(self, items: Sequence[T]) -> None:
        self.items = items
        self.results: dict[int, A] = {}
        self.pending = deque(range(len(items)))
        self.failed: dict[str, _EndpointDown] = {}
        """Endpoints (by URL) that failed in this batch, and how: they take no more of it."""
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def take(self, url: str) -> int | None:
        """The next request for endpoint ``url``; None when there is none for it."""
        with self._lock:
            if self.error is not None or url in self.failed or not self.pending:
                return None
            return self.pending.popleft()

    def give_back(self, index: int, url: str, down: _EndpointDown) -> None:
        with self._lock:
            self.pending.appendleft(index)
            self.failed.setdefault(url, down)

    def stop(self, error: BaseException) -> None:
        """No request starts after this; the first error is the one raised."""
        with self._lock:
            self.error = self.error or error


def _stop(stop: Sequence[str]) -> dict[str, list[str]]:
    """At most 4 stop strings (the API's limit); the rest are cut client-side anyway."""
    kept = [marker for marker in stop if marker][:4]
    return {"stop": kept} if kept else {}


def _server_failed(exc: openai.APIError) -> bool:
    """The errors the client retries: the server was unreachable, slow, busy or broken, so
    another server may answer the same request."""
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else 0
    return isinstance(exc, openai.APIConnectionError) or status in (408, 409, 429) or status >= 500


def _describe_error(exc: openai.APIError, serving: ServingOptions) -> str:
    """Why a call failed, in a line, saying whether the client retried; never the key."""
    if isinstance(exc, openai.APITimeoutError):
        text = (f"the request timed out: no whole answer within --lceval-timeout "
                f"{serving.timeout:g} s (raise it for a slow server)")
    elif isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        text = f"cannot connect ({type(cause).__name__ if cause else 'connection error'})"
    elif isinstance(exc, openai.APIStatusError):
        text = f"HTTP {exc.status_code}: {str(exc.message)[:300]}"
    else:
        text = str(exc)[:300]
    if _server_failed(exc):
        text = f"{text} (after {serving.retries} retries)"
    return _redact(text)


def _sent(reply: Any) -> str:
    """What a server sent, as JSON, cut to a line."""
    text = reply.to_json(indent=None) if hasattr(reply, "to_json") else \
        json.dumps(reply, default=str)
    return _redact(text if len(text) <= 300 else text[:300] + "...")


def _redact(text: str) -> str:
    """``text`` with $OPENAI_API_KEY masked, should a server echo it in an error."""
    if os.environ.get("OPENAI_API_KEY"):
        return text.replace(os.environ["OPENAI_API_KEY"], "***")
    return text


def load_openai(rest: str, options: LoadOptions) -> OpenAIBackend:
    """Build the backend for ``openai:MODEL``."""
    return OpenAIBackend.load(rest, options)
