"""The OpenAI-compatible backend against a scripted loopback server: retries and backoff,
Retry-After, timeouts, concurrency, log-probability ranking and its reported fallback, chat
prefill, token counting and fingerprints. Fast: no model runs here (test_openai_backend.py runs
the real `transformers serve`)."""

from __future__ import annotations

import dataclasses
import json
import re
import time
import warnings
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fake_openai import FakeServer, Reply, Seen, chat, completion

from pytest_lceval.models import openai_api, openai_setup, topk_rank
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.models.openai_api import (
    OpenAIBackend,
    PrefillWarning,
    RankFallbackWarning,
    ServerError,
)
from pytest_lceval.models.openai_setup import TiktokenText
from pytest_lceval.models.registry import LoadOptions
from pytest_lceval.models.serving import ServingOptions, redact_url
from pytest_lceval.results.records import GenerateRequest, Prompt, RankRequest


class WordText(WordTokenizer):
    """A whitespace tokenizer standing in for the served model's (HFText or tiktoken)."""

    def __init__(self, chat: bool = False) -> None:
        super().__init__()
        self.renderer = Renderer((lambda user: f"<u>{user}<a>") if chat else None,
                                 lambda text: len(self.encode(text)))

    def identity(self) -> dict[str, Any]:
        return {"words": True}

    @property
    def label(self) -> str:
        return "words"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer().running() as running:
        yield running


def backend(server: FakeServer, mode: str = "completions", text: WordText | None = None,
            name: str = "fake", **serving: Any) -> OpenAIBackend:
    options = ServingOptions(base_url=server.url, api_mode=mode, **serving)
    client = openai.OpenAI(api_key="EMPTY", base_url=server.url, timeout=options.timeout,
                           max_retries=options.retries)
    return OpenAIBackend(f"openai:{name}", name, client, text or WordText(mode == "chat"), mode,
                         options, (4096, "test"), server.url)


def ask(model: OpenAIBackend, prompt: str = "What is the number?", prefix: str = "") -> str:
    return model.generate([GenerateRequest(prompt + prefix, 8, ("\n",),
                                           Prompt(prompt, prefix))])[0].text


# -- retries -------------------------------------------------------------------------------------

def test_429_with_retry_after_is_waited_out_then_answered(server: FakeServer) -> None:
    server.script = [Reply(429, {"error": {"message": "slow down"}}, {"retry-after": "0.6"})]
    started = time.perf_counter()
    assert ask(backend(server, retries=2)) == "42"
    assert time.perf_counter() - started >= 0.6
    assert len(server.requests("/completions")) == 2


def test_5xx_backs_off_exponentially_with_jitter(server: FakeServer) -> None:
    server.script = [Reply(503), Reply(502)]
    started = time.perf_counter()
    assert ask(backend(server, retries=3)) == "42"
    waited = time.perf_counter() - started
    assert 0.75 * (0.5 + 1.0) <= waited < 0.5 + 1.0 + 2.0  # 0.5 s then 1 s, minus <= 25 % jitter
    assert len(server.requests("/completions")) == 3


def test_timeouts_are_retried(server: FakeServer) -> None:
    server.script = [Reply(delay=2.0)]
    assert ask(backend(server, retries=1, timeout=0.5)) == "42"
    assert len(server.requests("/completions")) == 2


def test_exhausted_retries_fail_with_the_reason_and_what_to_do(server: FakeServer) -> None:
    server.answer = lambda request: Reply(500, {"error": {"message": "engine died"}})
    with pytest.raises(ServerError) as failure:
        ask(backend(server, retries=1))
    message = str(failure.value)
    assert "HTTP 500" in message and "engine died" in message and "after 1 retries" in message
    assert "rerun" in message
    assert failure.value.__cause__ is None  # no traceback into the client's frames
    assert len(server.requests("/completions")) == 2


def deadline_backend(server: FakeServer, **serving: Any) -> OpenAIBackend:
    """A backend on the client that ``OpenAIBackend.load`` makes (openai_setup.make_clients):
    its requests carry the wall-clock deadline."""
    options = ServingOptions(base_url=server.url, api_mode="completions", **serving)
    (client,) = openai_setup.make_clients(options, options.timeout, options.retries)
    return OpenAIBackend("openai:fake", "fake", client, WordText(), "completions", options,
                         (4096, "test"), server.url)


