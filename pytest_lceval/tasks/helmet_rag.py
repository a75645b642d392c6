"""HELMET's retrieval-augmented generation (suite ``rag``; HELMET ``data.py`` ``load_qa``,
``configs/rag.yaml``): a question, k passages filling the cell's length with the gold passage at
the cell's depth, two demonstrations, SubEM.

Prompt (base model; with a chat template the user text is templated and ``Answer:`` opens the
assistant turn)::

    Use the given documents to write a concise and short answer to the question. Write your
    answer in the following format:
    Answer: [answer]

    <demo passages>

    Question: <demo question>
    Answer: <demo answer>

    <demo 2 ...>

    Document (Title: t1): ...

    Document (Title: tk): ...

    Question: <question>
    Answer:

Tasks:

- ``nq``: the substitute (``source`` "substitute:nq_oracle"): Natural Questions with its gold
  passage (``nq_oracle/``), the distractors the other questions' gold passages, none containing
  any of the question's answers (normalised); each demonstration is another question's gold
  passage and two screened distractors.
- ``kilt_nq``, ``kilt_triviaqa``, ``kilt_popqa``, ``kilt_hotpotqa``: HELMET's released KILT files
  in ``<data>/kilt/`` (``source`` "data:kilt"): the file with the largest k of the task's test
  files, and the k=3 demonstration file. A file holds each question several times with the gold
  passage(s) moved (six depths, three for HotpotQA); the gold passages are those whose position
  moves by more than the number of golds between a question's rows, the distractors the rest in
  file order. k is then set by the length: the first distractors that fit. Single-gold tasks put
  the gold at the cell's depth; HotpotQA's case i uses the relative gold positions of the
  question's row i mod 3 (HELMET's three permutations) and has no depth axis.

The test questions are fixed per seed (a seeded shuffle, the first N) and the same at every
length and depth, so cells pair; each case's demonstrations and distractor order depend only on
(seed, task, sample index). As HELMET (``stop_new_line: true``) the answer ends at its first line
break; the score is SubEM, the better of the whole output and HELMET's parsed answer.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, cast

from ..data import DataError, DataSource, read_jsonl
from ..grid import Cell, case_seed
from ..helmet.nq_oracle import NQ_ORACLE, NQ_ORACLE_FILE, read_oracle
from ..helmet.passages import Doc, pack, place, position_depth, render_docs
from ..metrics import helmet_parse_output, normalize_answer, substring_exact_match
from ..records import Case, Prompt
from ..score_metric import SUBEM, ScoreMetric
from .base import BuildContext
from .recall_common import answer_separator

INSTRUCTION = ("Use the given documents to write a concise and short answer to the question. "
               "Write your answer in the following format:\nAnswer: [answer]\n\n")
"""HELMET's user template up to the demonstrations (``load_qa``, all tasks but ``nq_bad``)."""
ANSWER = "Answer:"
"""HELMET's answer prefix (its ``system_template``)."""
SHOTS = 2
MAX_NEW_TOKENS = 20
"""HELMET's ``generation_max_length`` for RAG."""
STOP = ("\n",)
USE_CHAT_TEMPLATE = False
"""HELMET's ``use_chat_template`` for RAG (configs/rag.yaml)."""
DEMO_DISTRACTORS = 2
"""The substitute's demonstrations hold three passages, as HELMET's k=3 demonstration files."""
DEMO_POOL = 200
"""Substitute questions set aside (per seed) to draw demonstrations from, never tested."""
MOVED = 2
"""A passage whose position moves by more than this between a question's rows is a gold one
(two golds at most, so a distractor moves by at most two)."""


@dataclass(frozen=True)
class Question:
    """A test question with its passages, whatever the file it came from."""

    key: str
    question: str
    answers: tuple[str, ...]
    golds: tuple[Doc, ...]
    distractors: tuple[Doc, ...]
    """In the order they are packed: the first that fit are taken."""
    permutations: tuple[tuple[float, ...], ...] = ()
    """Relative positions (0..1) of the golds in each of the file's rows (two-gold tasks)."""


@dataclass(frozen=True)
class Demo:
    question: str
    answer: str
    docs: tuple[Doc, ...]

    def render(self) -> str:
        return f"{render_docs(self.docs)}\n\nQuestion: {self.question}\nAnswer: {self.answer}"


def parse_answer(output: str) -> str:
    """HELMET's ``parse_output`` with prefix ``Answer:``."""
    return helmet_parse_output(output, ANSWER)


