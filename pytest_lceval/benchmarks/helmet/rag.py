"""HELMET's retrieval-augmented generation (suite ``rag``; HELMET ``data.py`` ``load_qa``,
``configs/rag*.yaml``): a question, k passages with the gold passage at a depth, two
demonstrations, SubEM.

Prompt (a raw prompt; with a chat template the user text is templated and the assistant turn
starts empty, as in HELMET: ``helmet.pipeline``)::

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

- ``kilt_nq``, ``kilt_triviaqa``, ``kilt_popqa``, ``kilt_hotpotqa``: HELMET's released KILT files
  in ``<data>/kilt/`` (``source`` "data:kilt"). A cell at one of HELMET's lengths reads HELMET's
  file for it (``HELMET_K``: k = 20 passages at 4k ... 1000 at 128k) and asks its rows as
  HELMET's ``load_qa`` does: the questions ``random.sample`` picks for the seed, in file order,
  each with the demonstrations its key's hash shuffle gives, the context cut as HELMET's
  ``tokenize`` cuts it when the prompt overflows. A file holds each question at six depths
  (three gold permutations for HotpotQA); the cell's depth picks the row whose gold passage
  sits nearest to it (HotpotQA: case i takes row i mod 3). A cell at another length fits k
  itself: from the file with the largest k, the gold passage(s) told by how they move between a
  question's rows, the first distractors that fit, the gold placed at the cell's depth.
- ``nq``: the substitute (``source`` "substitute:nq_oracle"): Natural Questions with its gold
  passage (``nq_oracle/``), the distractors the other questions' gold passages, none containing
  any of the question's answers (normalised); each demonstration is another question's gold
  passage and two screened distractors; questions and demonstrations in a seeded order.

The same questions are asked at every length and depth, so cells pair. HELMET's released code
lets the answer run its 20 tokens (``--lceval-stop-newline=config``: stop at the first line
break, as its config intends); the score is SubEM of ``Answer:`` + the output (without a chat
template, as ``eval.py`` scores it), the better of the whole text and HELMET's parsed answer.
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

from ...foundation.data import DataError, DataSource, read_jsonl
from ...foundation.grid import Cell, case_seed
from ...results.records import Case, Prompt
from ...results.score_metric import SUBEM, ScoreMetric
from ...tasks.base import BuildContext
from ...tasks.metrics import normalize_answer, substring_exact_match
from .nq_oracle import NQ_ORACLE, NQ_ORACLE_FILE, read_oracle
from .output import OUTPUT_PREFIX, helmet_parse_output, helmet_scored
from .passages import Doc, pack, place, position_depth, render_docs
from .pipeline import context_that_fits, first_distinct, key_seed, sample_keys, shuffled

INSTRUCTION = ("Use the given documents to write a concise and short answer to the question. "
               "Write your answer in the following format:\nAnswer: [answer]\n\n")
"""HELMET's user template up to the demonstrations (``load_qa``, all tasks but ``nq_bad``)."""
ANSWER = "Answer:"
"""HELMET's answer prefix (its ``system_template``)."""
CUE = "\n" + ANSWER
"""How HELMET's ``prompt_template`` ends a raw prompt after the user text."""
SHOTS = 2
MAX_NEW_TOKENS = 20
"""HELMET's ``generation_max_length`` for RAG."""
USE_CHAT_TEMPLATE = False
"""HELMET's ``use_chat_template`` for RAG (configs/rag.yaml)."""
STOP_NEW_LINE = True
"""configs/rag.yaml's ``stop_new_line``, which HELMET's released code never reads."""
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


