"""A real OpenAI-compatible server for the tests and benches that need one: `transformers serve`
on 127.0.0.1 serving a model folder offline, restartable and killable, with its access log
counting the generation requests it answered; and what the served tests share."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_lceval.store.database import Store

START_SECONDS = 300
ANSWERED = re.compile(r'"POST /v1/(chat/)?completions HTTP/1.1" 200')


class Served:
    """One `transformers serve` process on a fixed loopback port; restartable, log-watched."""

    def __init__(self, model: Path, folder: Path, options: tuple[str, ...] = ()) -> None:
        """``options`` go to `transformers serve` (e.g. --continuous-batching)."""
        pytest.importorskip("fastapi", reason="transformers serve needs fastapi and uvicorn")
        pytest.importorskip("uvicorn", reason="transformers serve needs fastapi and uvicorn")
        self.model = model
        self.options = options
        self.folder = folder
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / "serve-0.log"

    def start(self) -> None:
        self.log = self.folder / f"serve-{len(list(self.folder.glob('serve-*.log')))}.log"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HUB_CACHE": str(self.folder / "hub"),
               "OMP_WAIT_POLICY": "PASSIVE"}  # idle threads sleep: 10x faster on a busy CPU
        (self.folder / "hub").mkdir(exist_ok=True)
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "transformers.cli.transformers", "serve", str(self.model),
                 "--host", "127.0.0.1", "--port", str(self.port), "--device", "cpu",
                 "--log-level", "info", *self.options], stdout=out,
                stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + START_SECONDS
        while not self._healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"transformers serve did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.5)

    def _healthy(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as connection:
                connection.sendall(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                return b" 200 " in connection.recv(64)
        except OSError:
            return False

    def answered(self) -> int:
        """Generation requests this server process has answered (from its access log)."""
        return len(ANSWERED.findall(self.log.read_text(errors="replace")))

    def kill_when(self, ready: Callable[[], bool], seconds: float = 300) -> threading.Thread:
        """Kill -9 the server once ``ready()`` holds (watched in the background)."""
        def watch() -> None:
            deadline = time.monotonic() + seconds
            while not ready() and time.monotonic() < deadline:
                time.sleep(0.02)
            self.kill()

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        return thread

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)



def stored_answers(path: Path) -> int:
    if not path.exists():
        return 0
    store = Store(path)
    try:
        return store.count_answers()
    finally:
        store.close()