def sub_em(output: str, answers: Sequence[str]) -> float:
    """HELMET's RAG score: SubEM of the output, or of its parsed answer when that is better."""
    return max(substring_exact_match(output, answers),
               substring_exact_match(parse_answer(output), answers))


def contains_answer(text: str, answers: Sequence[str]) -> bool:
    normalized = normalize_answer(text)
    return any(normalize_answer(answer) in normalized for answer in answers if answer.strip())


def frame(demos: Sequence[Demo], question: str, docs: Sequence[Doc]) -> str:
    """The user text: instruction, demonstrations, passages, question."""
    demo_text = "".join(demo.render() + "\n\n" for demo in demos)
    return f"{INSTRUCTION}{demo_text}{render_docs(docs)}\n\nQuestion: {question}"


@dataclass(frozen=True)
class Material:
    """What a task draws its cases from."""

    questions: tuple[Question, ...]
    """In the seed's order: case i asks questions[i]."""
    source: str


@dataclass
class RagTask:
    """One RAG data set; ``load`` gives its material for a seed and its per-case demos."""

    metric: ClassVar[ScoreMetric] = SUBEM
    name: str
    uses_depth: bool = True
    use_chat_template: bool = USE_CHAT_TEMPLATE
    max_new_tokens: int = MAX_NEW_TOKENS
    stop: tuple[str, ...] = STOP

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        material = self.material(context.data, context.seed, cell.samples)
        if cell.samples > len(material.questions):
            raise DataError(f"{self.name}: {cell.samples} samples asked, the data has "
                            f"{len(material.questions)} test questions")
        return [self._case(cell, context, material, index) for index in range(cell.samples)]

    def score(self, output: str, case: Case) -> float:
        return sub_em(output, case.gold)

    def material(self, data: DataSource, seed: int, count: int) -> Material:
        """The first ``count`` test questions of the seed's order (fewer if the data has
        fewer)."""
        raise NotImplementedError

    def demos(self, data: DataSource, seed: int, question: Question, index: int) -> list[Demo]:
        raise NotImplementedError

    def _golds(self, question: Question, cell: Cell, index: int) -> list[tuple[Doc, float]]:
        if self.uses_depth:
            if cell.depth is None:
                raise ValueError(f"{self.name} places its gold passage at a depth: the cell "
                                 f"needs one")
            return [(question.golds[0], cell.depth / 100.0)]
        positions = question.permutations[index % len(question.permutations)]
        return list(zip(question.golds, positions, strict=True))

    def _case(self, cell: Cell, context: BuildContext, material: Material, index: int) -> Case:
        question = material.questions[index]
        demos = self.demos(context.data, context.seed, question, index)
        golds = self._golds(question, cell, index)
        separator = answer_separator(context.renderer)

        def prompt(n: int) -> Prompt:
            docs = place(question.distractors[:n], golds)
            return Prompt(frame(demos, question.question, docs), separator + ANSWER)

        packed = pack(lambda n: context.renderer.render(prompt(n)), context.renderer.count,
                      context.tokenizer, question.distractors,
                      cell.length - self.max_new_tokens, f"{self.name} at {cell.length} tokens")
        docs = place(question.distractors[:packed.count], golds)
        depths = [round(position_depth(docs, gold), 3) for gold, _ in golds]
        meta: dict[str, Any] = {
            "source": material.source, "question": question.question, "key": question.key,
            "passages": len(docs), "gold_depths": depths, "requested_depth": cell.depth,
            "demos": [demo.question for demo in demos]}
        return Case(index=index, prompt=packed.text, gold=question.answers,
                    prompt_tokens=packed.tokens, depth=depths[0] if self.uses_depth else None,
                    max_new_tokens=self.max_new_tokens, stop=self.stop,
                    chat=context.renderer.chat_source(prompt(packed.count)), meta=meta)


# -- the substitute: NQ-open with its gold passages -----------------------------------------

@cache
def _normalized(path: Path) -> tuple[str, ...]:
    return tuple(normalize_answer(f"{row.gold.title} {row.gold.text}")
                 for row in read_oracle(path))