def trickled(text: str) -> Reply:
    """``text``'s answer sent a byte a second, padded so that it would take over an hour."""
    return dataclasses.replace(completion(text), trickle=1.0)


def test_a_server_that_trickles_is_cut_off_at_the_deadline(server: FakeServer) -> None:
    """A byte a second never lets a read time out: only the wall-clock deadline ends it."""
    server.answer = lambda request: trickled("42")
    started = time.perf_counter()
    with pytest.raises(ServerError) as failure:
        ask(deadline_backend(server, timeout=2.0, retries=0))
    assert 2.0 <= time.perf_counter() - started < 8.0
    assert "the request timed out: no whole answer within --lceval-timeout 2 s" in \
        str(failure.value)


def test_a_request_past_its_deadline_is_retried_with_a_new_one(server: FakeServer) -> None:
    server.script = [trickled("41")]
    started = time.perf_counter()
    assert ask(deadline_backend(server, timeout=1.5, retries=1)) == "42"
    assert 1.5 <= time.perf_counter() - started < 8.0
    assert len(server.requests("/completions")) == 2


def test_refused_connection_names_the_endpoint() -> None:
    with FakeServer().running() as gone:
        model = backend(gone, retries=0)
    with pytest.raises(ServerError, match=r"cannot connect.*rerun"):
        ask(model)


def test_concurrency_is_limited(server: FakeServer) -> None:
    server.answer = lambda request: Reply(**{**vars(completion("42")), "delay": 0.3})
    model = backend(server, concurrency=3)
    answers = model.generate([GenerateRequest(f"q{i}", 4) for i in range(9)])
    assert [a.text for a in answers] == ["42"] * 9
    assert server.most_in_flight == 3


# -- requests ------------------------------------------------------------------------------------

def test_completions_send_the_rendered_prompt_greedily(server: FakeServer) -> None:
    ask(backend(server), "Where?", " Answer:")
    body = server.requests("/completions")[0].body
    assert body["prompt"] == "Where? Answer:"
    assert body["temperature"] == 0 and body["max_tokens"] == 8 and body["stop"] == ["\n"]


def test_chat_prefill_where_the_server_continues_the_assistant_turn(server: FakeServer) -> None:
    model = backend(server, "chat")
    ask(model, "Where?", " Answer:")
    body = server.requests("/chat/completions")[0].body
    assert body["messages"] == [{"role": "user", "content": "Where?"},
                                {"role": "assistant", "content": " Answer:"}]
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert model.describe()["answer_prefix"] == "continue_final_message"


def test_chat_prefill_refused_appends_the_prefix_with_a_warning(server: FakeServer) -> None:
    def answer(request: Seen) -> Reply:
        if "continue_final_message" in request.body:
            return Reply(422, {"detail": "Unexpected fields in the request"})
        return chat("42")

    server.answer = answer
    model = backend(server, "chat")
    with pytest.warns(PrefillWarning, match="appended to the user message"):
        assert ask(model, "Where?", " Answer:") == "42"
    ask(model, "Again?", " Answer:")
    bodies = [seen.body for seen in server.requests("/chat/completions")]
    assert len(bodies) == 3  # the refused try, its retry, then straight to the fallback
    assert bodies[2]["messages"] == [{"role": "user", "content": "Again? Answer:"}]
    assert model.describe()["answer_prefix"] == "appended to the user message"


@pytest.mark.parametrize("body", [{"id": "x", "object": "chat.completion", "choices": []},
                                  {"id": "x"}, ["not", "an", "object"]],
                         ids=["empty-choices", "no-choices", "a-list"])
@pytest.mark.parametrize("mode", ["completions", "chat"])
@pytest.mark.parametrize("call", ["generate", "rank"])
def test_a_reply_without_choices_says_what_the_server_sent(server: FakeServer, body: Any,
                                                           mode: str, call: str) -> None:
    server.answer = lambda request: Reply(body=body)
    model = backend(server, mode, retries=0)
    with pytest.raises(ServerError) as failure:
        if call == "generate":
            ask(model)
        else:
            model.rank([RankRequest("Review: great film.", " Answer:", ("good", "bad"))])
    message = str(failure.value)
    sent = re.search(r"the server answered with no choices: it sent (.*)\. Answers stored",
                     message)
    assert sent and json.loads(sent.group(1)) == body, message
    assert failure.value.__cause__ is None


