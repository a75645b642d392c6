"""Articles for 100-LongBench contexts: prose passages, news items (title + excerpt) and yes/no
QA passages.

They come from the data directory when it has them (``pg_essays/``, ``llicl/news_data``,
``llicl/boolq``), each kind falling back on its own to the self-made offline pool in
``fixtures/longbench/`` (written by ``fixtures/longbench/generate.py``). The pool's ``source``
names every origin used, so a result never hides that it ran on fixtures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..data import DataSource

POOL_FIXTURES = "longbench"
"""Sub-folder of the fixtures with the offline pool."""
PASSAGE_CHARS = (700, 1400)
"""Essays are cut at sentence ends into passages of about this many characters (roughly 150-350
tokens): long enough to read as articles, short enough to pack a context tightly."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")


@dataclass(frozen=True)
class Article:
    """One passage a context can hold."""

    text: str
    source: str
    """'data:<folder>' or 'fixtures'."""
    title: str = ""
    """News items: the headline, which passage retrieval gives as the passage's description."""
    question: str = ""
    """QA passages: a yes/no question that the text answers."""
    answer: str = ""
    """QA passages: 'yes' or 'no'."""


@dataclass(frozen=True)
class ArticlePool:
    """Every article (the distractor pool) and the indices of those that can be a gold one."""

    articles: tuple[Article, ...]
    news: tuple[int, ...]
    qa: tuple[int, ...]

    @property
    def source(self) -> str:
        """Every origin in the pool, e.g. 'data:llicl+data:pg_essays' or 'fixtures'."""
        return "+".join(sorted({article.source for article in self.articles}))


def load_pool(data: DataSource) -> ArticlePool:
    """The pool for ``data`` (read once per process)."""
    return _load_pool(data.folder("pg_essays"), data.folder("llicl"),
                      data.fixtures / POOL_FIXTURES)


@cache
def _load_pool(essays: Path | None, llicl: Path | None, fixtures: Path) -> ArticlePool:
    prose = list(_essay_passages(essays) if essays else _fixture_prose(fixtures))
    news = list(_news(llicl / "news_data") if llicl and (llicl / "news_data").is_dir()
                else _fixture_news(fixtures))
    qa = list(_boolq(llicl / "boolq") if llicl and (llicl / "boolq").is_dir()
              else _fixture_qa(fixtures))
    articles = tuple(prose + news + qa)
    first_news, first_qa = len(prose), len(prose) + len(news)
    return ArticlePool(articles, tuple(range(first_news, first_qa)),
                       tuple(range(first_qa, len(articles))))


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


def _jsonl(folder: Path, pattern: str) -> Iterator[dict[str, str]]:
    for path in sorted(folder.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield json.loads(line)


def _essay_passages(folder: Path) -> Iterator[Article]:
    for path in sorted(folder.glob("*.txt")):
        for passage in split_passages(path.read_text(encoding="utf-8")):
            yield Article(passage, f"data:{folder.name}")


def _news(folder: Path) -> Iterator[Article]:
    """news_data's five training resamples and test set overlap: each title is kept once."""
    seen: set[str] = set()
    for row in _jsonl(folder, "*.jsonl"):
        title, excerpt = row["title"].strip(), row["excerpt"].strip()
        if title and excerpt and title not in seen:
            seen.add(title)
            yield Article(excerpt, "data:llicl", title=title)


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
        yield Article(row["text"], "fixtures")


def _fixture_news(folder: Path) -> Iterator[Article]:
    for row in _jsonl(folder, "news.jsonl"):
        yield Article(row["excerpt"], "fixtures", title=row["title"])


def _fixture_qa(folder: Path) -> Iterator[Article]:
    for row in _jsonl(folder, "qa.jsonl"):
        yield Article(row["passage"], "fixtures", question=row["question"],
                      answer=row["answer"])
