"""HELMET's re-ranking task: HELMET's parse and prompt, NDCG@10 against trec_eval and by hand,
the loaders of HELMET's file format and of the TREC DL substitute, and a suite run."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from run_outputs import read_results
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.rerank import (
    RerankTask,
    ndcg_at_10,
    parse_ranking,
)
from pytest_lceval.benchmarks.helmet.rerank_data import (
    SUBSTITUTE,
    Candidate,
    HelmetFiles,
    balanced_order,
    helmet_asked,
    helmet_demos,
    load,
)
from pytest_lceval.builtin_suites import builtin_task, builtin_tasks
from pytest_lceval.foundation.data import DataError, DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.results.records import Case
from pytest_lceval.run.generation_suite import NeedsData
from pytest_lceval.tasks.base import BuildContext

FIXTURES = Path(__file__).resolve().parent / "data" / "helmet"
SUBSTITUTE_DATA = SHARED_DATA / "msmarco_dl"
needs_substitute = pytest.mark.skipif(not SUBSTITUTE_DATA.is_dir(),
                                      reason=f"no TREC DL data at {SUBSTITUTE_DATA}")
SUITE_FILE = (Path(__file__).resolve().parents[1] / "suites" / "test_rerank.py").read_text()

# HELMET's prompt for msmarco_rerank_psg (data.py, load_msmarco_rerank), as the reference the
# task's prompt is pinned against: user template + "\n" + system template, no chat template.
HELMET_USER = (
    "You are provided with a list of documents, each indicated by their ID. Rank each document "
    "based on their relevance to the question in descending order from most relelvant to least "
    "relevant texts. Include all documents in the rankings. Write your answer using the unique "
    "IDs, with the following format:\nRanking: ID3 > ID1 > ID2\n\n{demos}{context}\n\n"
    "Query: {question}")
HELMET_PASSAGE = "[ID: {id}] Document: {text}"


def context(root: Path | None, seed: int = 0) -> BuildContext:
    tokenizer = WordTokenizer()
    return BuildContext(tokenizer, Renderer(None, lambda text: len(tokenizer.encode(text))),
                        DataSource(root), seed)


def build(root: Path | None, length: int, samples: int, seed: int = 0) -> list[Case]:
    return RerankTask().build(Cell("rerank", "msmarco_rerank", length, None, samples),
                              context(root, seed))


def fixture_rows(name: str) -> list[dict]:
    path = FIXTURES / "msmarco" / name
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- HELMET's parse ---------------------------------------------------------------------------

@pytest.mark.parametrize(("output", "ranking"), [
    (" 3 > 1 > 2", {"3": 3.0, "1": 2.0, "2": 1.0}),
    (" [ID: 3] > [ID: 1] > [ID: 2]", {"3": 3.0, "1": 2.0, "2": 1.0}),
    (" ID3 > ID1 > ID2", {"3": 3.0, "1": 2.0, "2": 1.0}),
    # the longest chain wins over a stray number; a repeat keeps its first place
    ("I read 12 documents. 7 > 5 > 7 > 9", {"7": 4.0, "5": 3.0, "9": 1.0}),
    # a lone id is a ranking of one (HELMET's pattern accepts it)
    ("Ranking: 42", {"42": 1.0}),
])
def test_rankings_parse_as_helmet_parses_them(output: str, ranking: dict[str, float]) -> None:
    assert parse_ranking(output) == ranking


def test_an_output_without_ids_is_unparsed_scores_zero_and_is_counted() -> None:
    task = RerankTask()
    case = Case(0, "", ("1",), 10, meta={"qrels": {"1": 3, "2": 0}})
    assert parse_ranking("Legionella causes pneumonia.") is None
    assert task.score("Legionella causes pneumonia.", case) == 0.0
    assert task.score(" 1 > 2", case) == 1.0
    assert task.cell_metrics(["no ranking", " 1 > 2", ""], [case] * 3, {}) == {"unparsed": 2.0}


# --- NDCG@10: the library against the TREC DL definition, by hand ----------------------------

def dcg(gains: list[int]) -> float:
    """DCG as TREC DL defines it with trec_eval's linear gain: sum of grade / log2(rank + 1)."""
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains[:10], start=1))


