"""HELMET's RAG (``load_qa`` on its KILT files) against the project's ``kilt_*`` tasks: the same
files in HELMET's format (made from the shared NQ-open oracle passages, since HELMET's own
archive is not here) give byte-identical prompts at HELMET's lengths, raw and under SmolLM2's
chat template, and ``eval.run_test`` scores the same outputs as the project does.

The files: NQ (one gold, six depths) at 4k with more passages than fit, so HELMET's
``tokenize`` cuts the context, and at 8k; PopQA (integer ids, popularity filter, demonstrations
drawn from its own test questions); HotpotQA (two golds, three permutations); and NQ written as
HELMET's real NQ files are, without an ``id`` (``load_qa`` then keys questions, their sample
and their demonstrations' hash seed on the question text).
"""

from __future__ import annotations

import json
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
    hostile_outputs,
    kilt_rows,
    load_helmet,
    oracle_rows,
    run_args,
    run_test,
    write_jsonl,
)

CATEGORY = "HELMET load_qa (kilt)"
SAMPLES = 20
QUESTIONS = 25
"""Questions per test file: HELMET samples SAMPLES of them."""
pytestmark = pytest.mark.skipif(not (SHARED_DATA / "nq_oracle").is_dir(),
                                reason=f"shared data (nq_oracle) absent from {SHARED_DATA}")


@pytest.fixture(scope="module")
def helmet(reference: Any) -> Helmet:
    return load_helmet(reference)


@pytest.fixture(scope="module")
def kilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose ``kilt/`` holds files in HELMET's format."""
    root = tmp_path_factory.mktemp("kilt_data")
    rows = oracle_rows(SHARED_DATA)
    rng = random.Random(23)
    picked = rng.sample(range(len(rows)), 4 * QUESTIONS + 60)
    tests, demos = [rows[i] for i in picked[:QUESTIONS]], [rows[i] for i in picked[QUESTIONS:40]]
    used = {rows[i]["ctxs"][0]["text"] for i in picked}
    pool = list({r["ctxs"][0]["text"]: {"title": r["ctxs"][0]["title"], "text": r["ctxs"][0][
        "text"]} for r in (rows[i] for i in rng.sample(range(len(rows)), 400))
        if r["ctxs"][0]["text"] not in used}.values())
    folder = root / "kilt"

    def nq(i: int) -> str:
        return f"nq-{i}"

    # 40 passages where HELMET's 4k file has 20: the prompt overflows and HELMET cuts it
    write_jsonl(folder / "nq-dev-multikilt_1000_k20_dep6.jsonl",
                kilt_rows(tests, pool, 40, 6, 1, random.Random(1), nq))
    write_jsonl(folder / "nq-dev-multikilt_1000_k50_dep6.jsonl",
                kilt_rows(tests, pool, 50, 6, 1, random.Random(2), nq))
    write_jsonl(folder / "nq-train-multikilt_1000_k3_dep6.jsonl",
                kilt_rows(demos, pool, 3, 6, 1, random.Random(3), lambda i: f"train-{i}"))
    popqa = [rows[i] for i in picked[2 * QUESTIONS:2 * QUESTIONS + 25]]

    def popularity(i: int) -> dict[str, Any]:
        return {"s_pop": [12, 800, 5000, 2, 999][i % 5]}  # 5000 is filtered out (log10 >= 3)

    write_jsonl(folder / "popqa_test_1000_k20_dep6.jsonl",
                kilt_rows(popqa, pool, 12, 6, 1, random.Random(4), lambda i: 9000 - 7 * i,
                          popularity))
    write_jsonl(folder / "popqa_test_1000_k3_dep6.jsonl",
                kilt_rows(popqa, pool, 3, 6, 1, random.Random(5), lambda i: 9000 - 7 * i,
                          popularity))
    write_jsonl(folder / "hotpotqa-dev-multikilt_1000_k20_dep3.jsonl",
                kilt_rows(tests, pool, 14, 3, 2, random.Random(6), lambda i: f"hp-{i}"))
    write_jsonl(folder / "hotpotqa-train-multikilt_1000_k3_dep3.jsonl",
                kilt_rows(demos, pool, 3, 3, 2, random.Random(7), lambda i: f"hpt-{i}"))
    return root


