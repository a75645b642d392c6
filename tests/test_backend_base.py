"""The backend base class and the backend hook.

Fingerprints key every stored answer, so moving the backends onto one base class must not change
a single one: the values below were computed before the move and are pinned here. A plugin adds a
backend through ``pytest_lceval_make_backend`` without touching this package.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import openai
import pytest
from toy_suite import RECALL_SUITE

from pytest_lceval.models.backend import BaseBackend, split_rank
from pytest_lceval.models.base import Backend
from pytest_lceval.models.mock import load_mock
from pytest_lceval.models.openai_api import OpenAIBackend
from pytest_lceval.models.openai_setup import TiktokenText
from pytest_lceval.models.registry import LoadOptions
from pytest_lceval.models.serving import ServingOptions
from pytest_lceval.results.records import (
    GenerateRequest,
    Generation,
    Ranking,
    RankRequest,
    stable_hash,
)

MOCK_FINGERPRINTS = {
    ("grep", "auto"): "c44fdc23fde890a53c686b5beea4b38d28f4b2ae6fed19d7caa72c09411f6d3f",
    ("grep", "on"): "9489d82db4daf85b61a043f050db1ceb918e9410e9318e5561a390752d12c08e",
    ("grep", "off"): "c44fdc23fde890a53c686b5beea4b38d28f4b2ae6fed19d7caa72c09411f6d3f",
    ("constant", "auto"): "a8ada84df7c693a18a62c3f983fdfbd5841655f47a006a9a28c76c5876ad7267",
    ("constant", "on"): "c767d5dcd31bb62a712bdee6bdf0f84492ddf185ce795f481be850be1b97e7cc",
    ("icl", "auto"): "3935c08dc1d6423cd059d1355d1a99a37829c5a7cfae4a221fd89245f9f98f77",
    ("icl", "on"): "7fbadb7cd20873e2dfaae7c216699ae51b7da143fae58e9d743ebd83f4a2f65f",
    ("grep?miss=25-75&window=4096", "auto"):
        "465adf30cc6ef2ff36bb04fd22826fc605cd768bd043a6981f449a2c764f5f0d",
    ("icl?reach=300", "on"): "5f27e1749ad0f6f637f31b1152fef7c028eb8ae3008c42381be18d25b32b4de7",
    ("constant?text=hi", "off"): "f32045470eab0be13deb052b2a9db922032df25b12fca449ea951642eef05484",
}
"""mock fingerprints as computed before backends had a base class (commit a2f5eb8)."""

OPENAI_FINGERPRINTS = {
    "chat": "db67a44acc76f53b6007ed3c52e9a98a542681082b4e90a1c5875e5a5bde5f03",
    "completions": "9db91349e80af19ce863f8fc1afcd1c68a41d73211921f7307a5fed7b65c7aae",
}
"""openai:fake with tiktoken counting (the bytes_test encoding), before the base class."""


@pytest.mark.parametrize(("rest", "template"), list(MOCK_FINGERPRINTS))
def test_mock_fingerprints_are_those_made_before_the_base_class(rest: str, template: str) -> None:
    backend = load_mock(rest, LoadOptions(chat_template=template))
    assert backend.fingerprint == MOCK_FINGERPRINTS[rest, template]
    assert backend.fingerprint == stable_hash(backend.identity())


def small_encoding() -> Any:
    tiktoken = pytest.importorskip("tiktoken")
    return tiktoken.Encoding(name="bytes_test", pat_str=r"\s?\S+|\s+",
                             mergeable_ranks={bytes([i]): i for i in range(256)},
                             special_tokens={})


@pytest.mark.parametrize("mode", list(OPENAI_FINGERPRINTS))
def test_openai_fingerprints_are_those_made_before_the_base_class(mode: str) -> None:
    url = "http://127.0.0.1:9/v1"  # never contacted
    backend = OpenAIBackend("openai:fake", "fake", openai.OpenAI(api_key="EMPTY", base_url=url),
                            TiktokenText(small_encoding(), mode == "chat"), mode,
                            ServingOptions(base_url=url), (4096, "test"), url)
    assert backend.fingerprint == OPENAI_FINGERPRINTS[mode]


def test_a_backend_must_say_what_it_is() -> None:
    class Nameless(BaseBackend):
        def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
            return []

        def rank(self, requests: Sequence[RankRequest]) -> list[Ranking]:
            return []

        def describe(self) -> dict[str, str]:
            return {}

    with pytest.raises(TypeError, match="identity"):
        Nameless("x", load_mock("grep", LoadOptions()).tokenizer, None, 1)  # type: ignore[abstract,arg-type]


def test_every_built_in_backend_is_a_base_backend_and_a_backend() -> None:
    backend = load_mock("grep", LoadOptions())
    assert isinstance(backend, BaseBackend) and isinstance(backend, Backend)


def test_an_empty_prefix_makes_the_whole_prompt_the_prefix() -> None:
    assert split_rank(RankRequest("head ", "tail", ("a",))) == ("head ", "tail")
    assert split_rank(RankRequest("", "whole prompt", ("a",))) == ("whole prompt", "")


ECHO_PLUGIN = """
from pytest_lceval.models.backend import BaseBackend
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.results.records import Generation, Ranking


class Echo(BaseBackend):
    '''Answers every question with the prompt's last word.'''

    def __init__(self, spec):
        words = WordTokenizer()
        super().__init__(spec, words, Renderer(None, lambda text: len(words.encode(text))), 8192)

    def identity(self):
        return {"echo": self.spec}

    def generate(self, requests):
        return [Generation(r.prompt.split()[-1], self.renderer.count(r.prompt), 1)
                for r in requests]

    def rank(self, requests):
        return [Ranking(tuple(0.0 for _ in r.options), True, 1) for r in requests]

    def describe(self):
        return {"backend": "echo", "model": self.spec}


def pytest_lceval_make_backend(spec, options):
    return Echo(spec) if spec.startswith("echo:") else None
"""

ARGS = ["--lceval-tasks", "niah_single_1", "--lengths", "256", "--depths", "50", "--samples",
        "2", "--lceval-threshold", "0", "-p", "no:randomly"]


def test_a_conftest_plugin_adds_a_backend_through_the_hook(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(ECHO_PLUGIN)
    pytester.makepyfile(test_recall=RECALL_SUITE)
    outcome = pytester.runpytest("--model=echo:x", "--lceval-run", "echo", *ARGS)
    outcome.assert_outcomes(passed=1)
    rows = [json.loads(line) for line in
            (pytester.path / "reports" / "echo" / "results.jsonl").read_text().splitlines()]
    assert [row["model"] for row in rows] == ["echo:x"]
    assert rows[0]["fingerprint"] == stable_hash({"echo": "echo:x"})


def test_a_spec_nothing_knows_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    outcome = pytester.runpytest("--model=echo:x", *ARGS)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*unknown model spec 'echo:x'*Known: smollm2*"])


def test_a_spec_no_plugin_answers_fails_at_load(pytester: pytest.Pytester) -> None:
    """With a backend plugin installed, an unknown spec may be its own: the load tells."""
    pytester.makeconftest(ECHO_PLUGIN)
    pytester.makepyfile(test_recall=RECALL_SUITE)
    outcome = pytester.runpytest("--model=ehco:x", *ARGS)
    outcome.assert_outcomes(errors=1)  # the model fixture's setup
    outcome.stdout.fnmatch_lines(["*cannot load --model=ehco:x*"])
