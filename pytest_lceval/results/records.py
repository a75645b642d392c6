"""Typed records that flow between tasks, backends, the store and the reports.

Every record is a frozen dataclass so that it can be hashed into a store key and
compared across workers; nothing here imports torch or any backend.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any


def stable_hash(payload: Any) -> str:
    """SHA-256 of a JSON rendering with sorted keys: identical on every machine and worker."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Prompt:
    """What the model reads, before any chat template is applied."""

    user: str
    """The whole user-side text: instructions, demonstrations, context and question."""
    answer_prefix: str = ""
    """Text the answer must continue in every rendering, a chat template's assistant turn
    included (a judge's prefilled JSON opening); may be empty."""
    cue: str = ""
    """What a raw prompt ends with after the user text: HELMET's answer prefix with the
    separator before it (``"\nAnswer:"``, its ``prompt_template`` minus ``user_template``).
    Under a chat template it is left out, since HELMET starts the assistant turn empty (its
    ``tokenize`` never continues a final message, and its API models get the user message
    alone)."""


@dataclass(frozen=True)
class GenerateRequest:
    """Greedy continuation of a fully rendered prompt."""

    prompt: str
    """The rendered prompt, chat template already applied when the run uses one."""
    max_new_tokens: int
    """Generation budget; counted in the cell's length budget."""
    stop: tuple[str, ...] = ()
    """Strings that end the answer; the answer is cut before the first of them."""
    chat: Prompt | None = None
    """The untemplated prompt, set when the run uses a chat template, for chat-style servers."""

    def key(self) -> str:
        return stable_hash({"kind": "generate", **asdict(self)})


RANK_RULES = 3
"""Part of every rank request's store key: bump when how backends read or score a rank request
changes, so no stored answer made under the old rules is reused. 2: the suffix is tokenised in
the prefix's context (hf_text.suffix_ids), and an option outside a server's top k is unscored
(no prediction when none is in it) instead of sharing a floor score. 3: the HF backend reads
the top 100 as the reference's vLLM call does (its full-vocabulary ranking, --lceval-rank full,
is keyed by the backend's identity)."""


@dataclass(frozen=True)
class RankRequest:
    """Next-token log-probabilities of each option's first token after ``prefix + suffix``.

    ``prefix`` is shared by many requests (a Task Haystack stream); backends that can keep
    its KV cache compute it once for all requests that share it.
    """

    prefix: str
    suffix: str
    options: tuple[str, ...]

    def key(self) -> str:
        return stable_hash({"kind": "rank", "rules": RANK_RULES, **asdict(self)})


@dataclass(frozen=True)
class Generation:
    """A backend's answer to a GenerateRequest."""

    text: str
    prompt_tokens: int
    output_tokens: int
    seconds: float = 0.0
    """Model time for this answer (batch time divided among the batch)."""


@dataclass(frozen=True)
class Ranking:
    """A backend's answer to a RankRequest."""

    logprobs: tuple[float | None, ...]
    """Log-probability of each option's first token, in the request's option order; None for an
    option that could not be scored (outside a server's top-k, or not the option a generated
    answer matched)."""
    top_in_options: bool
    """Whether the most likely next token over the whole vocabulary is one of the options."""
    prompt_tokens: int
    seconds: float = 0.0
    method: str = "logprobs"
    """How the scores were obtained: 'logprobs', or a fallback that a report must name."""

    @property
    def choice(self) -> int | None:
        """The best-scored option; None ("no prediction") when no option could be scored. A
        caller counts that as wrong, as the reference does (its NO_PREDICTION label), and never
        as a guess of option 0, which would pass for a real answer."""
        scored = [(i, value) for i, value in enumerate(self.logprobs) if value is not None]
        return max(scored, key=lambda pair: pair[1])[0] if scored else None


@dataclass(frozen=True)
class Case:
    """One prompt with its gold answers, as a task generator built it."""

    index: int
    """Sample index inside the cell; with the cell and seed it identifies the case."""
    prompt: str
    """The rendered prompt sent to the model."""
    gold: tuple[str, ...]
    """Gold strings; how they are compared is the task's metric."""
    prompt_tokens: int
    """Measured length of ``prompt`` in the tokenizer lengths are counted with: the model's, or
    the reference tokenizer's (the evaluation then records the model's count beside it)."""
    depth: float | None = None
    """Achieved depth of the key information, percent of the context (None if not defined)."""
    max_new_tokens: int = 32
    stop: tuple[str, ...] = ()
    chat: Prompt | None = None
    """The untemplated prompt when a chat template was applied (see GenerateRequest.chat)."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Free-form extras a report may show (e.g. the query key)."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus generation budget: the quantity that a cell's length bounds."""
        return self.prompt_tokens + self.max_new_tokens

    def request(self) -> GenerateRequest:
        return GenerateRequest(self.prompt, self.max_new_tokens, self.stop, self.chat)
