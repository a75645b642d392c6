"""Questions and documents for the cite tasks: HELMET's ALCE files, or the NQ-oracle substitute.

HELMET reads ALCE's released files (``data/alce/asqa_eval_gtr_top2000.json`` and
``qampari_eval_gtr_top2000.json``, configs/cite.yaml): a JSON list of questions, each with its
GTR-retrieved ``docs`` (``title``, ``text``) in retrieval order and its short answers (ASQA:
``qa_pairs[].short_answers``, one list per reading of the question; QAMPARI: ``answers``, one
alias list per answer). The instruction, templates and demonstrations are HELMET's prompt files
(``prompts/asqa_revised.json`` and ``prompts/qampari_revised.json`` in its repository), read from
the same ``alce/`` folder: the project ships no copy of them.

Where the user's data has no ``alce/`` folder, the substitute is Natural Questions with its gold
Wikipedia passage (``nq_oracle/``): the distractors are other questions' gold passages that hold
none of the answers, in a random order fixed per case, and the gold passage sits at a fraction of
the documents drawn per case, so it keeps its relative place at every length. Its prompt is
HELMET's format (instruction and templates below) with demonstrations built the same way from
questions held out of the test questions, each answer citing its gold document.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

from ...foundation.data import DataError, DataSource
from ...tasks.metrics import normalize_answer
from .cite_metrics import Document
from .nq_oracle import NQ_ORACLE, NQ_ORACLE_FILE, read_oracle

ALCE_FOLDER = "alce"
SUBSTITUTE = f"substitute:{NQ_ORACLE}"
DEMO_POOL = 200
"""Substitute questions held out of the test questions, for demonstrations."""
DEMOS = 4
"""Demonstrations per substitute prompt file, as HELMET's files hold; a case draws two."""
DEMO_DOCUMENTS = 5
DOC_PROMPT = "Document [{ID}](Title: {title}): {text}"
"""HELMET's document template, shared by both of its ALCE prompt files."""
CITE_RULES = ("When citing a document, surround its ID with square brackets, such as [x] to cite "
              "document x.")
SUBSTITUTE_FORMATS: dict[str, tuple[str, str]] = {
    "asqa": (
        "Instruction: Write an accurate, engaging, and concise answer for the given question "
        "using only the provided search results (some of which might be irrelevant) and cite "
        "them properly. Use an unbiased and journalistic tone. Always cite for any factual "
        f"claim. {CITE_RULES} To cite multiple documents, simply concatenate the citation "
        "markers; for example, use [x][y][z] to cite the documents with ID x, y, and z. Cite at "
        "least one document and at most three documents in each sentence. If multiple documents "
        "support the sentence, only cite a minimum sufficient subset of the documents.",
        "{instruction}\n\nQuestion: {question}\n\n{context}\n\nAnswer: {answer}"),
    "qampari": (
        "Instruction: Provide a list of accurate answers for the given question using only the "
        "provided search results (some of which might be irrelevant) and cite them properly. "
        f"Always cite one and only one document for each answer. {CITE_RULES} Separate answers "
        "by commas. For questions that have more than 5 answers, write at least 5 answers.",
        "{instruction}\n\nQuestion: {question}\n\n{context}\nAnswer: {answer}"),
}
"""HELMET's instruction and demonstration template per kind, for the substitute's prompts."""


@dataclass(frozen=True)
class Question:
    question: str
    readings: tuple[tuple[str, ...], ...]
    """Short answers: one alias tuple per reading (ASQA) or per listed answer (QAMPARI)."""
    documents: tuple[Document, ...] = ()
    """Retrieved documents in retrieval order (ALCE); empty for the substitute."""


@dataclass(frozen=True)
class Demos:
    """One HELMET prompt file: the instruction, the templates and the demonstrations."""

    instruction: str
    demo_prompt: str
    doc_prompt: str
    demos: tuple[dict[str, Any], ...]

    def document(self, number: int, document: Document) -> str:
        return self.doc_prompt.format(ID=number, title=document.title, text=document.text)

    def context(self, documents: Sequence[Document]) -> str:
        return "\n\n".join(self.document(i + 1, doc) for i, doc in enumerate(documents))

    def demonstration(self, demo: dict[str, Any]) -> str:
        documents = [Document(doc["title"], doc["text"]) for doc in demo["docs"]]
        return self.demo_prompt.format(instruction=self.instruction, question=demo["question"],
                                       context=self.context(documents), answer=demo["answer"])


@cache
def load_demos(path: Path) -> Demos:
    """HELMET's prompt file at ``path`` (its ``prompts/asqa_revised.json``, say)."""
    raw = _read_json(path)
    try:
        return Demos(raw["instruction"], raw["demo_prompt"], raw["doc_prompt"],
                     tuple(raw["demos"]))
    except (KeyError, TypeError) as exc:
        raise DataError(f"{path} lacks {exc}: it must be HELMET's prompt file "
                        f"(prompts/*_revised.json in its repository)") from None


