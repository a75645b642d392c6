"""Lengths in a named reference tokenizer (METHODS §1), for comparability across models.

HELMET fixed its lengths with Llama-2's tokenizer, so an "8k" prompt held the same text whatever
model read it. With ``--lceval-ref-tokenizer PATH`` the generators count and slice in that
tokenizer: a cell of 8k holds 8192 reference tokens (chat template and generation budget
included, as always) and every model reads the same text, in its own chat template. The model's
own count still decides whether a case fits: the evaluation counts each prompt in the model's
tokenizer, records both counts, and skips a cell whose model count exceeds the model's window.
Without the option, lengths are the model's own tokens (the default).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..foundation.data import DataError
from .base import Renderer
from .gguf_header import check_gguf_size, gguf_vocabulary
from .hf_text import HFText

USAGE = ("give a tokenizer folder (tokenizer.json or tokenizer.model, e.g. a download of "
         "meta-llama/Llama-2-7b-hf), a tokenizer.json file or a .gguf file")


LENGTH_RATIO = 2.0
"""Counts further apart than this are said (Llama-2 and a model of a larger vocabulary differ
by some 10-30%; a byte-level or a 300-token toy vocabulary by several times)."""


class ReferenceLengthWarning(UserWarning):
    """The reference tokenizer and the model count the same prompts far apart."""


class ReferenceTokenizerError(DataError):
    """The path holds no tokenizer that transformers can load; the message says what to give.
    Every cell would fail alike, so the first one stops the run (a DataError)."""


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")
"""What a tokenizer folder holds, one of them at least."""


def check_reference(path: Path) -> int | None:
    """At start-up, from the files alone (transformers is not imported): ``path`` can be a
    tokenizer, else ReferenceTokenizerError. Returns its vocabulary size, None when its files
    do not tell it cheaply (a sentencepiece tokenizer.model)."""
    if path.suffix == ".gguf" and path.is_file():
        vocabulary = gguf_vocabulary(path)
        if vocabulary is None:
            raise ReferenceTokenizerError(
                f"--lceval-ref-tokenizer {path}: this GGUF carries no tokenizer (no "
                f"tokenizer.ggml.tokens in its header); {USAGE}")
        return vocabulary
    if path.is_dir():
        if not any((path / name).is_file() for name in TOKENIZER_FILES):
            raise ReferenceTokenizerError(
                f"--lceval-ref-tokenizer {path}: the folder holds no tokenizer "
                f"({', '.join(TOKENIZER_FILES)}); {USAGE}")
        path = path / "tokenizer.json"
        if not path.is_file():
            return None
    elif path.suffix != ".json":
        raise ReferenceTokenizerError(
            f"--lceval-ref-tokenizer {path}: {path.name} is neither a folder, a .json nor a "
            f".gguf file; {USAGE}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        vocab = data["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReferenceTokenizerError(
            f"--lceval-ref-tokenizer {path}: not a tokenizer.json ({type(exc).__name__}: "
            f"{exc}); {USAGE}") from None
    added = {entry.get("id") for entry in data.get("added_tokens") or ()
             if isinstance(entry, dict)}
    ids = set(vocab.values()) if isinstance(vocab, dict) else set(range(len(vocab)))
    return len(ids | added)


def reference_header(path: Path | None) -> list[str]:
    """The header's line for --lceval-ref-tokenizer: what counts cell lengths."""
    if path is None:
        return []
    vocabulary = check_reference(path)
    size = f"a {vocabulary:,}-token vocabulary" if vocabulary else "vocabulary size not " \
        "in its files"
    return [f"lceval: lengths in reference tokens of {path} ({size}), not the model's own; "
            f"the model reads the same text, counted again in its tokenizer for its window"]


@dataclass(frozen=True)
class ReferenceTokenizer:
    """A loaded reference tokenizer and where it came from."""

    text: HFText
    """Counting and slicing; no chat template of its own (the model's template is used)."""
    path: Path

    @property
    def label(self) -> str:
        """What results and reports name as the length's tokenizer."""
        return f"ref:{self.path}"

    def far_from(self, model_counts: Sequence[int], reference_counts: Sequence[int]
                 ) -> str | None:
        """What to say when the model counts the same prompts in more than ``LENGTH_RATIO``
        times (or under 1/``LENGTH_RATIO`` of) the reference's tokens: a cell's length then
        says little of what the model reads. None when they are closer."""
        model, reference = sum(model_counts), sum(reference_counts)
        if not model or not reference or 1 / LENGTH_RATIO <= model / reference <= LENGTH_RATIO:
            return None
        return (f"--lceval-ref-tokenizer {self.path}: the model counts {model / reference:.2f}x "
                f"the reference's tokens on the same prompts (more than {LENGTH_RATIO:g}x "
                f"apart), so cell lengths are far from the model's; the results record its own "
                f"count (input_tokens_model_mean)")

    def renderer(self, model_renderer: Renderer) -> Renderer:
        """Generators slice and count in the reference tokenizer; the prompt they render is
        the model's (its chat template), so the model is fed exactly the text counted here."""
        return Renderer(model_renderer.template, self.text.count,
                        count_joined=self.text.count_joined)


def load_reference(path: Path) -> ReferenceTokenizer:
    """Load a folder, a tokenizer.json or a GGUF file with transformers (imported only now)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    try:
        if path.is_dir():
            tokenizer = AutoTokenizer.from_pretrained(str(path))
        elif path.suffix == ".gguf":
            check_gguf_size(path)
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        elif path.suffix == ".json":
            tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(path))
        else:
            raise ValueError(f"{path.name} is neither a folder, a .json nor a .gguf file")
    except (OSError, ValueError, KeyError) as exc:
        raise ReferenceTokenizerError(
            f"--lceval-ref-tokenizer {path}: no tokenizer could be loaded ({exc}); {USAGE}"
        ) from None
    return ReferenceTokenizer(HFText(tokenizer, "off"), path)
