"""What a server reports about its weights reaches the fingerprint, and llama.cpp's server is an
OpenAI-compatible backend of its own (llamacpp.py), both against the scripted fake server.

A server that keeps a model's name but serves other weights must not be answered from the store;
a server that reports nothing about them keeps the fingerprint it had before this was read.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_openai import FakeServer, Reply, Seen, default_answer, llama_meta, models

from pytest_lceval.models.registry import LoadOptions, load_backend
from pytest_lceval.models.serving import ServingOptions
from pytest_lceval.results.records import GenerateRequest, Prompt

SILENT_SERVER_FINGERPRINT = "bbb188a4d9a8d79df1068326c05977e7423eed5a9e0f24790ad8982d70da305e"
"""openai:gpt-4o-mini counted with the bytes_test encoding, computed before the served entry
was read: a server whose listing says nothing about the model must still give it."""


@pytest.fixture(autouse=True)
def small_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model name counts with a byte-level encoding (no download)."""
    tiktoken = pytest.importorskip("tiktoken")
    encoding = tiktoken.Encoding(name="bytes_test", pat_str=r"\s?\S+|\s+",
                                 mergeable_ranks={bytes([i]): i for i in range(256)},
                                 special_tokens={})
    monkeypatch.setattr(tiktoken, "encoding_for_model", lambda name: encoding)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer().running() as running:
        yield running


def serving(listing: Reply, props: dict[str, Any] | None = None) -> Callable[[Seen], Reply]:
    """Answers /v1/models with ``listing``, /props with ``props`` (404 without), else '42'."""
    def answer(request: Seen) -> Reply:
        if request.path.endswith("/models"):
            return listing
        if request.path == "/props":
            return Reply(body=props) if props is not None else Reply(404, {"error": "no"})
        return default_answer(request)
    return answer


def fingerprint(server: FakeServer, spec: str, listing: Reply,
                props: dict[str, Any] | None = None) -> str:
    server.answer = serving(listing, props)
    backend = load_backend(spec, LoadOptions(serving=ServingOptions(base_url=server.url)))
    return backend.fingerprint


@pytest.mark.parametrize("listing", [models(), models({"id": "gpt-4o-mini"}),
                                     models({"id": "other", "root": "/w/other"}),
                                     Reply(404, {"error": "no /models here"})],
                         ids=["empty", "id-only", "other-model", "no-listing"])
def test_a_server_that_reports_nothing_keeps_the_old_fingerprint(server: FakeServer,
                                                                 listing: Reply) -> None:
    assert fingerprint(server, "openai:gpt-4o-mini", listing) == SILENT_SERVER_FINGERPRINT


def test_other_weights_under_the_same_name_get_another_fingerprint(server: FakeServer) -> None:
    def vllm(root: str, created: int = 1) -> Reply:
        return models({"id": "gpt-4o-mini", "created": created, "owned_by": "vllm",
                       "root": root, "max_model_len": 8192})

    first = fingerprint(server, "openai:gpt-4o-mini", vllm("/weights/v1"))
    assert first != SILENT_SERVER_FINGERPRINT
    assert fingerprint(server, "openai:gpt-4o-mini", vllm("/weights/v2")) != first
    # vLLM (and llama.cpp) set 'created' to the time of the request: it must not count
    assert fingerprint(server, "openai:gpt-4o-mini", vllm("/weights/v1", created=2)) == first


def llama_server(meta: dict[str, Any], build: str = "b6100-1a2b3c") -> tuple[Reply, dict[str, Any]]:
    listing = models({"id": "qwen", "created": int(time.time()), "owned_by": "llamacpp",
                      "meta": meta})
    return listing, {"build_info": build, "default_generation_settings": {"n_ctx": 4096}}


def test_llamacpp_server_is_an_openai_backend_with_its_window_and_weights(
        server: FakeServer) -> None:
    server.answer = serving(*llama_server(llama_meta()))
    backend = load_backend("llamacpp:qwen", LoadOptions(
        serving=ServingOptions(base_url=server.url)))
    assert backend.spec == "llamacpp:qwen" and backend.context_window == 4096
    facts = backend.describe()
    assert facts["backend"] == "llamacpp" and facts["window"] == "4096 (server)"
    answer = backend.generate([GenerateRequest("Q?", 8, (), Prompt("Q?"))])[0]
    assert answer.text == "42"
    assert server.requests("/chat/completions")[0].body["model"] == "qwen"


def test_the_window_option_replaces_the_servers_and_keeps_the_fingerprint(
        server: FakeServer) -> None:
    """A served model's claimed window comes from --lceval-window (its config is the server's);
    the window skips cells and changes no answer."""
    server.answer = serving(*llama_server(llama_meta()))
    options = LoadOptions(serving=ServingOptions(base_url=server.url))
    served = load_backend("llamacpp:qwen", options)
    claimed = load_backend("llamacpp:qwen", dataclasses.replace(options, window=16384))
    assert (claimed.context_window, claimed.describe()["window"]) == \
        (16384, "16384 (--lceval-window)")
    assert claimed.fingerprint == served.fingerprint


def test_llamacpp_fingerprint_follows_the_gguf_and_the_build(server: FakeServer) -> None:
    first = fingerprint(server, "llamacpp:qwen", *llama_server(llama_meta()))
    assert fingerprint(server, "llamacpp:qwen", *llama_server(llama_meta())) == first
    requantised = llama_meta(size=994156544, ftype="Q8_0")
    assert fingerprint(server, "llamacpp:qwen", *llama_server(requantised)) != first
    assert fingerprint(server, "llamacpp:qwen",
                       *llama_server(llama_meta(), build="b6200-4d5e6f")) != first


def test_llamacpp_without_props_falls_back_to_the_meta_window(server: FakeServer) -> None:
    listing, _ = llama_server(llama_meta(n_ctx=2048))
    server.answer = serving(listing)
    backend = load_backend("llamacpp:qwen", LoadOptions(
        serving=ServingOptions(base_url=server.url)))
    assert backend.context_window == 2048