# Three queries with graded (0-3) qrels and a fixed ranking each.
QRELS = {
    "q1": {"a": 3, "b": 2, "c": 0, "d": 1},
    "q2": {f"p{i}": 0 for i in range(12)} | {"p0": 2, "p11": 3},
    "q3": {"x": 1, "y": 0, "z": 2},
}
RANKINGS = {
    "q1": ["c", "a", "d", "b"],
    "q2": [f"p{i}" for i in range(12)],  # the grade-3 passage ranked 12th: cut off by @10
    "q3": ["unknown", "z", "x"],          # an id outside the qrels gains nothing
}
BY_HAND = {
    "q1": dcg([0, 3, 1, 2]) / dcg([3, 2, 1, 0]),
    "q2": dcg([2] + [0] * 9) / dcg([3, 2]),
    "q3": dcg([0, 2, 1]) / dcg([2, 1, 0]),
}


def scores(ids: list[str]) -> dict[str, float]:
    return {pid: float(len(ids) - rank) for rank, pid in enumerate(ids)}


@pytest.mark.parametrize("qid", sorted(QRELS))
def test_ndcg_at_10_is_trec_evals_and_matches_the_definition_by_hand(qid: str) -> None:
    assert ndcg_at_10(QRELS[qid], scores(RANKINGS[qid])) == pytest.approx(BY_HAND[qid], abs=1e-4)


def test_ndcg_mean_over_the_three_queries_and_the_gain_is_linear() -> None:
    library = [ndcg_at_10(QRELS[q], scores(RANKINGS[q])) for q in sorted(QRELS)]
    assert sum(library) / 3 == pytest.approx(sum(BY_HAND.values()) / 3, abs=1e-4)
    # q1 on paper: (3/log2 3 + 1/log2 4 + 2/log2 5) / (3 + 2/log2 3 + 1/log2 4)
    #            = (1.8928 + 0.5 + 0.8614) / (3 + 1.2619 + 0.5) = 3.2542 / 4.7619
    assert BY_HAND["q1"] == pytest.approx(0.6834, abs=1e-4)
    # trec_eval (and so HELMET) uses the grade as the gain, not 2^grade - 1 (Burges' form):
    exponential = (dcg([0, 7, 1, 3]) / dcg([7, 3, 1, 0]))
    assert library[0] != pytest.approx(exponential, abs=1e-3)


def test_a_perfect_ranking_scores_one() -> None:
    qrels = QRELS["q1"]
    assert ndcg_at_10(qrels, scores(sorted(qrels, key=qrels.__getitem__, reverse=True))) == 1.0


# --- HELMET's file format ---------------------------------------------------------------------

def test_helmet_files_load_with_their_three_permutations_and_demo_file() -> None:
    data = load(DataSource(FIXTURES))
    assert isinstance(data, HelmetFiles) and data.source == "data:msmarco"
    rows = fixture_rows("test_reranking_data_k14_dep3.jsonl")
    read, own_file = data.test_rows(4096)  # HELMET's file for 4k is its k14 file
    assert own_file and [r.qid for r in read] == [row["qid"] for row in rows]
    for row, listing in zip(rows, read, strict=True):
        assert [c.pid for c in listing.candidates] == [c["id"] for c in row["ctxs"]]
        assert [c.grade for c in listing.candidates] == [c["label"] for c in row["ctxs"]]
    assert data.test_rows(1000) == (read, False)  # elsewhere the largest file, k fitted
    asked = helmet_asked(read, 4, seed=0)  # two queries' rows, in file order
    assert len(asked) == 6 and len({r.qid for r in asked}) == 2
    demos = helmet_demos(data.demo_rows(), asked, asked[0].qid, 2)
    assert asked[0].qid not in {d.qid for d in demos} and len({d.qid for d in demos}) == 2
    assert all(len(d.candidates) == 10 for d in demos)


def test_a_helmet_folder_without_its_demo_file_is_a_data_error(tmp_path: Path) -> None:
    (tmp_path / "msmarco").mkdir()
    source = FIXTURES / "msmarco" / "test_reranking_data_k14_dep3.jsonl"
    (tmp_path / "msmarco" / source.name).write_text(source.read_text())
    with pytest.raises(DataError, match="test_reranking_data_k10_dep3.jsonl"):
        load(DataSource(tmp_path))


