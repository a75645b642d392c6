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

from dataclasses import dataclass
from pathlib import Path

from ..run.data import DataSource
from ..tasks.base import BuildContext
from .base import Renderer
from .gguf_header import check_gguf_size
from .hf_text import HFText

USAGE = ("give a tokenizer folder (tokenizer.json or tokenizer.model, e.g. a download of "
         "meta-llama/Llama-2-7b-hf), a tokenizer.json file or a .gguf file")


class ReferenceTokenizerError(ValueError):
    """The path holds no tokenizer that transformers can load; the message says what to give."""


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

    def build_context(self, model_renderer: Renderer, data: DataSource,
                      seed: int) -> BuildContext:
        """Generators slice and count in the reference tokenizer; the prompt they render is
        the model's (its chat template), so the model is fed exactly the text counted here."""
        renderer = Renderer(model_renderer.template, self.text.count,
                            count_joined=self.text.count_joined)
        return BuildContext(self.text, renderer, data, seed)


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
