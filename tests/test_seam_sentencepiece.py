"""The prefix/suffix seam of rank requests with a SentencePiece tokenizer that adds a dummy prefix
(as Llama-2's and Mistral's do): tokenised apart, the suffix would start with a '▁' token that the
joined prompt (what the reference code feeds) does not have; hf_text.suffix_ids removes it.

The tokenizer is trained here, offline, with the sentencepiece package on the package's essay
fixtures with Llama-2's settings: a dummy prefix, byte fallback, no normalisation, whitespace kept.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest

from pytest_lceval.benchmarks.task_haystack.data import available_tasks, load_task
from pytest_lceval.benchmarks.task_haystack.prompts import StreamSpec, lifelong, query, single_task
from pytest_lceval.foundation.data import FIXTURES
from pytest_lceval.models.hf_text import suffix_ids

spm = pytest.importorskip("sentencepiece")


class SentencePieceTokenizer:
    """The Tokenizer protocol over a SentencePieceProcessor."""

    def __init__(self, processor: object) -> None:
        self.processor = processor

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.processor.encode(text)  # type: ignore[attr-defined]
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self.processor.decode(list(ids))  # type: ignore[attr-defined]
        return text

    def pieces(self, text: str) -> list[str]:
        pieces: list[str] = self.processor.encode(text, out_type=str)  # type: ignore[attr-defined]
        return pieces


@pytest.fixture(scope="module")
def sentencepiece() -> SentencePieceTokenizer:
    text = "\n".join(path.read_text() for path in sorted((FIXTURES / "essays").glob("*.txt")))
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([line for line in text.splitlines() if line.strip()]),
        model_writer=model, vocab_size=400, model_type="bpe", byte_fallback=True,
        add_dummy_prefix=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, minloglevel=2)
    return SentencePieceTokenizer(spm.SentencePieceProcessor(model_proto=model.getvalue()))


def test_apart_the_suffix_gains_a_dummy_prefix_token(sentencepiece: SentencePieceTokenizer
                                                     ) -> None:
    prefix, suffix = "Classify the review.\nReview: a fine film\nAnswer: positive", \
        "\nReview: a dull film\nAnswer:"
    apart = sentencepiece.encode(prefix) + sentencepiece.encode(suffix)
    joined = sentencepiece.encode(prefix + suffix)
    assert apart != joined
    assert sentencepiece.pieces(suffix)[0] == "▁"  # the token the joined prompt lacks
    assert sentencepiece.encode(prefix) + suffix_ids(sentencepiece, prefix, suffix) == joined


def test_every_haystack_seam_reads_as_the_joined_prompt(sentencepiece: SentencePieceTokenizer
                                                        ) -> None:
    root = FIXTURES / "llicl_offline"
    stream = tuple(load_task(root, name) for name in available_tasks(root)[:4])
    spec = StreamSpec("recall", stream, resample=0, n_shot=1)
    for task in stream:
        for context in (single_task(task, 0, 1), lifelong(spec, task)):
            for row in task.test[:3]:
                suffix = context.head + query(task, row)
                assert (sentencepiece.encode(context.prefix)
                        + suffix_ids(sentencepiece, context.prefix, suffix)
                        == sentencepiece.encode(context.prefix + suffix))


class Words:
    """A toy tokenizer: one id per space-separated word, its length (so '' is a token too)."""

    def encode(self, text: str) -> list[int]:
        return [len(word) for word in text.split(" ")]

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join("x" * n for n in ids)


def test_suffix_ids_take_the_ids_past_the_tail_or_fall_back_to_the_suffix_alone() -> None:
    assert Words().encode(" ccc dddd") == [0, 3, 4]  # apart: an extra token at the seam
    assert suffix_ids(Words(), "a bb", " ccc dddd") == [3, 4]
    # 'bb' + 'b c' merges across the seam ('bbb'): the tail's ids are no prefix, so alone.
    assert suffix_ids(Words(), "a bb", "b c") == [1, 1]
    assert suffix_ids(Words(), "", "ccc dddd") == [3, 4]
