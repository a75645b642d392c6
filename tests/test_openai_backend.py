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

from collections.abc import Iterator
from pathlib import Path

import pytest
from served import Served, stored_answers
from toy_suite import RECALL_SUITE

from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.registry import LoadOptions, load_backend
from pytest_lceval.models.serving import ServingOptions
from pytest_lceval.results.records import GenerateRequest, Prompt
from pytest_lceval.tasks.base import BuildContext

pytest.importorskip("fastapi", reason="transformers serve needs fastapi and uvicorn")
pytest.importorskip("uvicorn", reason="transformers serve needs fastapi and uvicorn")
pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from pytest_lceval.models.presets import preset_directory

    return preset_directory("smollm2")


@pytest.fixture
def served(smollm2: Path, tmp_path: Path) -> Iterator[Served]:
    server = Served(smollm2, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def recall_requests(backend: object, samples: int = 2) -> list[GenerateRequest]:
    task = builtin_task("niah_single_1")
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
        f"pytest-lceval: openai backend: generate request to {served.url} (model *) failed: "
        f"cannot connect*(after 1 retries)*rerun once the server answers*"])
    stored = stored_answers(pytester.path / "store.sqlite")
    assert 1 <= stored < 3  # the kill came after the first answer and before the last

    served.start()
    rerun = pytester.runpytest(*args, "--lceval-run", "rerun")
    rerun.assert_outcomes(passed=1)
    assert served.answered() == 3 - stored  # the restarted server saw only the missing ones
    results = (pytester.path / "reports" / "rerun" / "results.jsonl").read_text()
    assert '"model_requests": 2' in results
