"""Deterministic fake models for the plugin's own tests: fast, exact, and able to fail on purpose.

Spec: ``mock:NAME?param=value&...``

- ``mock:grep`` answers recall questions by looking the queried keys up in the prompt, like a
  perfect retriever. ``miss=25-75`` makes it forget keys whose position lies in that percent
  range of the prompt (a lost-in-the-middle model); ``window=N`` sets the context window
  (``--lceval-window`` overrides it); ``cliff=N&after=F`` makes it answer, for prompts
  longer than N tokens, only a share F of them (those whose hash falls in it) and nothing for
  the rest: a model whose effective context length is N (scores 1.0 up to N, about F beyond).
  A value outside its form (``miss=50``, ``miss=60-40``, ``after=2``) is refused at start-up.
- ``mock:constant`` always answers ``text`` (default "I do not know").
- ``mock:judge`` is a judge model (``mock_judge.py``).
- ``mock:icl`` is an in-context learner for rank requests (Task Haystack): it predicts the label
  of the demonstration most similar to the test input (word overlap), looking only at
  demonstrations written in the test input's own template (same field names). ``reach=N`` makes
  it blind to demonstrations that end more than N characters before the end of the prompt (a
  model that forgets the distant past); with no visible demonstration it falls back to the hash
  score and reports its top token as out of the options. It generates like ``mock:grep``.

Other mocks rank options by a hash of (prompt, option): deterministic, not learnable.
The tokenizer splits on whitespace boundaries (a token is a word with its leading space).
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from typing import Any

from ..results.records import GenerateRequest, Generation, Ranking, RankRequest
from .backend import BaseBackend
from .base import Renderer, cut_at_stop
from .mock_judge import JUDGE_MODES, judge_reply
from .options import LoadOptions
from .spec_params import spec_params

_PIECE = re.compile(r"\s*\S+|\s+$")
_NEEDLE = re.compile(r"for ([\w\-]+) is:? ([\w\-]+)")
_JSON_PAIR = re.compile(r'"([\w\-]+)": "([\w\-]+)"')
PARAMETERS = ("window", "miss", "cliff", "after", "reach", "text", "mode")
"""The ``?key=value`` parameters the mocks read (see the module docstring)."""
MOCK_VERSION = 2
"""Part of the fingerprint: bump it when a mock's answers change, so stores never serve the old
behaviour's answers."""


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


