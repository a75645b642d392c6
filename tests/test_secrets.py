"""A planted API key never leaves the client: not in results, JUnit XML, the HTML report, logs
(DEBUG included), terminal output with local variables, or the store."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest
from fake_openai import FakeServer, Reply, Seen, byte_encoding, default_answer
from toy_suite import SUITE, TOY_TASK

KEY = "sk-proj-Zq9f3c1e7a5b2d4c6e8a0b1c2d3e4f5a6bXw"
FRAGMENT = KEY[8:24]
"""A piece of the key: catches a key that leaks truncated or split."""


def answer(request: Seen) -> Reply:
    """401 without the key (so the test proves the key was sent), 500 for long prompts (so some
    cells fail with a traceback), '42' otherwise (wrong, so other cells fail their threshold)."""
    if request.headers.get("authorization") != f"Bearer {KEY}":
        return Reply(401, {"error": {"message": "no key"}})
    if len(str(request.body)) > 2500:
        return Reply(500, {"error": {"message": "engine failure"}})
    return default_answer(request)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(answer).running() as running:
        yield running


def test_planted_key_appears_in_no_output(pytester: pytest.Pytester, server: FakeServer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: byte_encoding())
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    html = ["--html", "report.html", "--self-contained-html"] \
        if importlib.util.find_spec("pytest_html") else []
    result = pytester.runpytest(
        "--model", "openai:fake", "--lceval-base-url", server.url,
        "--lceval-tokenizer", "tiktoken:bytes_test", "--lceval-retries", "0",
        "--lengths", "256,512", "--depths", "50", "--samples", "2", "--lceval-run", "r",
        "--lceval-store", "store.sqlite", "--junitxml", "junit.xml", "-o", "junit_logging=all",
        "-o", "junit_log_passing_tests=true", "--log-level", "DEBUG", "--log-file", "run.log",
        "--log-file-level", "DEBUG", "--showlocals", "-rA", "-p", "no:randomly", *html)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*score 0.000*", "*HTTP 500*engine failure*"])
    assert any(seen.headers.get("authorization") == f"Bearer {KEY}" for seen in server.seen)

    outputs = [path for path in pytester.path.rglob("*") if path.is_file()]
    names = {path.name for path in outputs}
    assert {"junit.xml", "run.log", "results.jsonl", "store.sqlite"} <= names
    assert "report.html" in names or not html
    assert "DEBUG" in (pytester.path / "run.log").read_text()  # the client's debug log is there
    for path in outputs:
        data = path.read_bytes()
        assert FRAGMENT.encode() not in data, path
    terminal = "\n".join(result.outlines + result.errlines)
    assert FRAGMENT not in terminal
