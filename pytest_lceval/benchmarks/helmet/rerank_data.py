"""Where the re-ranking task's queries and candidate passages come from.

Two sources, tried in this order:

- **HELMET's released files** in ``<data>/msmarco/``: ``test_reranking_data_k<K>_dep3.jsonl``,
  JSONL rows ``{"qid": str, "query": str, "ctxs": [{"id": str, "text": str, "label": int,
  "title"?: str}, ...]}``; each qid has three rows, the same K label-balanced passages in three
  shuffled orders. A cell at one of HELMET's lengths reads the file HELMET reads there
  (``HELMET_K``); at another length the largest K other than 10 is the pool a fitted k is taken
  from. The K=10 file gives the demonstrations, as in HELMET's configs. Which rows are asked and
  which demonstrations they get is HELMET's rule (``helmet_asked``, ``helmet_demos``).
- **The substitute** ``substitute:msmarco_dl`` from ``<data>/msmarco_dl/`` (TREC DL 2019 and 2020;
  HELMET's files were made from TREC DL 2019): each query's pool is the union of the retrieved
  lists there (BM25 top-100 for both years, four more retrievers' top-100 for 2019) with NIST's
  graded qrels. HELMET's label balancing is redone here: judged candidates are dealt in rounds
  of one per grade (3, 2, 1, 0), so any prefix is as balanced as the pool allows; the query's
  unjudged hits follow with grade 0 (the TREC convention), then, for lengths beyond the pool,
  passages retrieved for other queries, grade 0 too (``origin`` says which each one is).

The substitute gives, per query, an ordered candidate list for a permutation and a count ``n``;
the task takes as many as fit the cell (``k``).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, cast

from ...foundation.data import DataError, DataSource, read_data_text, read_jsonl
from ...foundation.grid import case_seed
from .pipeline import first_distinct, key_seed, sample_keys, shuffled

HELMET_FOLDER = "msmarco"
SUBSTITUTE_FOLDER = "msmarco_dl"
SUBSTITUTE = "substitute:msmarco_dl"
DEMO_K = 10
"""HELMET's demonstration file holds ten passages a query (``test_reranking_data_k10_dep3``)."""
PERMUTATIONS = 3
"""HELMET's ``dep3``: every query is asked with its passages in three shuffled orders."""
HELMET_K = {4096: 14, 8192: 50, 16384: 130, 32768: 285, 65536: 600, 131072: 1000}
"""The K of HELMET's test file at each of its input lengths (scripts/generate_configs.py)."""
_FILE = re.compile(r"^test_reranking_data_k(\d+)_dep3\.jsonl$")
_SUBSTITUTE_RUNS = ("dl19", "dl20")


@dataclass(frozen=True)
class Candidate:
    """One passage with its id (an MS MARCO passage id) and graded label (0-3)."""

    pid: str
    text: str
    grade: int
    """-1 while unjudged; the task sees 0 (``balanced_order``)."""
    title: str | None = None
    origin: str = "judged"
    """'judged', 'unjudged' (retrieved for the query, not in the qrels) or 'other query'."""


@dataclass(frozen=True)
class Listing:
    """A query with candidates in the order they are shown."""

    qid: str
    query: str
    candidates: tuple[Candidate, ...]


def load(data: DataSource) -> HelmetFiles | Substitute:
    """HELMET's files when the data directory has a ``msmarco/`` folder, else the substitute;
    DataError when neither is there (or HELMET's folder lacks a file)."""
    problem = missing(data)
    if problem is not None:
        raise DataError(f"re-ranking needs {problem}")
    helmet = data.folder(HELMET_FOLDER)
    if helmet is not None:
        return HelmetFiles(_helmet_files(helmet))
    return _substitute(cast(Path, data.folder(SUBSTITUTE_FOLDER)))


def missing(data: DataSource) -> str | None:
    """None when ``data`` holds a source; else what to put where, in a few words."""
    helmet = data.folder(HELMET_FOLDER)
    if helmet is not None:
        files = _helmet_files(helmet)
        if any(k != DEMO_K for k in files) and DEMO_K in files:
            return None
        return (f"HELMET's {HELMET_FOLDER}/test_reranking_data_k<K>_dep3.jsonl (K > {DEMO_K}) "
                f"and its demonstration file test_reranking_data_k{DEMO_K}_dep3.jsonl in "
                f"--lceval-data; {helmet} has {sorted(p.name for p in files.values()) or 'none'}")
    substitute = data.folder(SUBSTITUTE_FOLDER)
    if substitute is not None and any(_substitute_runs(substitute)):
        return None
    return (f"HELMET's MS MARCO files in <data>/{HELMET_FOLDER}/ (test_reranking_data_k*_dep3"
            f".jsonl) or TREC DL runs and qrels in <data>/{SUBSTITUTE_FOLDER}/ (the substitute), "
            f"in --lceval-data")