@dataclass
class OracleTask(RagTask):
    """The substitute: gold passages of other questions as distractors (module docstring)."""

    source: str = field(default=f"substitute:{NQ_ORACLE}")

    def missing_data(self, data: DataSource) -> str | None:
        folder = data.folder(NQ_ORACLE)
        if folder is not None and (folder / NQ_ORACLE_FILE).is_file():
            return None
        return (f"{NQ_ORACLE}/{NQ_ORACLE_FILE} (lost-in-the-middle's NQ-open oracle file) in "
                f"--lceval-data")

    def _path(self, data: DataSource) -> Path:
        missing = self.missing_data(data)
        if missing is not None:
            raise DataError(f"{self.name} needs {missing}")
        return cast(Path, data.folder(NQ_ORACLE)) / NQ_ORACLE_FILE

    def _order(self, data: DataSource, seed: int) -> list[int]:
        order = list(range(len(read_oracle(self._path(data)))))
        random.Random(case_seed(seed, self.name, "questions")).shuffle(order)
        return order

    def material(self, data: DataSource, seed: int, count: int) -> Material:
        path = self._path(data)
        rows, normalized = read_oracle(path), _normalized(path)
        tests = self._order(data, seed)[:-DEMO_POOL][:count]
        questions = []
        for index, row_index in enumerate(tests):
            row = rows[row_index]
            others = [i for i in range(len(rows)) if i != row_index]
            random.Random(case_seed(seed, self.name, index, "distractors")).shuffle(others)
            answers = [normalize_answer(answer) for answer in row.answers if answer.strip()]
            distractors = tuple(rows[i].gold for i in others if rows[i].gold != row.gold
                                and not any(answer in normalized[i] for answer in answers))
            questions.append(Question(row.question, row.question, row.answers, (row.gold,),
                                      distractors))
        return Material(tuple(questions), self.source)

    def demos(self, data: DataSource, seed: int, question: Question, index: int) -> list[Demo]:
        path = self._path(data)
        rows = read_oracle(path)
        pool = self._order(data, seed)[-DEMO_POOL:]
        rng = random.Random(case_seed(seed, self.name, index, "demos"))
        demos = []
        for row_index in rng.sample(pool, SHOTS):
            row = rows[row_index]
            screened = [rows[i].gold for i in pool if i != row_index
                        and not contains_answer(f"{rows[i].gold.title} {rows[i].gold.text}",
                                                row.answers)]
            docs = rng.sample(screened, DEMO_DISTRACTORS)
            docs.insert(rng.randrange(len(docs) + 1), row.gold)
            demos.append(Demo(row.question, row.answers[0], tuple(docs)))
        return demos


# -- HELMET's KILT files ---------------------------------------------------------------------

KILT = "kilt"


@dataclass(frozen=True)
class KiltFiles:
    """File names of one KILT data set in HELMET's ``data/kilt/`` (configs/rag*.yaml)."""

    test_glob: str
    demo_name: str
    popularity_below: float | None = None
    """PopQA: keep questions whose log10(s_pop) is below this (HELMET's ``kilt_popqa_3``)."""


@cache
def _read_kilt(path: Path) -> tuple[dict[str, Any], ...]:
    return read_jsonl(path, required=("question", "answers", "ctxs"))


def _doc(ctx: Any, path: Path) -> Doc:
    try:
        return Doc(str(ctx["title"]), str(ctx["text"]))
    except (KeyError, TypeError):
        raise DataError(f"{path}: a passage in ctxs lacks title or text") from None


def _key_field(rows: Sequence[dict[str, Any]]) -> str:
    """HELMET's question key: ``id`` when the file has it, else the question text."""
    return "id" if rows and "id" in rows[0] else "question"


@cache
def kilt_questions(path: Path, two_golds: bool) -> tuple[Question, ...]:
    """A KILT test file's questions, in file order, their gold passages told apart by how they
    move between the question's rows (module docstring); raises DataError."""
    rows = _read_kilt(path)
    key = _key_field(rows)
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row[key]), []).append(row)
    return tuple(_kilt_question(name, group, path, two_golds) for name, group in groups.items())


def _kilt_question(name: str, group: list[dict[str, Any]], path: Path,
                   two_golds: bool) -> Question:
    lists = [[_doc(ctx, path) for ctx in row["ctxs"]] for row in group]
    spots: dict[Doc, list[int]] = {}
    for docs in lists:
        for position, doc in enumerate(docs):
            spots.setdefault(doc, []).append(position)
    golds = [doc for doc in lists[0] if max(spots[doc]) - min(spots[doc]) > MOVED]
    wanted = 2 if two_golds else 1
    if len(golds) != wanted:
        raise DataError(f"{path}: question {name!r} has {len(lists)} rows in which "
                        f"{len(golds)} passages move (its gold ones); expected {wanted}: is it "
                        f"one of HELMET's *_dep* files with each question at several depths?")
    permutations = tuple(tuple(docs.index(gold) / max(len(docs) - 1, 1) for gold in golds)
                         for docs in lists)
    first = group[0]
    return Question(name, str(first["question"]), tuple(map(str, first["answers"])),
                    tuple(golds), tuple(doc for doc in lists[0] if doc not in golds),
                    permutations)


