"""The text side of a local HF model without its weights: tokenizer, chat template, counting.

A client of a server that runs the model (``openai:`` with ``--lceval-tokenizer``) and the vLLM
engine both need what the in-process HF backend has, minus torch: the ids a rendered prompt
becomes, the template, and the first token of each rank option in context. The rules are those of
``hf.py`` (the BOS rule and the option rule are stated there), so a prompt is counted the same
whichever backend answers it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from .base import Renderer, Tokenizer
from .chat_probe import PROBE, refusal
from .joined_count import JoinedCounter, Part, rule_of
from .model_args import scales_rope

CHAT_TEMPLATE_CHOICES = ("auto", "on", "off")
LONG_PROMPT = 16_384
"""Characters (~4k tokens) from which a prompt is counted from its paragraphs."""


class HFText:
    """Tokenizer protocol, renderer and option tokens of a transformers tokenizer."""

    def __init__(self, tokenizer: Any, chat_template: str = "auto") -> None:
        self.hf = tokenizer
        self._bos: str | None = tokenizer.bos_token
        self.chat_template = _chat_template(tokenizer, chat_template)
        rust = getattr(tokenizer, "backend_tokenizer", None)
        self._rust = rust if hasattr(rust, "encode_batch_fast") else None
        """The Rust tokenizer of a fast tokenizer whose version has ``encode_batch_fast``."""
        self.renderer = Renderer(self.template if self.chat_template else None, self.count,
                                 count_joined=self.count_joined)
        if self.chat_template:
            self._probe_template()

    # -- Tokenizer protocol ----------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        return self._ids(text, add_special_tokens=False)

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` of each text in one call: the Rust tokenizer's batch runs on every core,
        and a haystack of short items (needles, JSON pairs) is thousands of them."""
        return self._batch(texts, add_special_tokens=False)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """The length of each text's ``encode``, without making the lists of ids."""
        encodings = self._fast(texts, add_special_tokens=False)
        if encodings is None:
            return [len(ids) for ids in self.encode_many(texts)]
        return list(map(len, encodings))

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self.hf.decode(list(ids), clean_up_tokenization_spaces=False)
        return text

    def offsets(self, text: str) -> list[tuple[int, int]] | None:
        """The character span of each token of ``text`` (a fast tokenizer's offset mapping;
        None for a slow one), where HELMET cuts a context that overflows
        (``helmet.pipeline.truncate_context``)."""
        if not getattr(self.hf, "is_fast", False):
            return None
        spans = self.hf(text, add_special_tokens=False, return_offsets_mapping=True)
        return [(int(start), int(end)) for start, end in spans["offset_mapping"]]

    # -- prompts ---------------------------------------------------------------------------------

    def template(self, user: str) -> str:
        text: str = self.hf.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True)
        return text

    def _probe_template(self) -> None:
        """Render the template once on a plain user message (``chat_probe``): one that raises
        fails the load with its own message, not every prompt after it."""
        try:
            self.template(PROBE)
        except Exception as exc:  # noqa: BLE001 - jinja2's TemplateError, or what it wraps
            raise refusal(str(self.hf.name_or_path), str(exc)) from None

    def prompt_ids(self, text: str) -> list[int]:
        """The ids a model reads for a rendered prompt: the tokenizer's special tokens, unless the
        text already starts with the BOS text (a chat template wrote it), so never two BOS."""
        adds = not (self._bos is not None and self._bos != "" and text.startswith(self._bos))
        return self._ids(text, add_special_tokens=adds)

    def count(self, text: str) -> int:
        """Tokens the model reads for a rendered prompt. A long one is counted from its
        paragraphs' counts where that is exact (``joined_count``): fitting a HELMET or
        100-LongBench case counts prompts that share most of their passages."""
        if len(text) >= LONG_PROMPT and self.joined is not None:
            counted = self.joined.count_paragraphs(text)
            if counted is not None:
                return counted
        return len(self.prompt_ids(text))

    @cached_property
    def joined(self) -> JoinedCounter | None:
        """Counts a long prompt from its parts' counts, when this tokenizer's counts add up;
        worked out at the first prompt so counted (Gemma's vocabulary takes 0.2 s to read)."""
        rule = rule_of(self._rust) if self._rust is not None else None
        return JoinedCounter(rule, self.encode, self.count, self.count_many) if rule else None

    def count_joined(self, rendered: str, context: str, parts: Sequence[Part],
                     trim: tuple[int, int]) -> int | None:
        """``count(rendered)`` from the parts of the ``context`` it holds; None when this
        tokenizer's counts cannot be shown to add up (see joined_count)."""
        joined = self.joined
        return joined.count(rendered, context, parts, trim) if joined is not None else None

    def _ids(self, text: str, add_special_tokens: bool) -> list[int]:
        return self._batch([text], add_special_tokens)[0]

    def _batch(self, texts: Sequence[str], add_special_tokens: bool) -> list[list[int]]:
        encodings = self._fast(texts, add_special_tokens)
        if encodings is None:
            return [self.hf(text, add_special_tokens=add_special_tokens)["input_ids"]
                    for text in texts]
        return [encoding.ids for encoding in encodings]

    def _fast(self, texts: Sequence[str], add_special_tokens: bool) -> list[Any] | None:
        """A fast tokenizer's own ``encode_batch_fast`` gives the same ids as calling the
        tokenizer without the character offsets: half the time on a 128k prompt and a third of
        it for the many short pieces a haystack is built from. None while the Rust tokenizer
        carries truncation or padding settings, which the tokenizer's call resets and this one
        would obey."""
        rust = self._rust
        if rust is None or rust.truncation or rust.padding:
            return None
        encodings: list[Any] = rust.encode_batch_fast(list(texts),
                                                      add_special_tokens=add_special_tokens)
        return encodings

    def option_ids(self, prompt: str, options: Sequence[str]) -> list[int]:
        """Each option's first token as it would follow ``prompt`` (see first_token_ids)."""
        return first_token_ids(self, prompt, options)

    def identity(self) -> dict[str, Any]:
        """What the fingerprint needs to tell two tokenizers (and templates) apart."""
        vocab = self.hf.get_vocab()
        digest = hashlib.sha256("\n".join(sorted(f"{k}\t{v}" for k, v in vocab.items()))
                                .encode("utf-8")).hexdigest()
        return {"tokenizer": type(self.hf).__name__, "vocab": digest,
                "special": self.hf.special_tokens_map, "chat_template": self.chat_template}

    @property
    def label(self) -> str:
        return f"hf:{self.hf.name_or_path}"