def substitute_demos(kind: str, pool: NQPool, held_out: Sequence[int], seed: int) -> Demos:
    """A prompt file in HELMET's format for the substitute: its instruction and templates, and
    demonstrations from held-out questions, each with its gold document among screened
    distractors and an answer citing it."""
    instruction, demo_prompt = SUBSTITUTE_FORMATS[kind]
    rng = random.Random(seed)
    demos = []
    for index in rng.sample(list(held_out), DEMOS):
        gold, others = pool.documents(rng, index)
        docs = others[:DEMO_DOCUMENTS - 1]
        docs.insert(rng.randrange(len(docs) + 1), gold)
        answer = pool.questions[index].readings[0][0]
        demos.append({"question": pool.questions[index].question,
                      "answer": f"{answer} [{docs.index(gold) + 1}].",
                      "docs": [{"title": doc.title, "text": doc.text} for doc in docs]})
    return Demos(instruction, demo_prompt, DOC_PROMPT, tuple(demos))


@cache
def load_alce(path: Path, kind: str) -> tuple[Question, ...]:
    """ALCE's eval file for ``kind`` ('asqa' or 'qampari'); raises DataError naming the record."""
    raw = _read_json(path)
    if not isinstance(raw, list) or not raw:
        raise DataError(f"{path} must be a non-empty JSON list of questions (ALCE's format)")
    return tuple(_alce_question(path, number, row, kind) for number, row in enumerate(raw))


def _alce_question(path: Path, number: int, row: Any, kind: str) -> Question:
    try:
        if kind == "asqa":
            readings = [pair["short_answers"] for pair in row["qa_pairs"]]
        else:
            readings = row["answers"]
        documents = tuple(Document(doc["title"], doc["text"]) for doc in row["docs"])
        question = row["question"]
    except (KeyError, TypeError) as exc:
        raise DataError(f"{path} record {number} lacks {exc}: ALCE's {kind} records need "
                        f"'question', 'docs' [{{'title', 'text'}}] and "
                        f"{'qa_pairs[].short_answers' if kind == 'asqa' else 'answers'}") from None
    readings = [tuple(answers) for answers in readings if answers]
    if not readings or not documents:
        raise DataError(f"{path} record {number} has no short answers or no documents")
    return Question(question, tuple(readings), documents)


@dataclass(frozen=True)
class NQPool:
    """The substitute's questions (one reading: NQ's answers) and their gold passages."""

    questions: tuple[Question, ...]
    golds: tuple[Document, ...]
    normalized: tuple[str, ...]
    """Each gold passage's text, normalised once for the answer screen."""

    def documents(self, rng: random.Random, index: int) -> tuple[Document, list[Document]]:
        """Question ``index``'s gold passage and the other gold passages that hold none of its
        answers, in a random order."""
        answers = [normalize_answer(answer) for answer in self.questions[index].readings[0]]
        others = [doc for i, (doc, text) in enumerate(zip(self.golds, self.normalized,
                                                          strict=True))
                  if i != index and not any(answer in text for answer in answers)]
        rng.shuffle(others)
        return self.golds[index], others


@cache
def load_nq(path: Path) -> NQPool:
    """The lost-in-the-middle oracle file: each question with its one gold passage."""
    rows = read_oracle(path)
    golds = tuple(Document(row.gold.title, row.gold.text) for row in rows)
    return NQPool(tuple(Question(row.question, (row.answers,)) for row in rows), golds,
                  tuple(normalize_answer(doc.text) for doc in golds))


def missing(data: DataSource, alce_file: str, demo_file: str) -> str | None:
    """What a cite task lacks in the data directory, or None."""
    alce = data.folder(ALCE_FOLDER)
    if alce is not None:
        absent = [name for name in (alce_file, demo_file) if not (alce / name).is_file()]
        if absent:
            return (f"{' and '.join(f'{ALCE_FOLDER}/{name}' for name in absent)} (HELMET's ALCE "
                    f"data and its prompts/{demo_file}) in --lceval-data, or no {ALCE_FOLDER}/ "
                    f"folder to use the NQ-oracle substitute")
        return None
    nq = data.folder(NQ_ORACLE)
    if nq is not None and (nq / NQ_ORACLE_FILE).is_file():
        return None
    return (f"{ALCE_FOLDER}/{alce_file} with {ALCE_FOLDER}/{demo_file} (HELMET's ALCE data and "
            f"prompt file) or {NQ_ORACLE}/{NQ_ORACLE_FILE} (the substitute) in --lceval-data")


def source_of(data: DataSource, alce_file: str, demo_file: str) -> tuple[Path, str]:
    """The file a cite task reads and its ``source`` label; DataError naming what is needed."""
    lacking = missing(data, alce_file, demo_file)
    if lacking is not None:
        raise DataError(f"the cite task needs {lacking}")
    alce = data.folder(ALCE_FOLDER)
    if alce is not None:
        return alce / alce_file, f"data:{ALCE_FOLDER}"
    return cast(Path, data.folder(NQ_ORACLE)) / NQ_ORACLE_FILE, SUBSTITUTE


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read {path} as JSON: {exc}") from None
