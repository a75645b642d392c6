"""Several replicas behind one ``--lceval-base-url``: requests spread over them with per-endpoint
concurrency, a failed endpoint's requests answered by the others (each exactly once), replicas
that must serve the same model, and a fingerprint that does not depend on who serves.

Against two scripted fake servers (fast), then against two real `transformers serve` processes,
one killed mid-run, through a whole pytest run and its store.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
from fake_openai import FakeServer, Reply, Seen, completion, default_answer, models
from served import Served, stored_answers
from test_openai_client import small_encoding
from toy_suite import RECALL_SUITE

from pytest_lceval.models import openai_api, openai_setup
from pytest_lceval.models.openai_api import OpenAIBackend, ServerError
from pytest_lceval.models.openai_setup import TiktokenText
from pytest_lceval.models.registry import LoadOptions, load_backend
from pytest_lceval.models.serving import ServingOptions
from pytest_lceval.results.records import GenerateRequest


class Echo:
    """Answers each completions request with its prompt (after ``delay`` s) and records which
    prompts this server answered in full; ``fault`` may replace any reply (by prompt)."""

    def __init__(self, delay: float = 0.0,
                 fault: Callable[[str], Reply | None] = lambda prompt: None) -> None:
        self.delay = delay
        self.fault = fault
        self.answered: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, request: Seen) -> Reply:
        if not request.path.endswith("/completions"):
            return default_answer(request)
        prompt = request.body["prompt"]
        reply = self.fault(prompt)
        if reply is not None:
            return reply
        with self._lock:
            self.answered.append(prompt)
        return Reply(**{**vars(completion(prompt)), "delay": self.delay})


@pytest.fixture
def pair() -> Iterator[tuple[FakeServer, FakeServer]]:
    with FakeServer().running() as first, FakeServer().running() as second:
        yield first, second


def replicas(*servers: FakeServer, **serving: Any) -> OpenAIBackend:
    options = ServingOptions(base_url=",".join(s.url for s in servers), api_mode="completions",
                             **serving)
    clients = [openai.OpenAI(api_key="EMPTY", base_url=s.url, timeout=options.timeout,
                             max_retries=options.retries) for s in servers]
    return OpenAIBackend("openai:fake", "fake", clients, TiktokenText(small_encoding(), False),
                         "completions", options, (4096, "test"), options.base_url or "")


def prompts(count: int) -> list[GenerateRequest]:
    return [GenerateRequest(f"q{i}", 4) for i in range(count)]


def assert_each_answered_once(answers: list[Any], count: int, *echoes: Echo) -> None:
    assert [a.text for a in answers] == [f"q{i}" for i in range(count)]  # in order
    served = [prompt for echo in echoes for prompt in echo.answered]
    assert sorted(served) == sorted(f"q{i}" for i in range(count))  # nothing twice or lost


# -- spreading -------------------------------------------------------------------------------

def test_requests_spread_over_replicas_with_concurrency_per_endpoint(
        pair: tuple[FakeServer, FakeServer]) -> None:
    echoes = Echo(delay=0.2), Echo(delay=0.2)
    for server, echo in zip(pair, echoes, strict=True):
        server.answer = echo
    answers = replicas(*pair, concurrency=2).generate(prompts(8))
    assert [server.most_in_flight for server in pair] == [2, 2]
    assert_each_answered_once(answers, 8, *echoes)


def test_a_faster_replica_answers_more(pair: tuple[FakeServer, FakeServer]) -> None:
    echoes = Echo(delay=0.02), Echo(delay=0.4)
    for server, echo in zip(pair, echoes, strict=True):
        server.answer = echo
    answers = replicas(*pair, concurrency=1).generate(prompts(8))
    assert_each_answered_once(answers, 8, *echoes)
    assert len(echoes[0].answered) > len(echoes[1].answered)


# -- failover --------------------------------------------------------------------------------

def test_a_replica_that_dies_mid_run_hands_its_requests_to_the_other(
        pair: tuple[FakeServer, FakeServer]) -> None:
    dying, survivor = pair

    def die_after_two(prompt: str) -> Reply | None:
        if len(first.answered) < 2:
            return None
        dying.stop()  # later connections are refused
        return Reply(drop=True)  # and this request is cut off mid-flight

    first, second = Echo(delay=0.05, fault=die_after_two), Echo(delay=0.05)
    dying.answer, survivor.answer = first, second
    model = replicas(dying, survivor, concurrency=2, retries=1)
    answers = model.generate(prompts(12))
    assert_each_answered_once(answers, 12, first, second)
    assert len(first.answered) == 2
    dropped = {seen.body["prompt"] for seen in dying.requests("/completions")} - \
        set(first.answered)
    assert dropped and dropped <= set(second.answered)  # the cut-off ones were answered there
    assert model.answered_by() == {dying.url: 2, survivor.url: 10}  # each answer counted once


def test_a_rested_replica_is_tried_again(pair: tuple[FakeServer, FakeServer],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_api, "ENDPOINT_REST", 0.3)
    flaky, steady = pair
    broken = [True]
    flaky.answer = Echo(fault=lambda prompt: Reply(503) if broken[0] else None)
    steady.answer = Echo()
    model = replicas(flaky, steady, concurrency=1, retries=0)
    assert [a.text for a in model.generate(prompts(4))] == [f"q{i}" for i in range(4)]
    tried = len(flaky.requests("/completions"))
    assert tried == 1  # failed once, then left out
    broken[0] = False
    model.generate(prompts(4))
    assert len(flaky.requests("/completions")) == tried  # still resting
    time.sleep(0.35)
    model.generate(prompts(8))
    assert len(flaky.requests("/completions")) > tried  # back in service


def test_when_every_replica_fails_the_error_names_them_all(
        pair: tuple[FakeServer, FakeServer]) -> None:
    first, second = pair
    first.answer = lambda request: Reply(503, {"error": {"message": "overloaded"}})
    model = replicas(first, second, retries=0)
    second.stop()
    with pytest.raises(ServerError) as failure:
        model.generate(prompts(3))
    message = str(failure.value)
    assert "generate request on every endpoint" in message
    assert f"{first.url}: HTTP 503: " in message and "overloaded" in message
    assert f"{second.url}: cannot connect" in message
    assert "rerun once the servers answer" in message
    assert failure.value.__cause__ is None


def test_a_bad_request_is_not_failed_over(pair: tuple[FakeServer, FakeServer]) -> None:
    for server in pair:
        server.answer = Echo(fault=lambda prompt: Reply(400, {"error": {"message": "bad"}})
                             if prompt == "q1" else None)
    with pytest.raises(ServerError, match=r"request to http://127.0.0.1:\d+/v1 .*HTTP 400.*bad"):
        replicas(*pair, concurrency=1).generate(prompts(2))
    sent = [seen.body["prompt"] for server in pair for seen in server.requests("/completions")]
    assert sent.count("q1") == 1  # it would fail anywhere: not sent again


def test_a_single_endpoint_fails_as_it_always_did() -> None:
    with FakeServer().running() as gone:
        model = replicas(gone, retries=0)
    with pytest.raises(ServerError, match=rf"generate request to {gone.url} \(model fake\) "
                                          rf"failed: cannot connect.*rerun once the server "
                                          rf"answers"):
        model.generate(prompts(2))


# -- loading: one model, one fingerprint -----------------------------------------------------

@pytest.fixture
def small_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    monkeypatch.setattr(tiktoken, "encoding_for_model", lambda name: small_encoding())


def vllm_listing(root: str) -> Callable[[Seen], Reply]:
    def answer(request: Seen) -> Reply:
        if request.path.endswith("/models"):
            return models({"id": "gpt-4o-mini", "created": time.time_ns(), "owned_by": "vllm",
                           "root": root, "max_model_len": 8192})
        return default_answer(request)
    return answer


def load(*servers: FakeServer) -> Any:
    return load_backend("openai:gpt-4o-mini", LoadOptions(serving=ServingOptions(
        base_url=",".join(server.url for server in servers))))


@pytest.mark.usefixtures("small_tiktoken")
def test_replicas_share_the_fingerprint_of_one(pair: tuple[FakeServer, FakeServer]) -> None:
    for server in pair:
        server.answer = vllm_listing("/weights/llama")
    both = load(*pair)
    assert both.fingerprint == load(pair[0]).fingerprint == load(pair[1]).fingerprint
    assert both.context_window == 8192
    facts = both.describe()
    assert facts["endpoint"] == f"{pair[0].url},{pair[1].url}"
    assert facts["concurrency"] == "4 per endpoint, 2 endpoints"


@pytest.mark.usefixtures("small_tiktoken")
def test_replicas_of_different_models_are_refused_naming_them(
        pair: tuple[FakeServer, FakeServer]) -> None:
    pair[0].answer, pair[1].answer = vllm_listing("/weights/a"), vllm_listing("/weights/b")
    with pytest.raises(ValueError) as failure:
        load(*pair)
    message = str(failure.value)
    assert message.startswith("--lceval-base-url: the endpoints do not serve the same")
    assert f"{pair[0].url}: (8192, {{" in message and "/weights/a" in message
    assert f"{pair[1].url}: (8192, {{" in message and "/weights/b" in message
    assert "\n" not in message


def test_health_check_names_the_replica_that_is_down(pair: tuple[FakeServer, FakeServer]) -> None:
    pair[1].stop()
    urls = ",".join(server.url for server in pair)
    with pytest.raises(ValueError, match=rf"cannot reach the server at {pair[1].url} "):
        openai_setup.health_check(ServingOptions(base_url=urls))


# -- options ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("urls", "expected"), [
    ("http://a:8000/v1,http://a:8000/v1/", "http://a:8000/v1 is listed twice"),
    ("http://a:8000/v1,,http://b:8000/v1", "'' is not an http(s) URL"),
    ("http://a:8000/v1,b:8000", "'b:8000' is not an http(s) URL"),
])
def test_bad_endpoint_lists_are_usage_errors(pytester: pytest.Pytester, urls: str,
                                             expected: str) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest("--lceval-base-url", urls)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert expected in "\n".join(result.errlines)


def test_header_lists_every_endpoint_without_credentials(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest("--model", "openai:m", "--lceval-base-url",
                                "http://u:pw@127.0.0.1:9/v1, http://127.0.0.1:10/v1",
                                "--collect-only")
    result.stdout.fnmatch_lines(["lceval: openai endpoint=http://***@127.0.0.1:9/v1,"
                                 "http://127.0.0.1:10/v1 mode=auto *"])
    assert "pw@" not in result.stdout.str()


# -- two real servers, one killed mid-run ----------------------------------------------------

def store_rows(path: Path) -> tuple[int, int]:
    """(rows in the answers table, distinct request keys among them)."""
    with sqlite3.connect(path) as db:
        rows, keys = db.execute("SELECT COUNT(*), COUNT(DISTINCT request) FROM answers").fetchone()
    return int(rows), int(keys)


@pytest.fixture
def two_served(tmp_path: Path) -> Iterator[list[Any]]:
    """Two `transformers serve` processes of SmolLM2, started at once (a missing fastapi or
    uvicorn skips the test)."""
    from pytest_lceval.models.presets import preset_directory

    model = preset_directory("smollm2")
    servers = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        servers.append(Served(model, tmp_path / name))
    try:
        with ThreadPoolExecutor(2) as starting:
            for started in [starting.submit(server.start) for server in servers]:
                started.result()
        yield servers
    finally:
        for server in servers:
            server.kill()


@pytest.mark.real_model
def test_two_servers_one_killed_mid_run_every_request_answered_once(
        two_served: list[Any], pytester: pytest.Pytester) -> None:
    from pytest_lceval.results.cells import read_results

    doomed, survivor = two_served
    pytester.makepyfile(test_recall=RECALL_SUITE)
    store = pytester.path / "store.sqlite"
    killer = doomed.kill_when(lambda: stored_answers(store) >= 2)  # after the first cell
    result = pytester.runpytest(
        "--model", f"openai:{doomed.model}", "--lceval-base-url", f"{doomed.url},{survivor.url}",
        "--lceval-retries", "1", "--lceval-concurrency", "1", "--lceval-tasks", "niah_single_1",
        "--lengths", "256", "--lceval-context-size", "fill",  # RULER's first step: > 256
        "--depths", "25,75", "--samples", "2",
        "--lceval-threshold", "0", "--lceval-store", str(store), "--lceval-run", "r",
        "-p", "no:randomly")
    killer.join(timeout=60)
    assert doomed.process.poll() is not None  # it was killed during the run
    result.assert_outcomes(passed=2)
    cells = read_results(pytester.path / "reports" / "r")
    assert len(cells) == 2 and all(cell.outcome == "passed" and cell.n == 2 for cell in cells)
    requests = sum(cell.model_requests for cell in cells)
    assert requests == 4
    assert store_rows(store) == (requests, requests)  # each request answered, none twice
    assert 1 <= doomed.answered() < requests <= doomed.answered() + survivor.answered()
    usage = [line for line in result.outlines if line.startswith("lceval: model:")]
    by_endpoint = re.search(r"by endpoint: (\S+) (\d+), (\S+) (\d+)$", usage[0])
    assert by_endpoint, usage
    said = {by_endpoint[1]: int(by_endpoint[2]), by_endpoint[3]: int(by_endpoint[4])}
    assert set(said) == {doomed.url, survivor.url} and sum(said.values()) == requests
    assert said[survivor.url] == survivor.answered()  # what it logged, from the client's side