def first_token_ids(tokenizer: Tokenizer, prompt: str, options: Sequence[str]) -> list[int]:
    """Each option's first token in context (METHODS §3), for any tokenizer.

    The option is tokenised after the prompt's tail and a space (none when the tail ends in
    whitespace or the option starts with it); its first token is the first id past the tail's
    own ids. Options sharing that token cannot be told apart: a ValueError names them.
    """
    tail = prompt[-200:]
    tail_ids = tokenizer.encode(tail)
    firsts = []
    for option in options:
        joiner = "" if tail[-1:].isspace() or option[:1].isspace() or not tail else " "
        ids = tokenizer.encode(tail + joiner + option)
        if ids[: len(tail_ids)] != tail_ids or len(ids) == len(tail_ids):
            raise ValueError(f"option {option!r} does not start a new token after the prompt's "
                             f"end {tail[-30:]!r}; end the prompt without trailing whitespace")
        firsts.append(ids[len(tail_ids)])
    if len(set(firsts)) < len(firsts):
        pieces = ", ".join(f"{option!r} -> {tokenizer.decode([token])!r}"
                           for option, token in zip(options, firsts, strict=True))
        raise ValueError(f"options share a first token, so ranking cannot tell them apart: "
                         f"{pieces}")
    return firsts


def suffix_ids(tokenizer: Tokenizer, prefix: str, suffix: str) -> list[int]:
    """The ids of ``suffix`` as it follows ``prefix`` in the joined prompt, for rank requests
    whose prefix is computed once and whose suffixes are tokenised apart.

    A SentencePiece tokenizer with a dummy prefix (Llama-2's, Mistral's) starts every separate
    encoding with '▁', so ``encode(suffix)`` would give the model a token that the joined
    prompt (what the reference code feeds) does not have at the seam. Tokenising the prefix's
    tail with the suffix and keeping the ids past the tail's own removes it; for tokenizers
    without a dummy prefix this is ``encode(suffix)``. When the tail's ids are not a prefix of
    the joined ids (a merge across the seam) the suffix is tokenised alone."""
    if not prefix or not suffix:
        return tokenizer.encode(suffix)
    tail = prefix[-200:]
    tail_ids = tokenizer.encode(tail)
    joined = tokenizer.encode(tail + suffix)
    if joined[: len(tail_ids)] == tail_ids:
        return joined[len(tail_ids):]
    return tokenizer.encode(suffix)


def load_hf_text(source: str, chat_template: str = "auto") -> HFText:
    """The tokenizer of ``source`` (folder or hub id); imports transformers only now."""
    from transformers import AutoTokenizer

    return HFText(AutoTokenizer.from_pretrained(source), chat_template)


def config_window(source: str) -> int | None:
    """max_position_embeddings from a local model folder's config.json, if there is one."""
    window = _text_config(source).get("max_position_embeddings")
    return int(window) if window else None


def config_rope_scaled(source: str) -> bool:
    """Whether a local model folder's config.json scales RoPE (``rope_scaling``, or a
    ``rope_parameters`` type other than default, per layer type too)."""
    return scales_rope(_text_config(source))


def _text_config(source: str) -> dict[str, Any]:
    """A local model folder's config.json (its text model's part); {} when there is none."""
    config = Path(source) / "config.json"
    if not config.is_file():
        return {}
    data = json.loads(config.read_text())
    text: dict[str, Any] = data.get("text_config", data)
    return text


def _chat_template(tokenizer: Any, choice: str) -> str | None:
    """The template string in use, or None; 'on' without one is an error, not a silent 'off'."""
    if choice not in CHAT_TEMPLATE_CHOICES:
        raise ValueError(f"chat_template must be auto, on or off, not {choice!r}")
    template: str | None = getattr(tokenizer, "chat_template", None)
    if choice == "on" and not template:
        raise ValueError(f"chat_template=on, but the tokenizer of {tokenizer.name_or_path} has "
                         "no chat template; use chat_template=off (or auto)")
    return template if choice != "off" else None