def _k_of(path: Path) -> int:
    match = re.search(r"_k(\d+)_", path.name)
    return int(match.group(1)) if match else 0


def _popular_enough(row: dict[str, Any], below: float | None) -> bool:
    if below is None:
        return True
    popularity = row.get("s_pop")
    return isinstance(popularity, (int, float)) and popularity > 0 \
        and math.log10(popularity) < below


@dataclass
class KiltTask(RagTask):
    """A HELMET KILT data set read from ``<data>/kilt/`` (module docstring)."""

    files: KiltFiles = field(default_factory=lambda: KiltFiles("", ""))

    def missing_data(self, data: DataSource) -> str | None:
        folder = data.folder(KILT)
        if folder is None or not any(self._test_files(folder)):
            return (f"HELMET's file {KILT}/{self.files.test_glob} (princeton-nlp/HELMET "
                    f"data.tar.gz, data/kilt/) in --lceval-data")
        if not (folder / self.files.demo_name).is_file():
            return f"HELMET's demonstration file {KILT}/{self.files.demo_name} in --lceval-data"
        return None

    def _folder(self, data: DataSource) -> Path:
        missing = self.missing_data(data)
        if missing is not None:
            raise DataError(f"{self.name} needs {missing}")
        return cast(Path, data.folder(KILT))

    def _test_files(self, folder: Path) -> list[Path]:
        return [path for path in folder.glob(self.files.test_glob)
                if path.name != self.files.demo_name]

    def material(self, data: DataSource, seed: int, count: int) -> Material:
        folder = self._folder(data)
        path = max(self._test_files(folder), key=_k_of)
        questions = [question for question in kilt_questions(path, not self.uses_depth)
                     if _popular_enough(_first_row(path, question.key),
                                        self.files.popularity_below)]
        order = sorted(questions, key=lambda question: question.key)
        random.Random(case_seed(seed, self.name, "questions")).shuffle(order)
        return Material(tuple(order[:count]), f"data:{KILT}")

    def demos(self, data: DataSource, seed: int, question: Question, index: int) -> list[Demo]:
        path = self._folder(data) / self.files.demo_name
        rows = _read_kilt(path)
        key = _key_field(rows)
        seen: dict[str, dict[str, Any]] = {}
        for row in rows:  # one row per question, never the test question itself
            name = str(row[key])
            if name != question.key and _popular_enough(row, self.files.popularity_below):
                seen.setdefault(name, row)
        if len(seen) < SHOTS:
            raise DataError(f"{path} holds fewer than {SHOTS} usable demonstration questions")
        rng = random.Random(case_seed(seed, self.name, index, "demos"))
        chosen = rng.sample(sorted(seen), SHOTS)
        return [Demo(str(seen[name]["question"]), str(seen[name]["answers"][0]),
                     tuple(_doc(ctx, path) for ctx in seen[name]["ctxs"])) for name in chosen]


def _first_row(path: Path, key: str) -> dict[str, Any]:
    rows = _read_kilt(path)
    field_name = _key_field(rows)
    return next(row for row in rows if str(row[field_name]) == key)


TASKS: tuple[RagTask, ...] = (
    OracleTask("nq"),
    KiltTask("kilt_nq", files=KiltFiles("nq-dev-multikilt_1000_k*_dep6.jsonl",
                                        "nq-train-multikilt_1000_k3_dep6.jsonl")),
    KiltTask("kilt_triviaqa", files=KiltFiles("triviaqa-dev-multikilt_1000_k*_dep6.jsonl",
                                              "triviaqa-train-multikilt_1000_k3_dep6.jsonl")),
    KiltTask("kilt_popqa", files=KiltFiles("popqa_test_1000_k*_dep6.jsonl",
                                           "popqa_test_1000_k3_dep6.jsonl", 3.0)),
    KiltTask("kilt_hotpotqa", uses_depth=False,
             files=KiltFiles("hotpotqa-dev-multikilt_1000_k*_dep3.jsonl",
                             "hotpotqa-train-multikilt_1000_k3_dep3.jsonl")),
)