def balanced_order(candidates: Sequence[Candidate], rng: random.Random) -> list[Candidate]:
    """HELMET's label balancing as a ranking of the pool: judged passages dealt in rounds of
    one per grade (highest first, shuffled within a grade), then the unjudged ones, shuffled."""
    judged = [c for c in candidates if c.grade >= 0]
    unjudged = [c for c in candidates if c.grade < 0]
    by_grade = {grade: [c for c in judged if c.grade == grade]
                for grade in sorted({c.grade for c in judged}, reverse=True)}
    for group in by_grade.values():
        rng.shuffle(group)
    rng.shuffle(unjudged)
    dealt: list[Candidate] = []
    for round_ in range(max((len(g) for g in by_grade.values()), default=0)):
        dealt.extend(group[round_] for group in by_grade.values() if round_ < len(group))
    return dealt + [replace(c, grade=0, origin="unjudged") for c in unjudged]


@dataclass(frozen=True)
class HelmetFiles:
    """HELMET's released files by their K (the demonstration file's K is ``DEMO_K``)."""

    files: dict[int, Path]
    source: str = f"data:{HELMET_FOLDER}"

    def test_rows(self, length: int) -> tuple[list[Listing], bool]:
        """The rows of the file HELMET reads at ``length`` and True; at a length HELMET has no
        file for, the rows of the largest test file (from which a fitted k is shown) and
        False."""
        k = HELMET_K.get(length)
        if k is not None and k in self.files:
            return _read_rows(self.files[k]), True
        return _read_rows(self.files[max(k for k in self.files if k != DEMO_K)]), False

    def demo_rows(self) -> list[Listing]:
        return _read_rows(self.files[DEMO_K])


def helmet_asked(rows: Sequence[Listing], samples: int, seed: int) -> list[Listing]:
    """The rows HELMET's ``load_msmarco_rerank`` asks with ``max_test_samples`` the queries
    ``samples`` cases take (a query's rows in turn): a seeded sample of the sorted qids, every
    row of theirs, in file order."""
    chosen = sample_keys((row.qid for row in rows), math.ceil(samples / PERMUTATIONS), seed)
    return [row for row in rows if row.qid in chosen]


def helmet_demos(demo_rows: Sequence[Listing], asked: Sequence[Listing], qid: str,
                 shots: int) -> list[Listing]:
    """HELMET's demonstrations for query ``qid`` of the ``asked`` rows: the demonstration rows
    without the asked queries (all of them when the file has over twice as many rows as are
    asked, else this one), shuffled by a seed from ``qid``, the first ``shots`` distinct
    queries."""
    left_out = {row.qid for row in asked} if len(demo_rows) > 2 * len(asked) else {qid}
    pool = [row for row in demo_rows if row.qid not in left_out]
    chosen = first_distinct([row.qid for row in pool], shuffled(len(pool), key_seed(qid)), shots)
    if len(chosen) < shots:
        raise DataError(f"re-ranking needs {shots} demonstration queries other than {qid}; "
                        f"the demonstration file has {len(chosen)}")
    return [pool[i] for i in chosen]


@dataclass(frozen=True)
class Substitute:
    """TREC DL queries with their retrieved pools (see the module docstring)."""

    pools: dict[str, Listing]
    source: str = SUBSTITUTE
    _orders: dict[tuple[str, int], list[Candidate]] = field(
        default_factory=dict, compare=False, repr=False)

    @property
    def qids(self) -> tuple[str, ...]:
        return tuple(self.pools)

    def query(self, qid: str) -> str:
        return self.pools[qid].query

    def order(self, qid: str, permutation: int, seed: int) -> Sequence[Candidate]:
        """The query's pool balanced, then the other queries' passages (seeded); the same for
        every permutation."""
        key = (qid, seed)
        if key not in self._orders:
            own = self.pools[qid].candidates
            seen = {c.pid for c in own}
            foreign = {c.pid: replace(c, grade=0, origin="other query")
                       for other, pool in self.pools.items() if other != qid
                       for c in pool.candidates if c.pid not in seen}
            shuffled = list(foreign.values())
            random.Random(case_seed(seed, "foreign", qid)).shuffle(shuffled)
            self._orders[key] = balanced_order(own, random.Random(case_seed(seed, "pool", qid)))
            self._orders[key] += shuffled
        return self._orders[key]

    def shown(self, qid: str, permutation: int, n: int, seed: int) -> Listing:
        """The first ``n`` shuffled by ``permutation``: the same passages in each permutation,
        in a different order."""
        chosen = list(self.order(qid, permutation, seed)[:n])
        random.Random(case_seed(seed, "permutation", qid, permutation, n)).shuffle(chosen)
        return Listing(qid, self.query(qid), tuple(chosen))

    def demos(self, exclude: str, shots: int, n: int, seed: int) -> list[Listing]:
        others = [pool for qid, pool in self.pools.items() if qid != exclude]
        return [self.shown(pool.qid, 0, n, seed)
                for pool in _pick_demos(others, exclude, shots, seed)]


