"""A loopback server that stands in for the Hugging Face hub (through ``HF_ENDPOINT``) and for a
mirror of plain URLs (``--lceval-fetch-mirror``), for the fetch tests: nothing leaves the machine.

It answers what ``hf_hub_download`` asks (huggingface_hub 2.x, plain HTTP, no Xet):

- ``HEAD /datasets/<repo>/resolve/<revision>/<file>``: 200 with ``X-Repo-Commit`` (the commit,
  40 hex digits, required), ``ETag`` (the file's SHA-256, as the hub gives large files) and
  ``Content-Length`` (the size the client then insists on); 404 for a file it does not have;
- ``GET`` of the same path: the bytes, honouring ``Range: bytes=N-`` with a 206;

and serves ``/mirror/<host>/<path>`` the same way for plain files. It logs every request
(method, path, Range) so tests can tell what was downloaded, and can send a file slowly (to be
killed mid-way), advertise a size it does not send, or serve other bytes than announced.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Served:
    body: bytes
    advertised: int | None = None
    """The size HEAD announces (default: the body's)."""
    slow: float = 0.0
    """Seconds to wait after each 1 kB sent."""
    etag: str | None = None
    """The ETag announced (default: the body's SHA-256)."""


@dataclass
class FakeHub:
    files: dict[str, Served] = field(default_factory=dict)
    """By request path: '/datasets/a/b/resolve/main/f' or '/mirror/host/path'."""
    log: list[tuple[str, str, str]] = field(default_factory=list)
    url: str = ""

    def hub_file(self, repo: str, filename: str, served: Served) -> None:
        self.files[f"/datasets/{repo}/resolve/main/{filename}"] = served

    def plain_file(self, url: str, served: Served) -> None:
        self.files["/mirror/" + url.split("://", 1)[1]] = served

    @property
    def mirror(self) -> str:
        return self.url + "/mirror"

    def gets(self, suffix: str) -> list[str]:
        """The Range header of every GET of a path ending in ``suffix`` ('' for none)."""
        return [ranged for method, path, ranged in self.log
                if method == "GET" and path.endswith(suffix)]


def _handler(hub: FakeHub) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _answer(self, head: bool) -> None:
            ranged = self.headers.get("Range", "")
            hub.log.append(("HEAD" if head else "GET", self.path, ranged))
            served = hub.files.get(self.path)
            if served is None:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body, start = served.body, 0
            if ranged.startswith("bytes=") and not head:
                start = int(ranged.removeprefix("bytes=").split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{served.etag or hashlib.sha256(body).hexdigest()}"')
            self.send_header("Accept-Ranges", "bytes")
            size = served.advertised if head and served.advertised is not None else len(body)
            self.send_header("Content-Length", str(size - start))
            self.end_headers()
            if head:
                return
            for at in range(start, len(body), 1024):
                self.wfile.write(body[at:at + 1024])
                if served.slow:
                    self.wfile.flush()
                    time.sleep(served.slow)

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(head=True)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(head=False)

    return Handler


@contextmanager
def serving(hub: FakeHub) -> Iterator[FakeHub]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    hub.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield hub
    finally:
        httpd.shutdown()
        httpd.server_close()