# -- rank ----------------------------------------------------------------------------------------

OPTIONS = ("positive", "negative", "neutral")


def rank(model: OpenAIBackend) -> Any:
    return model.rank([RankRequest("Review: great film.", " Answer:", OPTIONS)])[0]


def test_rank_reads_top_logprobs_when_offered(server: FakeServer) -> None:
    server.answer = lambda request: completion(
        " negative", {" negative": -0.2, " positive": -1.9, " the": -3.0, " neutral": -4.0})
    model = backend(server)
    ranking = rank(model)
    assert ranking.method == topk_rank.LOGPROBS
    assert ranking.logprobs == (-1.9, -0.2, -4.0) and OPTIONS[ranking.choice] == "negative"
    assert ranking.top_in_options
    assert server.requests("/completions")[0].body["logprobs"] == openai_api.TOP_K
    rank(model)
    assert server.requests("/completions")[1].body["max_tokens"] == 1


def test_rank_leaves_options_outside_the_top_k_unscored(server: FakeServer) -> None:
    server.answer = lambda request: completion(" the", {" the": -0.1, " neutral": -2.0})
    ranking = rank(backend(server))
    assert ranking.method == topk_rank.BOUNDED
    assert ranking.logprobs == (None, None, -2.0) and not ranking.top_in_options
    assert OPTIONS[ranking.choice] == "neutral"  # exact: the others are below -2.0


def test_rank_with_no_option_in_the_top_k_is_no_prediction(server: FakeServer) -> None:
    server.answer = lambda request: completion(" the", {" the": -0.1, " a": -2.0})
    ranking = rank(backend(server))
    assert ranking.logprobs == (None, None, None) and ranking.choice is None


def test_rank_without_logprobs_falls_back_to_generate_match_loudly(server: FakeServer) -> None:
    server.answer = lambda request: completion(" Neutral, I think")
    model = backend(server)
    with pytest.warns(RankFallbackWarning, match="generate-match"):
        ranking = rank(model)
    assert ranking.method == topk_rank.GENERATE_MATCH
    assert OPTIONS[ranking.choice] == "neutral" and ranking.top_in_options
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once, not per request
        assert OPTIONS[rank(model).choice] == "neutral"
    second = server.requests("/completions")[1].body
    assert "logprobs" not in second and second["max_tokens"] == openai_api.MATCH_TOKENS
    assert "generate-match" in model.describe()["rank"]
    server.answer = lambda request: completion(" Maybe")
    assert rank(model).choice is None  # no option matched: no prediction, not option 0