def test_a_ctx_without_a_label_names_its_file_and_record(tmp_path: Path) -> None:
    folder = tmp_path / "msmarco"
    folder.mkdir()
    for name in ("test_reranking_data_k14_dep3.jsonl", "test_reranking_data_k10_dep3.jsonl"):
        (folder / name).write_text((FIXTURES / "msmarco" / name).read_text())
    row = {"qid": "1", "query": "q", "ctxs": [{"id": "5", "text": "t"}]}
    (folder / "test_reranking_data_k20_dep3.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError, match=r"k20_dep3.jsonl record 1: .*label"):
        build(tmp_path, 750, 1)  # a length HELMET has no file for: the largest file is read


def test_without_data_the_task_has_no_cells_and_its_error_names_both_folders() -> None:
    task = builtin_task("msmarco_rerank")
    assert isinstance(task, NeedsData)
    assert task.missing_data(DataSource(FIXTURES)) is None
    assert "<data>/msmarco_dl/" in (task.missing_data(DataSource(None)) or "")
    with pytest.raises(DataError, match=r"<data>/msmarco/.*<data>/msmarco_dl/"):
        build(None, 1024, 1)


def test_prompt_is_helmets_template_for_a_fixed_seed() -> None:
    [case] = build(FIXTURES, 750, 1)
    meta = case.meta
    tests = [r for r in fixture_rows("test_reranking_data_k14_dep3.jsonl")
             if r["qid"] == meta["qid"]]
    demo_rows = fixture_rows("test_reranking_data_k10_dep3.jsonl")
    demos = ""
    for qid, permutation in zip(meta["demo_qids"], (0, 1), strict=True):  # HELMET's draw
        row = [r for r in demo_rows if r["qid"] == qid][permutation]
        ranking = " > ".join(c["id"] for c in sorted(row["ctxs"], key=lambda c: c["label"],
                                                     reverse=True))
        demos += ("\n\n".join(HELMET_PASSAGE.format(**c) for c in row["ctxs"]) +
                  f"\n\nQuery: {row['query']}\nRanking: {ranking}" + "\n\n")
    shown = tests[meta["permutation"]]["ctxs"][:meta["k"]]
    context_text = "\n\n".join(HELMET_PASSAGE.format(**c) for c in shown)
    expected = HELMET_USER.format(demos=demos, context=context_text,
                                  question=tests[0]["query"]) + "\nRanking:"
    assert case.prompt == expected
    assert (meta["qid"], meta["permutation"], meta["k"], meta["demo_qids"]) == \
        ("900002", 0, 10, ["900001", "900003"])  # HELMET's choices for seed 0
    assert case.prompt.startswith(
        "You are provided with a list of documents, each indicated by their ID. Rank each "
        "document based on their relevance to the question in descending order from most "
        "relelvant to least relevant texts. Include all documents in the rankings. Write your "
        "answer using the unique IDs, with the following format:\nRanking: ID3 > ID1 > ID2\n\n"
        "[ID: 7200008]")
    assert case.prompt.endswith("\n\nQuery: what do river otters eat\nRanking:")
    assert 0.99 * 750 <= case.total_tokens <= 750
    assert case.stop == () and case.max_new_tokens == 200
    assert case.meta["output_prefix"] == "Ranking:"  # eval.py scores "Ranking:" + the output
    assert case.gold[0] in {c["id"] for c in shown if c["label"] == 3}


def test_cases_ask_each_query_in_three_permutations() -> None:
    cases = build(FIXTURES, 750, 4)
    assert [(c.meta["qid"] == cases[0].meta["qid"], c.meta["permutation"]) for c in cases] == \
        [(True, 0), (True, 1), (True, 2), (False, 0)]
    assert len({c.prompt for c in cases[:3]}) == 3


# --- label balance and the substitute ---------------------------------------------------------

def test_balanced_order_deals_one_per_grade_then_the_unjudged() -> None:
    pool = [Candidate(f"{g}{i}", "t", g) for g in (0, 1, 2, 3) for i in range(3)]
    pool += [Candidate(f"u{i}", "t", -1) for i in range(2)]
    order = balanced_order(pool, random.Random(1))
    assert [c.grade for c in order] == [3, 2, 1, 0] * 3 + [0, 0]
    assert [c.origin for c in order[-2:]] == ["unjudged", "unjudged"]


@needs_substitute
def test_substitute_pairs_queries_across_lengths_and_fills_them_by_k() -> None:
    short, long = build(SHARED_DATA, 1024, 3), build(SHARED_DATA, 4096, 3)
    assert [c.meta["qid"] for c in short] == [c.meta["qid"] for c in long]
    assert all(c.meta["source"] == SUBSTITUTE for c in short + long)
    # whole passages: a prompt within one passage of the 99 % window is accepted (fitting.fit)
    assert all(0.95 * c_len <= c.total_tokens <= c_len
               for cases, c_len in ((short, 1024), (long, 4096)) for c in cases)
    assert long[0].meta["k"] > short[0].meta["k"] >= 5
    # the three permutations show the same passages in different orders
    shown = [list(c.meta["qrels"]) for c in long]
    assert len({tuple(s) for s in shown}) == 3 and len({frozenset(s) for s in shown}) == 1
    # ... and they are the first k of the query's label-balanced order
    meta = long[0].meta
    order = load(DataSource(SHARED_DATA)).order(meta["qid"], 0, seed=0)
    assert set(meta["qrels"]) == {c.pid for c in order[:meta["k"]]}


@needs_substitute
def test_the_suite_runs_cells_and_records_source_and_metrics(pytester: pytest.Pytester) -> None:
    assert [task.name for task in builtin_tasks("rerank")] == ["msmarco_rerank"]
    pytester.makepyfile(test_rerank=SUITE_FILE)
    # "--opt=path": a bare path argument would make pytest take the data folder for rootdir
    outcome = pytester.runpytest("--model", "mock:grep", f"--lceval-data={SHARED_DATA}",
                                 "--lengths", "1k,2k", "--samples", "2", "--lceval-run", "r",
                                 "--lceval-threshold", "0", "-p", "no:randomly")
    outcome.assert_outcomes(passed=2)
    rows = read_results(pytester, "r")
    assert [row["source"] for row in rows] == [SUBSTITUTE] * 2
    assert all(row["n"] == 2 and row["metrics"]["chat_template"] == "off" for row in rows)
    assert all(row["metrics"]["unparsed"] == 2.0 for row in rows)


RANKER = '''
import re

from pytest_lceval.models.mock import MockBackend
from pytest_lceval.results.records import Generation


class ShownOrder(MockBackend):
    """Ranks the test candidates in the order shown (a backend added through the hook)."""

    def identity(self):
        return {**super().identity(), "ranker": "shown-order"}

    def generate(self, requests):
        answers = []
        for request in requests:
            candidates = request.prompt.rsplit("Ranking:", 2)[-2]
            ids = re.findall(r"\\[ID: ([^\\]]+)\\]", candidates)
            answers.append(Generation(" > ".join(f"[{i}]" for i in ids), 1, 1))
        return answers


def pytest_lceval_make_backend(spec, options):
    return ShownOrder("grep", {}, options) if spec == "ranker:shown-order" else None
'''


@needs_substitute
def test_longscore_judges_the_long_cells_against_the_base_length(
        pytester: pytest.Pytester) -> None:
    """A HELMET suite is a length sweep like recall: LongScore's base runs like any cell."""
    pytester.makeconftest(RANKER)
    pytester.makepyfile(test_rerank=SUITE_FILE)
    pytester.runpytest("--model", "ranker:shown-order", f"--lceval-data={SHARED_DATA}",
                       "--lengths", "1k,2k", "--samples", "3", "--longscore-base-lengths", "1k",
                       "--lceval-run", "r", "--lceval-threshold", "0", "-p", "no:randomly")
    rows = {row["length"]: row for row in read_results(pytester, "r")}
    base, long = rows[1024]["metrics"], rows[2048]["metrics"]
    assert base["longscore_role"] == "base" and long["longscore_role"] == "long"
    assert rows[1024]["score"] > 0 and long["longscore_base"] == pytest.approx(
        rows[1024]["score"])
    assert long["longscore"] == pytest.approx(
        100 * (rows[2048]["score"] - rows[1024]["score"]) / rows[1024]["score"], abs=1e-3)