def helmet_rows(helmet: Helmet, tmp: Path, dataset: str, test: Path, demo: Path,
                samples: int = SAMPLES) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``load_data`` as ``eval.run_test`` calls it (``random.seed`` first), its rows by
    question in file order."""
    random.seed(42)
    args = run_args(dataset, tmp, chat=False, max_length=0, generation_max_length=20,
                    max_test_samples=samples, shots=2)
    data = helmet.data["load_data"](args, dataset, str(test), str(demo))
    return [dict(row) for row in data["data"]], data


def project_cases(kilt: Path, text: HFText, task: str, length: int, depth: float | None,
                  chat: bool, samples: int = SAMPLES) -> list[Case]:
    renderer = text.renderer if chat else text.renderer.without_template()
    context = BuildContext(text, renderer, DataSource(kilt), 42)
    return builtin_task(task).build(Cell("rag", task, length, depth, samples), context)


@pytest.fixture(scope="module")
def kilt_without_ids(kilt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The NQ files of ``kilt`` as HELMET's NQ files are: rows without an ``id``."""
    root = tmp_path_factory.mktemp("kilt_without_ids")
    for path in (kilt / "kilt").glob("nq-*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        write_jsonl(root / "kilt" / path.name,
                    [{key: value for key, value in row.items() if key != "id"} for row in rows])
    return root