def test_rank_in_chat_mode_reads_chat_logprobs(server: FakeServer) -> None:
    server.answer = lambda request: chat("positive", {"positive": -0.1, "negative": -2.3})
    model = backend(server, "chat")
    ranking = rank(model)
    assert ranking.logprobs == (-0.1, -2.3, None) and ranking.method == topk_rank.BOUNDED
    body = server.requests("/chat/completions")[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == openai_api.TOP_K


def test_generate_match_prefers_the_longest_matching_option() -> None:
    ranking = topk_rank.rank_by_match("Not sure", ("Not", "Not sure", "Yes"), 5)
    assert ranking.choice == 1 and ranking.method == topk_rank.GENERATE_MATCH
    assert ranking.logprobs == (None, 0.0, None)
    unmatched = topk_rank.rank_by_match("maybe", ("yes", "no"), 5)
    assert not unmatched.top_in_options and unmatched.choice is None


def test_top_k_takes_the_likelier_spelling_of_one_token() -> None:
    # Lifelong-ICL's OpenAI rank_postprocess looks 'yes' and ' yes' up apart and takes the
    # maximum: 'no' wins here, where adding the two spellings' probabilities would pick 'yes'
    # (tests/conformance/test_lifelong_icl.py runs the reference on 400 such top-20s).
    top = {"yes": -1.2, " yes": -1.2, "no": -1.0}
    ranking = topk_rank.rank_from_top(top, [["yes", " yes"], ["no", " no"]], 4)
    assert ranking.logprobs == (-1.2, -1.0) and ranking.choice == 1


# -- loading, counting, fingerprints ---------------------------------------------------------

def small_encoding() -> Any:
    tiktoken = pytest.importorskip("tiktoken")
    return tiktoken.Encoding(name="bytes_test", pat_str=r"\s?\S+|\s+",
                             mergeable_ranks={bytes([i]): i for i in range(256)},
                             special_tokens={})


def test_tiktoken_counts_the_chat_format_overhead() -> None:
    chat_text = TiktokenText(small_encoding(), chat=True)
    plain = TiktokenText(small_encoding(), chat=False)
    assert plain.renderer.count("abc") == 3
    assert chat_text.renderer.count("abc") == 3 + openai_setup.CHAT_OVERHEAD
    assert chat_text.renderer.chat_source(Prompt("abc")) == Prompt("abc")
    assert chat_text.label == "tiktoken:bytes_test"


def test_openai_models_count_with_tiktoken_and_say_so(server: FakeServer,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken

    monkeypatch.setattr(tiktoken, "encoding_for_model", lambda name: small_encoding())
    model = openai_api.load_openai("gpt-4o-mini", LoadOptions(
        serving=ServingOptions(base_url=server.url)))
    facts = model.describe()
    assert facts["tokenizer"] == "tiktoken:bytes_test" and facts["mode"] == "chat"
    assert facts["window"] == "128000 (OpenAI model table)"


def test_unknown_model_without_tokenizer_is_a_clear_error(server: FakeServer) -> None:
    with pytest.raises(ValueError, match="--lceval-tokenizer"):
        openai_api.load_openai("my-local-model", LoadOptions(
            serving=ServingOptions(base_url=server.url)))


def test_no_key_for_openai_itself_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        openai_api.load_openai("gpt-4o-mini", LoadOptions())


def test_server_reported_window_wins(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken

    monkeypatch.setattr(tiktoken, "encoding_for_model", lambda name: small_encoding())
    server.answer = lambda request: Reply(body={"object": "list", "data": [
        {"id": "gpt-4o-mini", "object": "model", "created": 0, "owned_by": "vllm",
         "max_model_len": 32768}]})
    model = openai_api.load_openai("gpt-4o-mini", LoadOptions(
        serving=ServingOptions(base_url=server.url)))
    assert model.context_window == 32768


class OtherWords(WordText):
    def identity(self) -> dict[str, Any]:
        return {"words": "another vocabulary"}


def test_fingerprint_changes_with_model_mode_and_tokenizer(server: FakeServer) -> None:
    fingerprint = backend(server).fingerprint
    assert backend(server, concurrency=9, timeout=5).fingerprint == fingerprint
    assert backend(server, "chat").fingerprint != fingerprint
    assert backend(server, name="other").fingerprint != fingerprint
    assert backend(server, text=OtherWords()).fingerprint != fingerprint


def test_urls_lose_their_credentials_in_reports() -> None:
    assert redact_url("http://user:secret@host:8000/v1") == "http://***@host:8000/v1"
    assert redact_url("http://host:8000/v1") == "http://host:8000/v1"


@pytest.mark.parametrize(("args", "expected"), [
    (["--lceval-base-url", "ftp://host/v1"], "bad value 'ftp://host/v1' for --lceval-base-url"),
    (["--lceval-concurrency", "0"], "--lceval-concurrency (from --lceval-concurrency): must be"),
    (["--lceval-timeout", "soon"], "--lceval-timeout"),
    (["--lceval-retries", "-1"], "must be at least 0"),
    (["--lceval-gpu-memory", "1.5"], "must lie in (0, 1]"),
])
def test_bad_serving_options_are_usage_errors(pytester: pytest.Pytester, args: list[str],
                                              expected: str) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert expected in "\n".join(result.errlines)


def test_header_names_the_endpoint_without_credentials(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest("--model", "openai:m", "--lceval-base-url",
                                "http://user:pw@127.0.0.1:9/v1", "--lceval-concurrency", "6",
                                "--collect-only")  # no server: a real run stops at its check
    result.stdout.fnmatch_lines(["lceval: openai endpoint=http://***@127.0.0.1:9/v1 mode=auto "
                                 "concurrency=6 *"])
    assert "pw@" not in result.stdout.str()
