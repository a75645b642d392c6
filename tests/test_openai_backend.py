"""The OpenAI-compatible backend against a real server: `transformers serve` on 127.0.0.1,
serving the cached SmolLM2 folder offline.

- Recall cases answered through the server equal the in-process HF backend's answers, in
  completions mode (the server reads our rendered prompt) and in chat mode (the server applies
  the same template).
- The server killed mid-cell fails that cell with a clear message; after a restart the rerun
  completes and only the answers that were not stored reach the server.

Every server is started by a test and killed at its end; all waits are bounded.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_lceval.data import DataSource
from pytest_lceval.grid import Cell
from pytest_lceval.models.registry import LoadOptions, load_backend
from pytest_lceval.models.serving import ServingOptions
from pytest_lceval.records import GenerateRequest, Prompt
from pytest_lceval.store import Store
from pytest_lceval.tasks.base import BuildContext, get_task

pytest.importorskip("fastapi", reason="transformers serve needs fastapi and uvicorn")
pytest.importorskip("uvicorn", reason="transformers serve needs fastapi and uvicorn")
pytestmark = pytest.mark.real_model

START_SECONDS = 300
ANSWERED = re.compile(r'"POST /v1/(chat/)?completions HTTP/1.1" 200')


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from pytest_lceval.models.presets import preset_directory

    return preset_directory("smollm2")


class Served:
    """One `transformers serve` process on a fixed loopback port; restartable, log-watched."""

    def __init__(self, model: Path, folder: Path) -> None:
        self.model = model
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
                 "--log-level", "info"], stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True)
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


@pytest.fixture
def served(smollm2: Path, tmp_path: Path) -> Iterator[Served]:
    server = Served(smollm2, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def recall_requests(backend: object, samples: int = 2) -> list[GenerateRequest]:
    task = get_task("niah_single_1")
    cell = Cell("recall", "niah_single_1", 384, 50.0, samples)
    context = BuildContext(backend.tokenizer, backend.renderer, DataSource(None), 42)  # type: ignore[attr-defined]
    return [case.request() for case in task.build(cell, context)]


def test_answers_match_the_in_process_hf_backend(served: Served, smollm2: Path) -> None:
    local = load_backend("smollm2", LoadOptions())
    remote = load_backend(f"openai:{smollm2}", LoadOptions(serving=ServingOptions(
        base_url=served.url, retries=1)))
    assert remote.describe()["mode"] == "completions"
    assert remote.describe()["tokenizer"] == f"hf:{smollm2}"
    requests = recall_requests(local)
    assert recall_requests(remote) == requests  # same tokenizer, template, counts: same cases
    expected = local.generate(requests)
    answers = remote.generate(requests)
    assert [a.text for a in answers] == [e.text for e in expected]
    assert [a.prompt_tokens for a in answers] == [e.prompt_tokens for e in expected]

    chatting = load_backend(f"openai:{smollm2}", LoadOptions(serving=ServingOptions(
        base_url=served.url, api_mode="chat", retries=1)))
    questions = [Prompt("What is 2 plus 3? Answer with the number only.")]
    chat_requests = [GenerateRequest(local.renderer.render(q), 8, (), q) for q in questions]
    chat_answers = chatting.generate(chat_requests)
    assert [a.text for a in chat_answers] == [e.text for e in local.generate(chat_requests)]
    assert [a.prompt_tokens for a in chat_answers] == \
        [chatting.renderer.count(r.prompt) for r in chat_requests]


def stored_answers(path: Path) -> int:
    if not path.exists():
        return 0
    store = Store(path)
    try:
        return store.count_answers()
    finally:
        store.close()


RECALL_SUITE = """
import pytest

pytestmark = pytest.mark.lceval(suite="recall")


def test_recall(lc_cell, lc_eval):
    lc_eval.check(lc_eval.run(lc_cell))
"""


def test_server_killed_mid_cell_fails_it_clearly_and_the_rerun_reuses_every_answer(
        served: Served, smollm2: Path, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    args = ["--model", f"openai:{smollm2}", "--lceval-base-url", served.url,
            "--lceval-retries", "1", "--lceval-batch-size", "1", "--lceval-concurrency", "1",
            "--lceval-tasks", "niah_single_1", "--lengths", "384", "--depths", "50",
            "--samples", "3", "--lceval-threshold", "0", "--lceval-store", "store.sqlite",
            "-p", "no:randomly"]
    # Killed once the first answer is in the store, not once the server logs it: uvicorn logs
    # a request when the response starts, so a kill on the log line can lose its body.
    killer = served.kill_when(lambda: stored_answers(pytester.path / "store.sqlite") >= 1)
    crashed = pytester.runpytest(*args, "--lceval-run", "crashed")
    killer.join(timeout=60)
    crashed.assert_outcomes(failed=1)
    crashed.stdout.fnmatch_lines([
        f"*ServerError: openai backend: generate request to {served.url} (model *) failed: "
        f"cannot connect*(after 1 retries)*rerun once the server answers*"])
    stored = stored_answers(pytester.path / "store.sqlite")
    assert 1 <= stored < 3  # the kill came after the first answer and before the last

    served.start()
    rerun = pytester.runpytest(*args, "--lceval-run", "rerun")
    rerun.assert_outcomes(passed=1)
    assert served.answered() == 3 - stored  # the restarted server saw only the missing ones
    results = (pytester.path / "reports" / "rerun" / "results.jsonl").read_text()
    assert '"model_requests": 2' in results
