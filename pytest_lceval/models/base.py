"""The small interface every backend implements (callers type against ``Backend``; backends
subclass backend.BaseBackend), and the prompt rendering they share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..results.records import GenerateRequest, Generation, Prompt, Ranking, RankRequest
from .joined_count import Part


class Tokenizer(Protocol):
    """Token ids as the model under test sees them; task generators count and slice with it."""

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` with no special tokens added (for slicing corpora)."""
        ...

    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass(frozen=True)
class Renderer:
    """Turns a Prompt into the exact string the backend feeds, and counts its tokens.

    ``template`` maps user text to the templated string up to the assistant turn (None when the
    run uses no chat template). ``count`` returns the number of tokens the backend will feed for
    a rendered string, special tokens (BOS) included: the length budget is about that number.
    """

    template: Callable[[str], str] | None
    count: Callable[[str], int]
    fixed: bool = False
    """The server applies the template itself (a chat API), so a prompt cannot go without it."""
    count_joined: Callable[[str, str, Sequence[Part], tuple[int, int]], int | None] | None = None
    """``count`` of a rendered prompt from the parts its context was joined from, without
    tokenising it (``joined_count``); None, or a None answer, when that is not exact."""

    @property
    def uses_template(self) -> bool:
        return self.template is not None

    def without_template(self) -> Renderer:
        """The raw-prompt rendering with the same counting; itself when the template is fixed."""
        if self.fixed or self.template is None:
            return self
        return Renderer(None, self.count, count_joined=self.count_joined)

    def render(self, prompt: Prompt) -> str:
        """The raw prompt is the user text and its cue; a templated one opens the assistant turn
        after the user text, with only what the answer must continue (``Prompt.cue``)."""
        if self.template is None:
            return prompt.user + prompt.cue + prompt.answer_prefix
        return self.template(prompt.user) + prompt.answer_prefix

    def chat_source(self, prompt: Prompt) -> Prompt | None:
        """The untemplated prompt to pass along for chat servers, when a template is used."""
        return prompt if self.template else None


@runtime_checkable
class Backend(Protocol):
    """A model under test. Batched in, batched out, in order; greedy decoding."""

    spec: str
    """The spec the user gave (e.g. 'smollm2'); shown in reports."""
    tokenizer: Tokenizer
    renderer: Renderer
    context_window: int
    """Maximum prompt + generated tokens the model accepts."""

    @property
    def fingerprint(self) -> str:
        """Hash of weights, tokenizer, template, engine version and decoding settings: part of
        every store key, so a changed model never reuses stale answers (backend.BaseBackend
        builds it from ``identity()``)."""
        ...

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]: ...

    def rank(self, requests: Sequence[RankRequest]) -> list[Ranking]: ...

    def describe(self) -> dict[str, str]:
        """Short facts for the report header (model, device, dtype, engine...)."""
        ...


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Cut a generation before the first stop string (backends may overshoot by a few tokens)."""
    cut = len(text)
    for marker in stop:
        if marker:
            position = text.find(marker)
            if position != -1:
                cut = min(cut, position)
    return text[:cut]
