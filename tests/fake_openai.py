"""A scripted OpenAI-compatible server on 127.0.0.1 for the client's fault and protocol tests.

Each request is recorded (path, headers, JSON body). Replies come from ``script`` (a list of
Reply, consumed in order) and then from ``answer``, a function of the request. Every reply may
wait a bounded time first (for timeout and concurrency tests), or trickle out a byte at a time
(for deadline tests). The server runs in a daemon thread and stops when the ``with`` block ends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (at most a few, so every test stays bounded)."""
    drop: bool = False
    """Close the connection instead of answering, as a server killed mid-request does."""
    page: str | None = None
    """An HTML page sent instead of ``body`` (a login portal in front of the server)."""
    trickle: float = 0.0
    """Seconds between bytes: the whole answer, status line and headers included, is sent one
    byte at a time, its JSON padded to TRICKLE_BYTES, until the client hangs up (at most
    TRICKLE_LIMIT seconds): a server that never stops sending, too slowly to time out."""


TRICKLE_BYTES = 4096
TRICKLE_LIMIT = 60.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: dict[str, Any]


def completion(text: str, top: dict[str, float] | None = None, prompt_tokens: int = 3) -> Reply:
    logprobs = {"tokens": [next(iter(top))], "token_logprobs": [max(top.values())],
                "top_logprobs": [top], "text_offset": [0]} if top else None
    return Reply(body={
        "id": "cmpl-1", "object": "text_completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": logprobs}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 2,
                  "total_tokens": prompt_tokens + 2}})


def chat(text: str, top: dict[str, float] | None = None, prompt_tokens: int = 9) -> Reply:
    logprobs = {"content": [{
        "token": next(iter(top)), "logprob": max(top.values()), "bytes": None,
        "top_logprobs": [{"token": t, "logprob": v, "bytes": None} for t, v in top.items()]}]} \
        if top else None
    return Reply(body={
        "id": "chat-1", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": logprobs,
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 2,
                  "total_tokens": prompt_tokens + 2}})


def filtered() -> Reply:
    """A completion the server's content filter stopped, as Azure OpenAI refuses: no text,
    ``finish_reason`` "content_filter"."""
    reply = completion("")
    reply.body["choices"][0]["finish_reason"] = "content_filter"
    return reply


def models(*entries: dict[str, Any]) -> Reply:
    """A /v1/models listing of ``entries`` as servers send them: vLLM adds ``root`` and
    ``max_model_len``, llama.cpp a ``meta`` object describing its GGUF."""
    return Reply(body={"object": "list", "data": [{"object": "model", **entry}
                                                  for entry in entries]})


def llama_meta(**changes: Any) -> dict[str, Any]:
    """The ``meta`` of a llama-server /v1/models entry (a 0.5B GGUF), with ``changes``."""
    return {"vocab_type": 2, "n_vocab": 151936, "n_ctx_train": 32768, "n_embd": 896,
            "n_params": 494032768, "size": 531068928, **changes}


def byte_encoding() -> Any:
    """A tiktoken encoding of single bytes, built here: tiktoken's named encodings download
    their ranks on first use, which tests cannot."""
    import tiktoken

    return tiktoken.Encoding(name="bytes_test", pat_str=r"\s?\S+|\s+",
                             mergeable_ranks={bytes([i]): i for i in range(256)},
                             special_tokens={})


def default_answer(request: Seen) -> Reply:
    if request.path.endswith("/chat/completions"):
        return chat("42")
    if request.path.endswith("/models"):
        return Reply(body={"object": "list", "data": []})
    return completion("42")


class FakeServer:
    def __init__(self, answer: Callable[[Seen], Reply] = default_answer) -> None:
        self.answer = answer
        self.script: list[Reply] = []
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def requests(self, suffix: str) -> list[Seen]:
        """The recorded requests whose path ends with ``suffix`` (e.g. '/completions')."""
        return [seen for seen in self.seen if seen.path.endswith(suffix)]

    def _reply(self, request: Seen) -> Reply:
        with self._lock:
            self.seen.append(request)
            scripted = self.script.pop(0) if self.script and request.path != "/v1/models" \
                else None
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            reply = scripted or self.answer(request)
            time.sleep(min(reply.delay, 5.0))
            return reply
        finally:
            with self._lock:
                self.in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._respond({})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self._respond(json.loads(self.rfile.read(length) or b"{}"))

            def _respond(self, body: dict[str, Any]) -> None:
                headers = {name.lower(): value for name, value in self.headers.items()}
                reply = server._reply(Seen(self.path, headers, body))
                if reply.drop:
                    self.close_connection = True
                    return
                payload = json.dumps(reply.body).encode() if reply.page is None \
                    else reply.page.encode()
                if reply.trickle:
                    self._trickle(reply, payload.ljust(TRICKLE_BYTES))
                    return
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json" if reply.page is None
                                     else "text/html; charset=utf-8")
                    self.send_header("content-length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _trickle(self, reply: Reply, payload: bytes) -> None:
                head = (f"HTTP/1.1 {reply.status} OK\r\ncontent-type: application/json\r\n"
                        f"content-length: {len(payload)}\r\n\r\n").encode()
                self.close_connection = True
                started = time.monotonic()
                for index in range(len(head + payload)):
                    if time.monotonic() - started > TRICKLE_LIMIT:
                        return
                    try:
                        self.wfile.write((head + payload)[index:index + 1])
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        return  # the client hung up: what a deadline does
                    time.sleep(reply.trickle)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def stop(self) -> None:
        """Refuse every connection from now on (a server that went away); the ``with`` block
        of ``running`` may still end as usual."""
        self._http.shutdown()
        self._http.server_close()

    @contextmanager
    def running(self) -> Iterator[FakeServer]:
        thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()
            thread.join(timeout=10)