def user_text(demos: Sequence[Demo], question: str, passages: str) -> str:
    """The user text: instruction, demonstrations, passages, question."""
    demo_text = "".join(demo.render() + "\n\n" for demo in demos)
    return f"{INSTRUCTION}{demo_text}{passages}\n\nQuestion: {question}"


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
    stop_new_line: bool = STOP_NEW_LINE
    max_new_tokens: int = MAX_NEW_TOKENS

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        material = self.material(context.data, context.seed, cell.samples)
        if cell.samples > len(material.questions):
            raise DataError(f"{self.name}: {cell.samples} samples asked, the data has "
                            f"{len(material.questions)} test questions")
        return [self._case(cell, context, material, index) for index in range(cell.samples)]

    def score(self, output: str, case: Case) -> float:
        return sub_em(helmet_scored(output, case.meta), case.gold)

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

        def prompt(n: int) -> Prompt:
            docs = place(question.distractors[:n], golds)
            return Prompt(user_text(demos, question.question, render_docs(docs)), cue=CUE)

        packed = pack(lambda n: context.renderer.render(prompt(n)), context.renderer.count,
                      context.tokenizer, question.distractors,
                      cell.length - self.max_new_tokens, f"{self.name} at {cell.length} tokens")
        docs = place(question.distractors[:packed.count], golds)
        depths = [round(position_depth(docs, gold), 3) for gold, _ in golds]
        meta: dict[str, Any] = {
            "source": material.source, "question": question.question, "key": question.key,
            "passages": len(docs), "gold_depths": depths, "requested_depth": cell.depth,
            "demos": [demo.question for demo in demos],
            OUTPUT_PREFIX: "" if context.renderer.uses_template else ANSWER}
        return Case(index=index, prompt=packed.text, gold=question.answers,
                    prompt_tokens=packed.tokens, depth=depths[0] if self.uses_depth else None,
                    max_new_tokens=self.max_new_tokens,
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
HELMET_K = {4096: 20, 8192: 50, 16384: 105, 32768: 220, 65536: 440, 131072: 1000}
"""The k of HELMET's KILT test file at each of its input lengths (scripts/generate_configs.py)."""


@dataclass(frozen=True)
class KiltFiles:
    """File names of one KILT data set in HELMET's ``data/kilt/`` (configs/rag*.yaml)."""

    test_name: str
    """The test files' name with ``{k}`` for the number of passages."""
    demo_name: str
    popularity_below: float | None = None
    """PopQA: keep questions whose log10(s_pop) is below this (HELMET's ``kilt_popqa_3``)."""
    demos_from_tests: bool = False
    """PopQA draws its demonstrations from its own test questions, so HELMET leaves the asked
    question out of the draw; the others draw from a train file."""

    @property
    def test_glob(self) -> str:
        return self.test_name.format(k="*")


@cache
def _read_kilt(path: Path) -> tuple[dict[str, Any], ...]:
    return read_jsonl(path, required=("question", "answers", "ctxs"))


def _doc(ctx: Any, path: Path) -> Doc:
    try:
        return Doc(str(ctx["title"]), str(ctx["text"]))
    except (KeyError, TypeError):
        raise DataError(f"{path}: a passage in ctxs lacks title or text") from None


def _docs(row: dict[str, Any], path: Path) -> tuple[Doc, ...]:
    return tuple(_doc(ctx, path) for ctx in row["ctxs"])


def _key_field(rows: Sequence[dict[str, Any]]) -> str:
    """HELMET's question key: ``id`` when the file has it, else the question text."""
    return "id" if any("id" in row for row in rows) else "question"


def _popular_enough(row: dict[str, Any], below: float | None) -> bool:
    if below is None:
        return True
    popularity = row.get("s_pop")
    return isinstance(popularity, (int, float)) and popularity > 0 \
        and math.log10(popularity) < below


def _groups(path: Path, below: float | None) -> tuple[str, dict[Any, list[dict[str, Any]]]]:
    """The key field of a KILT file and its usable rows by question key, in file order."""
    rows = [row for row in _read_kilt(path) if _popular_enough(row, below)]
    field_name = _key_field(rows)
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        try:
            groups.setdefault(row[field_name], []).append(row)
        except (KeyError, TypeError):
            raise DataError(f"{path}: a row lacks a usable {field_name!r}") from None
    return field_name, groups


def _asked(path: Path, below: float | None, count: int,
           seed: int) -> list[tuple[Any, list[dict[str, Any]]]]:
    """The questions HELMET's ``load_qa`` asks with ``max_test_samples = count``: a seeded
    sample of the sorted keys, in file order, each with its rows."""
    _, groups = _groups(path, below)
    chosen = sample_keys(groups, count, seed)
    return [(key, rows) for key, rows in groups.items() if key in chosen]


@cache
def kilt_questions(path: Path, two_golds: bool) -> tuple[Question, ...]:
    """A KILT test file's questions, in file order, their gold passages told apart by how they
    move between the question's rows (module docstring); raises DataError."""
    _, groups = _groups(path, None)
    return tuple(_kilt_question(key, rows, path, two_golds) for key, rows in groups.items())


def _kilt_question(key: Any, group: list[dict[str, Any]], path: Path,
                   two_golds: bool) -> Question:
    lists = [_docs(row, path) for row in group]
    spots: dict[Doc, list[int]] = {}
    for docs in lists:
        for position, doc in enumerate(docs):
            spots.setdefault(doc, []).append(position)
    golds = [doc for doc in lists[0] if max(spots[doc]) - min(spots[doc]) > MOVED]
    wanted = 2 if two_golds else 1
    if len(golds) != wanted:
        raise DataError(f"{path}: question {key!r} has {len(lists)} rows in which "
                        f"{len(golds)} passages move (its gold ones); expected {wanted}: is it "
                        f"one of HELMET's *_dep* files with each question at several depths?")
    permutations = tuple(tuple(docs.index(gold) / max(len(docs) - 1, 1) for gold in golds)
                         for docs in lists)
    first = group[0]
    return Question(str(key), str(first["question"]), tuple(map(str, first["answers"])),
                    tuple(golds), tuple(doc for doc in lists[0] if doc not in golds),
                    permutations)


@dataclass
class KiltTask(RagTask):
    """A HELMET KILT data set read from ``<data>/kilt/`` (module docstring)."""

    files: KiltFiles = field(default_factory=lambda: KiltFiles("", ""))

    def missing_data(self, data: DataSource) -> str | None:
        folder = data.folder(KILT)
        if folder is None or not self._test_files(folder):
            return (f"HELMET's file {KILT}/{self.files.test_glob} (princeton-nlp/HELMET "
                    f"data.tar.gz, data/kilt/) in --lceval-data")
        if not (folder / self.files.demo_name).is_file():
            return f"HELMET's demonstration file {KILT}/{self.files.demo_name} in --lceval-data"
        return None

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        folder = self._folder(context.data)
        k = HELMET_K.get(cell.length)
        path = folder / self.files.test_name.format(k=k)
        if k is None or not path.is_file():
            return super().build(cell, context)
        asked = _asked(path, self.files.popularity_below, cell.samples, context.seed)
        if cell.samples > len(asked):
            raise DataError(f"{self.name}: {cell.samples} samples asked, {path} has "
                            f"{len(asked)} test questions")
        return [self._file_case(cell, context, path, index, key, rows)
                for index, (key, rows) in enumerate(asked)]

    def material(self, data: DataSource, seed: int, count: int) -> Material:
        path = max(self._test_files(self._folder(data)), key=_k_of)
        questions = [_kilt_question(key, rows, path, not self.uses_depth)
                     for key, rows in _asked(path, self.files.popularity_below, count, seed)]
        return Material(tuple(questions), f"data:{KILT}")

    def demos(self, data: DataSource, seed: int, question: Question, index: int) -> list[Demo]:
        """HELMET's draw for a question of the largest test file (``material``)."""
        largest = max(self._test_files(self._folder(data)), key=_k_of)
        return self._helmet_demos(data, question, _key_field(_read_kilt(largest)))

    def _helmet_demos(self, data: DataSource, question: Question, field_name: str) -> list[Demo]:
        """HELMET's draw: the demonstration rows shuffled by a seed from the question's key,
        the first two distinct questions (told apart by the test file's key field)."""
        path = self._folder(data) / self.files.demo_name
        rows = [row for row in _read_kilt(path)
                if _popular_enough(row, self.files.popularity_below)
                and not (self.files.demos_from_tests and str(row.get(field_name)) == question.key)]
        try:
            keys = [row[field_name] for row in rows]
        except KeyError:
            raise DataError(f"{path}: a row lacks {field_name!r}, the test file's key") from None
        chosen = first_distinct(keys, shuffled(len(rows), key_seed(question.key)), SHOTS)
        if len(chosen) < SHOTS:
            raise DataError(f"{path} holds fewer than {SHOTS} usable demonstration questions")
        return [Demo(str(rows[i]["question"]), str(rows[i]["answers"][0]), _docs(rows[i], path))
                for i in chosen]

    def _file_case(self, cell: Cell, context: BuildContext, path: Path, index: int, key: Any,
                   rows: list[dict[str, Any]]) -> Case:
        """The case of HELMET's own row: its passages as the file orders them."""
        question = _kilt_question(key, rows, path, not self.uses_depth)
        if self.uses_depth:
            if cell.depth is None:
                raise ValueError(f"{self.name} places its gold passage at a depth: the cell "
                                 f"needs one")
            wanted = cell.depth / 100.0
            row = min(range(len(rows)), key=lambda r: abs(question.permutations[r][0] - wanted))
        else:
            row = index % len(rows)
        docs = _docs(rows[row], path)
        demos = self._helmet_demos(context.data, question, _key_field(_read_kilt(path)))

        def prompt(passages: str) -> Prompt:
            return Prompt(user_text(demos, question.question, passages), cue=CUE)

        whole = render_docs(docs)
        passages = context_that_fits(
            context, prompt, whole, cell.length - self.max_new_tokens,
            f"{self.name} at {cell.length} tokens: instructions, demonstrations and question "
            f"leave no room for a passage")
        rendered = context.renderer.render(prompt(passages))
        depths = [round(100.0 * position, 3) for position in question.permutations[row]]
        meta: dict[str, Any] = {
            "source": f"data:{KILT}", "file": path.name, "row": row,
            "question": question.question, "key": question.key, "passages": len(docs),
            "truncated": passages != whole, "gold_depths": depths,
            "requested_depth": cell.depth, "demos": [demo.question for demo in demos],
            OUTPUT_PREFIX: "" if context.renderer.uses_template else ANSWER}
        return Case(index=index, prompt=rendered, gold=question.answers,
                    prompt_tokens=context.renderer.count(rendered),
                    depth=depths[0] if self.uses_depth else None,
                    max_new_tokens=self.max_new_tokens,
                    chat=context.renderer.chat_source(prompt(passages)), meta=meta)

    def _folder(self, data: DataSource) -> Path:
        missing = self.missing_data(data)
        if missing is not None:
            raise DataError(f"{self.name} needs {missing}")
        return cast(Path, data.folder(KILT))

    def _test_files(self, folder: Path) -> list[Path]:
        return [path for path in folder.glob(self.files.test_glob)
                if path.name != self.files.demo_name]


def _k_of(path: Path) -> int:
    match = re.search(r"_k(\d+)_", path.name)
    return int(match.group(1)) if match else 0


TASKS: tuple[RagTask, ...] = (
    OracleTask("nq"),
    KiltTask("kilt_nq", files=KiltFiles("nq-dev-multikilt_1000_k{k}_dep6.jsonl",
                                        "nq-train-multikilt_1000_k3_dep6.jsonl")),
    KiltTask("kilt_triviaqa", files=KiltFiles("triviaqa-dev-multikilt_1000_k{k}_dep6.jsonl",
                                              "triviaqa-train-multikilt_1000_k3_dep6.jsonl")),
    KiltTask("kilt_popqa", files=KiltFiles("popqa_test_1000_k{k}_dep6.jsonl",
                                           "popqa_test_1000_k3_dep6.jsonl", 3.0, True)),
    KiltTask("kilt_hotpotqa", uses_depth=False,
             files=KiltFiles("hotpotqa-dev-multikilt_1000_k{k}_dep3.jsonl",
                             "hotpotqa-train-multikilt_1000_k3_dep3.jsonl")),
)