def _pick_demos(rows: Sequence[Listing], exclude: str, shots: int, seed: int) -> list[Listing]:
    """``shots`` rows of distinct queries (a query's first row), drawn by a generator seeded by
    the test query (as HELMET seeds its demo shuffle by the query's hash)."""
    first: dict[str, Listing] = {}
    for row in rows:
        first.setdefault(row.qid, row)
    distinct = list(first.values())
    if len(distinct) < shots:
        raise DataError(f"re-ranking needs {shots} demonstration queries other than {exclude}; "
                        f"the data has {len(distinct)}")
    return random.Random(case_seed(seed, "demos", exclude)).sample(distinct, shots)


def _helmet_files(folder: Path) -> dict[int, Path]:
    """HELMET's re-ranking files in ``folder`` by their K."""
    return {int(m.group(1)): path for path in folder.iterdir() if (m := _FILE.match(path.name))}


@cache
def _read_rows(path: Path) -> list[Listing]:
    rows = []
    for number, row in enumerate(read_jsonl(path, ("qid", "query", "ctxs")), start=1):
        try:
            candidates = tuple(Candidate(str(c["id"]), str(c["text"]), int(c["label"]),
                                         c.get("title")) for c in row["ctxs"])
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path} record {number}: every ctxs entry needs id, text and an "
                            f"integer label ({exc!r})") from None
        if not candidates:
            raise DataError(f"{path} record {number} has no ctxs")
        rows.append(Listing(str(row["qid"]), str(row["query"]), candidates))
    return rows


def _substitute_runs(folder: Path) -> Iterator[tuple[Path, list[Path]]]:
    """(qrels, retrieved lists) of each TREC DL year that ``folder`` has both of."""
    for year in _SUBSTITUTE_RUNS:
        qrels = folder / f"qrels.{year}-passage.txt"
        runs = sorted((folder / "retrieve_results").glob(f"*/retrieve_results_{year}.json"))
        if qrels.is_file() and runs:
            yield qrels, runs


@cache
def _substitute(folder: Path) -> Substitute:
    pools: dict[str, Listing] = {}
    for qrels, runs in _substitute_runs(folder):
        grades = _read_qrels(qrels)
        hits: dict[str, dict[str, Candidate]] = {}
        queries: dict[str, str] = {}
        for path in runs:
            for entry in _read_json(path):
                for hit in entry.get("hits", ()):
                    qid, pid = str(hit["qid"]), str(hit["docid"])
                    queries[qid] = str(entry["query"])
                    grade = grades.get(qid, {}).get(pid, -1)
                    hits.setdefault(qid, {}).setdefault(pid, Candidate(
                        pid, str(hit["content"]), grade,
                        origin="judged" if grade >= 0 else "unjudged"))
        for qid, found in hits.items():
            if any(c.grade > 0 for c in found.values()):  # NDCG needs something to find
                pools[qid] = Listing(qid, queries[qid], tuple(found.values()))
    if not pools:
        raise DataError(f"{folder}: no query of its TREC DL runs has a judged relevant passage")
    return Substitute(dict(sorted(pools.items())))


def _read_json(path: Path) -> list[dict[str, Any]]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    if not isinstance(rows, list):
        raise DataError(f"{path} must be a JSON list of {{query, hits}} objects")
    return rows


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """TREC qrels ``qid iter docid grade``."""
    grades: dict[str, dict[str, int]] = {}
    for number, line in enumerate(read_data_text(path).splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4 or not fields[3].lstrip("-").isdigit():
            raise DataError(f"{path} line {number} is not 'qid iter docid grade'")
        grades.setdefault(fields[0], {})[fields[2]] = int(fields[3])
    return grades
