"""A wall-clock deadline on every HTTP request of the OpenAI client.

The client's timeout bounds each network operation (a connect, one read, one write), not a
request: a server that sends one byte a second never lets a 5 s read time out, and held a request
for 216 s under ``--lceval-timeout 5``. Here every connect, read and write of a request may take
at most the time left until the request's deadline, its own timeout after it was sent; past it,
the operation fails as the client's read timeout does, so the client retries it as a timeout
(``--lceval-retries``) and the backend reports "the request timed out". Each retry gets a new
deadline.

The transport is the client's own (``openai.DefaultHttpxClient`` with httpx2's transport): only
its network backend is wrapped, so connection pooling, TLS and the client's error handling stay
as they are. The deadline is per thread: the client's synchronous calls read and write on the
calling thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2

_current = threading.local()
"""``deadline``: the time.monotonic() by which this thread's request must be done."""


def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    """The operation's timeout cut to the time left before the request's deadline."""
    deadline: float | None = getattr(_current, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the request ran past its deadline")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    def __init__(self, stream: httpcore2.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(
            ssl_context, server_hostname, _left(timeout, httpcore2.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore2.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._backend.connect_tcp(
            host, port, _left(timeout, httpcore2.ConnectTimeout), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(
            path, _left(timeout, httpcore2.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class DeadlineTransport(httpx2.HTTPTransport):
    """httpx2's transport whose requests each end by their deadline (see the module)."""

    def __init__(self, limits: httpx2.Limits) -> None:
        super().__init__(limits=limits)
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(), max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry, network_backend=_DeadlineBackend())

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Starts the request's clock. The deadline stays set after the headers arrive: the
        client reads the body on this thread next, and the next request sets a new one."""
        timeouts = request.extensions.get("timeout") or {}
        seconds = [value for value in timeouts.values() if value is not None]
        _current.deadline = time.monotonic() + max(seconds) if seconds else None
        return super().handle_request(request)
