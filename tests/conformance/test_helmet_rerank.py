"""HELMET's re-ranking (``load_msmarco_rerank``, ``parse_rankings``,
``calculate_retrieval_metrics``) against the project's ``msmarco_rerank``: files in HELMET's
format made from the shared TREC DL runs and qrels (HELMET's archive is not here) give
byte-identical prompts at HELMET's lengths (the file for each length, HELMET's choice of queries
and demonstrations, its cut of an overflowing prompt), raw and under SmolLM2's chat template, and
``eval.run_test`` gives the same NDCG@10 as the project on the same outputs.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
from shared_data import SHARED_DATA

from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.hf_text import HFText
from pytest_lceval.results.records import Case
from pytest_lceval.tasks.base import BuildContext

from .helmet_harness import (
    Helmet,
    cache_datasets_in,
    helmet_prompt,
    load_helmet,
    msmarco_pools,
    ranking_outputs,
    rerank_rows,
    run_args,
    run_test,
    write_jsonl,
)

CATEGORY = "HELMET load_msmarco_rerank"
TEST_QUERIES = 40
DEMO_QUERIES = 30
pytestmark = pytest.mark.skipif(not (SHARED_DATA / "msmarco_dl").is_dir(),
                                reason=f"shared data (msmarco_dl) absent from {SHARED_DATA}")


@pytest.fixture(scope="module")
def helmet(reference: Any) -> Helmet:
    return load_helmet(reference)


@pytest.fixture(scope="module")
def msmarco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose ``msmarco/`` holds files in HELMET's format: 30 passages where
    HELMET's 4k file has 14 (the prompt overflows and HELMET cuts it), 50 at 8k, 10 for the
    demonstrations (queries the test files share in part, as HELMET's do)."""
    root = tmp_path_factory.mktemp("msmarco_data")
    pools = msmarco_pools(SHARED_DATA)
    qids = sorted(pools)
    random.Random(5).shuffle(qids)
    tests, demos = qids[:TEST_QUERIES], qids[TEST_QUERIES - 10:TEST_QUERIES - 10 + DEMO_QUERIES]
    folder = root / "msmarco"
    write_jsonl(folder / "test_reranking_data_k14_dep3.jsonl",
                rerank_rows(pools, tests, 30, random.Random(1)))
    write_jsonl(folder / "test_reranking_data_k50_dep3.jsonl",
                rerank_rows(pools, tests, 50, random.Random(2)))
    write_jsonl(folder / "test_reranking_data_k10_dep3.jsonl",
                rerank_rows(pools, demos, 10, random.Random(3)))
    return root


def helmet_data(helmet: Helmet, msmarco: Path, k: int, samples: int) -> dict[str, Any]:
    """``load_data`` as ``eval.run_test`` calls it, asked for the queries ``samples`` cases
    take (three rows each)."""
    args = run_args("msmarco_rerank_psg", msmarco, chat=False, max_length=0,
                    generation_max_length=200, max_test_samples=math.ceil(samples / 3),
                    shots=2)
    folder = msmarco / "msmarco"
    return helmet.data["load_data"](args, "msmarco_rerank_psg",
                                    str(folder / f"test_reranking_data_k{k}_dep3.jsonl"),
                                    str(folder / "test_reranking_data_k10_dep3.jsonl"))


def project_cases(msmarco: Path, text: HFText, length: int, samples: int,
                  chat: bool) -> list[Case]:
    renderer = text.renderer if chat else text.renderer.without_template()
    context = BuildContext(text, renderer, DataSource(msmarco), 42)
    return builtin_task("msmarco_rerank").build(
        Cell("rerank", "msmarco_rerank", length, None, samples), context)


@pytest.mark.parametrize(("length", "k", "samples", "chat"), [
    (4096, 14, 21, False),   # demonstrations drawn from the file without every asked query
    (4096, 14, 60, False),   # ... without the asked query only (fewer than twice the rows)
    (8192, 50, 21, False),
    (4096, 14, 21, True),
])
def test_prompts_are_helmets_byte_for_byte(
        helmet: Helmet, msmarco: Path, smollm2: HFText, conformance: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, length: int, k: int, samples: int,
        chat: bool) -> None:
    cache_datasets_in(tmp_path, monkeypatch)
    data = helmet_data(helmet, msmarco, k, samples)
    rows = [dict(row) for row in data["data"]][:samples]
    cases = project_cases(msmarco, smollm2, length, samples, chat)
    assert len(rows) == len(cases) == samples
    helmets = [helmet_prompt(helmet, row, data, smollm2, length, 200, chat) for row in rows]
    conformance.compare(CATEGORY, "prompts", [
        (case.prompt, text, f"row {index} at {length}")
        for index, (case, (text, _)) in enumerate(zip(cases, helmets, strict=True))])
    for row, case, (_, ids) in zip(rows, cases, helmets, strict=True):
        assert smollm2.prompt_ids(case.prompt) == ids
        assert case.gold == tuple(row["answer"].split(" > "))
        assert case.meta["qrels"] == {pid: int(grade) for pid, grade in row["qrel"]}
        assert case.max_new_tokens == 200 and case.stop == ()
    if length == 4096:
        assert any(case.meta["truncated"] for case in cases)


@pytest.mark.parametrize("chat", [False, True], ids=["raw", "chat-template"])
def test_run_test_scores_the_outputs_as_the_project_does(
        helmet: Helmet, msmarco: Path, smollm2: HFText, conformance: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, chat: bool) -> None:
    """``eval.run_test`` end to end (its prompts, what ``eval.py`` adds to the output,
    ``parse_rankings``, ``calculate_retrieval_metrics``) against the project's cases, NDCG@10
    of the same outputs, on 120 outputs each."""
    cache_datasets_in(tmp_path, monkeypatch)
    samples = 120
    cases = project_cases(msmarco, smollm2, 4096, samples, chat)
    args = run_args("msmarco_rerank_psg", tmp_path, chat=chat, max_length=4096,
                    generation_max_length=200, max_test_samples=samples // 3, shots=2)
    given: list[str] = []

    def output(i: int, item: dict[str, Any]) -> str:
        ids = [pid for pid, _ in item["qrel"]]
        given.append(ranking_outputs(ids, item["answer"].split(" > "), 240, i)[
            (i * 7 + 120 * chat) % 240])
        return given[-1]

    folder = msmarco / "msmarco"
    prompts, results = run_test(helmet, args, smollm2,
                                str(folder / "test_reranking_data_k14_dep3.jsonl"),
                                str(folder / "test_reranking_data_k10_dep3.jsonl"), output)
    conformance.compare(CATEGORY, "prompts", [
        (case.prompt, prompt) for case, prompt in zip(cases, prompts, strict=True)])
    task = builtin_task("msmarco_rerank")
    conformance.compare(CATEGORY, "outputs", [
        (task.score(text, case), result["NDCG@10"], repr(text[:80]))
        for case, text, result in zip(cases, given, results, strict=True)])