def by_question(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Rows grouped by HELMET's key: the ``id``, or the question where the file has none."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["id"] if "id" in row else row["question"], []).append(row)
    return list(groups.values())


FILES = [
    ("kilt_nq", "kilt_nq", "nq-dev-multikilt_1000_k20_dep6.jsonl",
     "nq-train-multikilt_1000_k3_dep6.jsonl", 4096, (0, 2, 5), False),
    ("kilt_nq", "kilt_nq", "nq-dev-multikilt_1000_k50_dep6.jsonl",
     "nq-train-multikilt_1000_k3_dep6.jsonl", 8192, (1, 3), False),
    ("kilt_nq", "kilt_nq", "nq-dev-multikilt_1000_k20_dep6.jsonl",
     "nq-train-multikilt_1000_k3_dep6.jsonl", 4096, (4,), True),
    ("kilt_popqa", "kilt_popqa_3", "popqa_test_1000_k20_dep6.jsonl",
     "popqa_test_1000_k3_dep6.jsonl", 4096, (0, 5), False),
    ("kilt_hotpotqa", "kilt_hotpotqa", "hotpotqa-dev-multikilt_1000_k20_dep3.jsonl",
     "hotpotqa-train-multikilt_1000_k3_dep3.jsonl", 4096, (None,), False),
]


@pytest.mark.parametrize(("task", "dataset", "test", "demo", "length", "depths", "chat"), FILES)
def test_prompts_are_helmets_byte_for_byte(
        helmet: Helmet, kilt: Path, smollm2: HFText, conformance: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task: str, dataset: str, test: str,
        demo: str, length: int, depths: tuple[int | None, ...], chat: bool) -> None:
    compare_prompts(helmet, kilt, smollm2, conformance, tmp_path, monkeypatch,
                    (task, dataset, test, demo, length, depths, chat))


@pytest.mark.parametrize("files", [FILES[0], FILES[2]], ids=["raw", "chat-template"])
def test_files_without_ids_are_keyed_on_the_question_as_helmet_keys_them(
        helmet: Helmet, kilt_without_ids: Path, smollm2: HFText, conformance: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: tuple[Any, ...]) -> None:
    """HELMET's NQ files have no ``id``: ``load_qa`` samples the sorted questions and seeds each
    question's demonstrations with the hash of its text; the project must ask the same
    questions with the same demonstrations."""
    assert not any("id" in json.loads(line) for path in (kilt_without_ids / "kilt").iterdir()
                   for line in path.read_text().splitlines())
    compare_prompts(helmet, kilt_without_ids, smollm2, conformance, tmp_path, monkeypatch,
                    files)


def compare_prompts(helmet: Helmet, kilt: Path, smollm2: HFText, conformance: Any,
                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                    files: tuple[Any, ...]) -> None:
    """The project's prompts for the questions HELMET asks from a test file, at each row
    (depth) of ``depths``, equal HELMET's byte for byte."""
    task, dataset, test, demo, length, depths, chat = files
    cache_datasets_in(tmp_path, monkeypatch)
    rows, data = helmet_rows(helmet, tmp_path, dataset, kilt / "kilt" / test,
                             kilt / "kilt" / demo)
    groups = by_question(rows)
    prompts, checked = [], []
    for row_index in depths:
        depth = None if row_index is None else 20.0 * row_index
        cases = project_cases(kilt, smollm2, task, length, depth, chat, len(groups))
        for index, (group, case) in enumerate(zip(groups, cases, strict=True)):
            row = group[index % len(group)] if row_index is None else group[row_index]
            text, ids = helmet_prompt(helmet, row, data, smollm2, length, 20, chat)
            prompts.append((case.prompt, text,
                            f"{task} question {index} at {length}, row {row_index}"))
            checked.append(((smollm2.prompt_ids(case.prompt), case.gold, case.max_new_tokens),
                            (ids, tuple(row["answers"]), 20)))
    conformance.compare(CATEGORY, "prompts", prompts)
    for ours, theirs in checked:
        assert ours == theirs
    assert len(prompts) >= SAMPLES and (length != 4096 or task != "kilt_nq" or
                                        any(c.meta["truncated"] for c in cases))


@pytest.mark.parametrize("chat", [False, True], ids=["raw", "chat-template"])
def test_run_test_scores_the_outputs_as_the_project_does(
        helmet: Helmet, kilt: Path, smollm2: HFText, conformance: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, chat: bool) -> None:
    """``eval.run_test`` end to end on PopQA's file (its prompts, what ``eval.py`` adds to the
    output, ``default_post_process``) against the project's cases and its score."""
    cache_datasets_in(tmp_path, monkeypatch)
    folder = kilt / "kilt"
    cases = {(case.meta["key"], case.meta["row"]): case for depth in range(0, 101, 20)
             for case in project_cases(kilt, smollm2, "kilt_popqa", 4096, float(depth), chat)}
    args = run_args("kilt_popqa_3", tmp_path, chat=chat, max_length=4096,
                    generation_max_length=20, max_test_samples=SAMPLES, shots=2)

    given: list[str] = []

    def output(i: int, item: dict[str, Any]) -> str:
        given.append(hostile_outputs(item["answers"], "Answer:", 256, 0)[(i + 128 * chat) % 256])
        return given[-1]

    prompts, results = run_test(helmet, args, smollm2,
                                str(folder / "popqa_test_1000_k20_dep6.jsonl"),
                                str(folder / "popqa_test_1000_k3_dep6.jsonl"), output)
    order = [cases[(str(row["id"]), position)] for group in by_question(results)
             for position, row in enumerate(group)]
    assert len(order) == len(cases) == len(prompts) == 6 * SAMPLES
    task = builtin_task("kilt_popqa")
    rows = list(zip(order, prompts, given, results, strict=True))
    conformance.compare(CATEGORY, "prompts", [(case.prompt, prompt) for case, prompt, _, _ in rows])
    conformance.compare(CATEGORY, "outputs", [
        (task.score(text, case), float(result["substring_exact_match"]), repr(text[:80]))
        for case, _, text, result in rows])
