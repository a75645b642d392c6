"""Natural Questions (open) with the one gold Wikipedia passage of each question: the oracle file
of "Lost in the Middle" (nelson-liu/lost-in-the-middle, ``qa_data/nq-open-oracle.jsonl.gz``),
from which the RAG and cite substitutes are built."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ...foundation.data import DataError, read_jsonl
from .passages import Doc

NQ_ORACLE = "nq_oracle"
NQ_ORACLE_FILE = "nq-open-oracle.jsonl.gz"


@dataclass(frozen=True)
class OracleRow:
    question: str
    answers: tuple[str, ...]
    gold: Doc


@cache
def read_oracle(path: Path) -> tuple[OracleRow, ...]:
    """The oracle file's questions with their one gold passage; raises DataError."""
    rows = []
    for number, row in enumerate(read_jsonl(path, ("question", "answers", "ctxs")), start=1):
        try:
            gold = next(ctx for ctx in row["ctxs"] if ctx.get("isgold"))
            rows.append(OracleRow(row["question"], tuple(row["answers"]),
                                  Doc(gold["title"], gold["text"])))
        except (KeyError, TypeError, AttributeError, StopIteration):
            raise DataError(f"{path} record {number} is not a lost-in-the-middle oracle record "
                            f"(ctxs with one isgold passage, with title and text)") from None
    if not rows:
        raise DataError(f"{path} holds no questions")
    return tuple(rows)
