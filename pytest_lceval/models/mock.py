"""Deterministic fake models for the plugin's own tests: fast, exact, and able to fail on purpose.

Spec: ``mock:NAME?param=value&...``

- ``mock:grep`` answers recall questions by looking the queried keys up in the prompt, like a
  perfect retriever. ``miss=25-75`` makes it forget keys whose position lies in that percent
  range of the prompt (a lost-in-the-middle model); ``window=N`` sets the context window.
- ``mock:constant`` always answers ``text`` (default "I do not know").

Rank requests score options by a hash of (prompt, option): deterministic, not learnable.
The tokenizer splits on whitespace boundaries (a token is a word with its leading space).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from urllib.parse import parse_qsl

from ..records import GenerateRequest, Generation, Ranking, RankRequest, stable_hash
from .base import Renderer, cut_at_stop
from .registry import LoadOptions

_PIECE = re.compile(r"\s*\S+|\s+$")
_NEEDLE = re.compile(r"for ([\w\-]+) is:? ([\w\-]+)")
_JSON_PAIR = re.compile(r'"([\w\-]+)": "([\w\-]+)"')
_QUESTION_SPAN = 400
"""How many characters at the end of the prompt hold the question that names the keys (at most
half of the prompt)."""


class WordTokenizer:
    """Whitespace-boundary tokenizer; ids are assigned on first sight (stable within a process)."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in _PIECE.findall(text):
            if piece not in self._ids:
                self._ids[piece] = len(self._pieces)
                self._pieces.append(piece)
            ids.append(self._ids[piece])
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._pieces[i] for i in ids)


class MockBackend:
    """See the module docstring for the behaviours."""

    def __init__(self, name: str, params: dict[str, str], options: LoadOptions) -> None:
        if name not in ("grep", "constant"):
            raise ValueError(f"unknown mock {name!r}: use mock:grep or mock:constant")
        self.name = name
        self.params = params
        self.spec = "mock:" + name + ("?" + "&".join(f"{k}={v}" for k, v in params.items())
                                      if params else "")
        self.tokenizer = WordTokenizer()
        template = (lambda user: f"<user>\n{user}\n<assistant>\n") \
            if options.chat_template == "on" else None
        self.renderer = Renderer(template, lambda text: len(self.tokenizer.encode(text)))
        self.context_window = int(params.get("window", 8192))
        self.fingerprint = stable_hash({"mock": self.spec, "template": template is not None})
        low, _, high = params.get("miss", "").partition("-")
        self._miss = (float(low), float(high)) if high else None

    def describe(self) -> dict[str, str]:
        return {"backend": "mock", "model": self.spec, "window": str(self.context_window)}

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        return [self._generate(request) for request in requests]

    def rank(self, requests: Sequence[RankRequest]) -> list[Ranking]:
        results = []
        for request in requests:
            prompt = request.prefix + request.suffix
            scores = tuple(
                -1.0 - (zlib.crc32((prompt + "\x00" + option).encode()) % 1000) / 100.0
                for option in request.options
            )
            results.append(Ranking(scores, True, self.renderer.count(prompt)))
        return results

    def _generate(self, request: GenerateRequest) -> Generation:
        prompt = request.prompt
        if self.name == "constant":
            text = self.params.get("text", "I do not know")
        else:
            text = ", ".join(self._lookup(prompt))
        text = cut_at_stop(text, request.stop)
        return Generation(text, self.renderer.count(prompt), len(self.tokenizer.encode(text)))

    def _lookup(self, prompt: str) -> list[str]:
        """Values of every key that the question (the prompt's tail) names, in prompt order."""
        span = min(_QUESTION_SPAN, len(prompt) // 2)
        body, question = prompt[:-span], prompt[-span:]
        values = []
        for pattern in (_NEEDLE, _JSON_PAIR):
            for match in pattern.finditer(body):
                key, value = match.group(1), match.group(2)
                position = 100.0 * match.start() / max(len(prompt), 1)
                if key in question and not self._forgets(position) and value not in values:
                    values.append(value)
        return values

    def _forgets(self, position: float) -> bool:
        return self._miss is not None and self._miss[0] <= position <= self._miss[1]


def load_mock(rest: str, options: LoadOptions) -> MockBackend:
    name, _, query = rest.partition("?")
    return MockBackend(name, dict(parse_qsl(query)), options)