class MockBackend(BaseBackend):
    """See the module docstring for the behaviours."""

    def __init__(self, name: str, params: dict[str, str], options: LoadOptions) -> None:
        if name not in ("grep", "constant", "icl", "judge"):
            raise ValueError(f"unknown mock {name!r}: use mock:grep, mock:constant, mock:icl "
                             f"or mock:judge")
        if name == "judge" and params.get("mode", "") not in JUDGE_MODES:
            raise ValueError(f"unknown mock:judge mode {params['mode']!r}: use "
                             f"{', '.join(m for m in JUDGE_MODES if m)} or none")
        self.name = name
        self.params = params
        tokenizer = WordTokenizer()
        template = (lambda user: f"<user>\n{user}\n<assistant>\n") \
            if options.chat_template == "on" else None
        super().__init__(
            "mock:" + name + ("?" + "&".join(f"{k}={v}" for k, v in params.items())
                              if params else ""),
            tokenizer, Renderer(template, lambda text: len(tokenizer.encode(text))),
            options.window or _count(params, "window", 1) or 8192)
        self._miss = _percent_range(params["miss"]) if "miss" in params else None
        self._reach = _count(params, "reach", 0)
        self._cliff = _count(params, "cliff", 0)
        self._after = _share(params.get("after", "0"))

    def identity(self) -> dict[str, Any]:
        return {"mock": self.spec, "version": MOCK_VERSION,
                "template": self.renderer.uses_template}

    def describe(self) -> dict[str, str]:
        return {"backend": "mock", "model": self.spec, "window": str(self.context_window)}

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        return [self._generate(request) for request in requests]

    def rank(self, requests: Sequence[RankRequest]) -> list[Ranking]:
        results = []
        for request in requests:
            prompt = request.prefix + request.suffix
            scores = tuple(_hash_score(prompt, option) for option in request.options)
            learned = self._in_context(prompt, request.options) if self.name == "icl" else None
            if learned is not None:
                scores = tuple(a + b / 1000.0 for a, b in zip(learned, scores, strict=True))
            top_in_options = self.name != "icl" or learned is not None
            results.append(Ranking(scores, top_in_options, self.renderer.count(prompt)))
        return results

    def _in_context(self, prompt: str, options: Sequence[str]) -> tuple[float, ...] | None:
        """Best word overlap of the test input with each option's visible demonstrations,
        or None when no demonstration of this template is visible."""
        lines = prompt.rstrip().split("\n")
        if len(lines) < 2 or not lines[-1].endswith(":") or ": " not in lines[-2]:
            return None
        answer_field = lines[-1][:-1]
        input_field, _, text = lines[-2].partition(": ")
        body = prompt[: prompt.rstrip().rfind(lines[-2])]
        pattern = re.compile(rf"^{re.escape(input_field)}: (.*)\n{re.escape(answer_field)}: (.*)$",
                             re.MULTILINE)
        horizon = len(prompt) - self._reach if self._reach is not None else 0
        best = dict.fromkeys(options, -2.0)  # log-probability-like: overlap - 1, in [-1, 0]
        seen = False
        words = set(text.lower().split())
        for match in pattern.finditer(body):
            if match.end() < horizon or match.group(2) not in best:
                continue
            seen = True
            other = set(match.group(1).lower().split())
            overlap = len(words & other) / max(len(words | other), 1)
            best[match.group(2)] = max(best[match.group(2)], overlap - 1.0)
        return tuple(best[option] for option in options) if seen else None

    def _generate(self, request: GenerateRequest) -> Generation:
        prompt = request.prompt
        if self.name == "constant":
            text = self.params.get("text", "I do not know")
        elif self.name == "judge":
            text = judge_reply(request.chat.user if request.chat else prompt,
                               self.params.get("mode", ""))
        elif self._beyond_cliff(prompt):
            text = ""
        else:
            text = ", ".join(self._lookup(prompt))
        text = cut_at_stop(text, request.stop)
        return Generation(text, self.renderer.count(prompt), len(self.tokenizer.encode(text)))

    def _lookup(self, prompt: str) -> list[str]:
        """Values of every key that the question names, in prompt order; the question is the
        text after the last key-value item."""
        items = sorted((match for pattern in (_NEEDLE, _JSON_PAIR)
                        for match in pattern.finditer(prompt)), key=lambda m: m.start())
        question = prompt[items[-1].end():] if items else prompt
        values = []
        for match in items:
            key, value = match.group(1), match.group(2)
            position = 100.0 * match.start() / max(len(prompt), 1)
            if key in question and not self._forgets(position) and value not in values:
                values.append(value)
        return values

    def _beyond_cliff(self, prompt: str) -> bool:
        """Past ``cliff`` tokens, every prompt but a share ``after`` of them (by hash) goes
        unanswered."""
        if self._cliff is None or self.renderer.count(prompt) <= self._cliff:
            return False
        return zlib.crc32(prompt.encode("utf-8")) % 1000 >= 1000 * self._after

    def _forgets(self, position: float) -> bool:
        return self._miss is not None and self._miss[0] <= position <= self._miss[1]


def _count(params: dict[str, str], key: str, least: int) -> int | None:
    """A whole-number parameter of at least ``least``; None when not given."""
    if key not in params:
        return None
    text = params[key]
    if not text.isdigit() or int(text) < least:
        raise ValueError(f"{key}={text!r} is not a whole number >= {least}: write e.g. "
                         f"{key}=512")
    return int(text)


def _share(text: str) -> float:
    """``after=F``: a share 0..1 of the prompts."""
    try:
        share = float(text)
    except ValueError:
        share = math.nan
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"after={text!r} is not a share of the prompts: write 0..1, e.g. "
                         f"after=0.5")
    return share


def _percent_range(text: str) -> tuple[float, float]:
    """``miss=LOW-HIGH``: where in the prompt, in percent, keys are forgotten. A single number,
    a reversed range or a word used to forget nothing, and the run passed."""
    low, sep, high = text.partition("-")
    try:
        bounds = (float(low), float(high)) if sep else (math.nan, math.nan)
    except ValueError:
        bounds = (math.nan, math.nan)
    if not 0.0 <= bounds[0] <= bounds[1] <= 100.0:
        raise ValueError(f"miss={text!r} is not a range of the prompt in percent: write "
                         f"miss=LOW-HIGH with 0 <= LOW <= HIGH <= 100, e.g. miss=25-75")
    return bounds


def _hash_score(prompt: str, option: str) -> float:
    return -1.0 - (zlib.crc32((prompt + "\x00" + option).encode()) % 1000) / 100.0


def load_mock(rest: str, options: LoadOptions) -> MockBackend:
    name, _, query = rest.partition("?")
    return MockBackend(name, spec_params(query, PARAMETERS, "mock:"), options)
