"""Conformance of the cite suite's prompts with HELMET's own ``load_alce`` and its prompt files
(``prompts/asqa_revised.json``, ``prompts/qampari_revised.json``), with SmolLM2's tokenizer.

ALCE's files are not in the shared data: the test writes ALCE-format files from NQ-oracle's
questions (each with its gold passage and other questions' passages as retrieved documents) beside
HELMET's real prompt files, and the project reads them as a user's ``alce/`` folder. The
substitute's own prompt file (built by the project in HELMET's format when there is no ``alce/``
folder) is compared too. For each case, HELMET's ``load_alce`` gets the same question and
documents, the number of documents the project showed (HELMET's dataset suffix, e.g.
``alce_asqa_30``) and the project's two demonstrations where it draws them
(``random.sample``); ``model_utils.tokenize`` renders the prompt for the cell's length and
HELMET's 300-token generation budget. Not compared: how many documents a length shows (HELMET:
30/75/165/345/700 at 8k..128k, the context's end cut to fit; here whole documents while they fit:
the row "Cite length" of docs/fidelity.md)."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.cite import CiteTask
from pytest_lceval.benchmarks.helmet.cite_data import DOC_PROMPT, SUBSTITUTE_FORMATS
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.hf_text import HFText
from pytest_lceval.results.records import Case
from pytest_lceval.tasks.base import BuildContext

from .helmet_hub import hub, rendered

ORACLE = SHARED_DATA / "nq_oracle" / "nq-open-oracle.jsonl.gz"
pytestmark = pytest.mark.skipif(not ORACLE.is_file(), reason=f"no shared data at {ORACLE}")

SEED = 42
ROWS = 20
RETRIEVED = 60
"""Documents per ALCE-format question: more than a cell shows, as ALCE's files hold 100."""
CELLS = [  # (task, data, length, chat template)
    ("alce_asqa", "alce", 4096, True), ("alce_asqa", "alce", 8192, True),
    ("alce_asqa", "alce", 4096, False), ("alce_qampari", "alce", 4096, True),
    ("alce_qampari", "alce", 8192, True), ("alce_qampari", "alce", 8192, False),
    ("alce_asqa", "substitute", 4096, True), ("alce_qampari", "substitute", 4096, False),
]


@pytest.fixture(scope="module")
def helmet(reference: Callable[..., ModuleType]) -> tuple[ModuleType, ModuleType]:
    return reference("helmet", "data"), reference("helmet", "model_utils")


@pytest.fixture(scope="module")
def prompts(helmet: tuple[ModuleType, ModuleType]) -> Path:
    """HELMET's ``prompts/`` folder."""
    return Path(str(helmet[0].__file__)).parent / "prompts"


@pytest.fixture(scope="module")
def alce_data(tmp_path_factory: pytest.TempPathFactory, prompts: Path) -> Path:
    return write_alce_data(tmp_path_factory.mktemp("alce_data"), prompts)


@pytest.fixture(scope="module")
def alce_150(tmp_path_factory: pytest.TempPathFactory, prompts: Path) -> Path:
    """Files of 150 questions: issue #34's inputs, of which HELMET asks 100."""
    return write_alce_data(tmp_path_factory.mktemp("alce_150"), prompts, 150)


def write_alce_data(root: Path, prompts: Path, questions: int = 3 * ROWS) -> Path:
    """A data directory with ALCE-format files of ``questions`` questions made from NQ-oracle,
    and HELMET's prompt files."""
    (root / "alce").mkdir()
    with gzip.open(ORACLE, "rt", encoding="utf-8") as lines:
        rows = [json.loads(next(lines)) for _ in range(questions + RETRIEVED)]
    passages = [{"title": row["ctxs"][0]["title"], "text": row["ctxs"][0]["text"]}
                for row in rows]
    asqa, qampari = [], []
    for number, row in enumerate(rows[:questions]):
        docs = [passages[number], *passages[number + 1:number + RETRIEVED]]
        asqa.append({"question": row["question"], "docs": docs,
                     "qa_pairs": [{"short_answers": row["answers"]}]})
        qampari.append({"question": row["question"], "docs": docs,
                        "answers": [[answer] for answer in row["answers"]]})
    (root / "alce" / "asqa_eval_gtr_top2000.json").write_text(json.dumps(asqa))
    (root / "alce" / "qampari_eval_gtr_top2000.json").write_text(json.dumps(qampari))
    for name in ("asqa_revised.json", "qampari_revised.json"):
        shutil.copy(prompts / name, root / "alce" / name)
    return root


@pytest.mark.parametrize("kind", ["asqa", "qampari"])
def test_the_substitutes_prompt_file_has_helmets_words(prompts: Path, kind: str) -> None:
    helmets = json.loads((prompts / f"{kind}_revised.json").read_text())
    assert SUBSTITUTE_FORMATS[kind] == (helmets["instruction"], helmets["demo_prompt"])
    assert helmets["doc_prompt"] == DOC_PROMPT


def helmet_prompt(helmet: tuple[ModuleType, ModuleType], smollm2: HFText,
                  monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str, case: Case,
                  length: int, template: bool) -> str:
    data, model_utils = helmet
    prompt_file = case.meta["prompt_file"]
    demo_path = tmp_path / f"{kind}_prompts.json"
    demo_path.write_text(json.dumps({
        "instruction": prompt_file.instruction, "demo_prompt": prompt_file.demo_prompt,
        "doc_prompt": prompt_file.doc_prompt, "demos": list(prompt_file.demos)}))
    row = {"question": case.meta["question"],
           "docs": [{"title": d.title, "text": d.text} for d in case.meta["documents"]]}
    chosen = case.meta["demos"]
    with hub(monkeypatch, data, smollm2.hf, {"train": [row]}), monkeypatch.context() as patch:
        patch.setattr(data, "random", SimpleNamespace(
            sample=lambda population, k: [population[i] for i in chosen][:k]))
        loaded = data.load_alce(f"alce_{kind}_{case.meta['passages']}", "unused.json",
                                str(demo_path), shots=2)
    return rendered(model_utils, smollm2.hf, loaded["data"][0], loaded, length,
                    case.max_new_tokens, template)


@pytest.mark.parametrize(("name", "data", "length", "template"), CELLS)
def test_prompts_are_helmets(helmet: tuple[ModuleType, ModuleType], smollm2: HFText,
                             monkeypatch: pytest.MonkeyPatch, tmp_path: Path, alce_data: Path,
                             conformance: Any, name: str, data: str, length: int,
                             template: bool) -> None:
    task = builtin_task(name)
    assert isinstance(task, CiteTask)
    renderer = smollm2.renderer if template else smollm2.renderer.without_template()
    source = DataSource(alce_data if data == "alce" else SHARED_DATA)
    context = BuildContext(smollm2, renderer, source, SEED)  # type: ignore[arg-type]
    cases = task.build(Cell("cite", name, length, None, ROWS), context)
    assert {case.meta["source"] for case in cases} == \
        {"data:alce" if data == "alce" else "substitute:nq_oracle"}
    conformance.compare("HELMET load_alce", "prompts", [
        (case.prompt, helmet_prompt(helmet, smollm2, monkeypatch, tmp_path, task.kind, case,
                                    length, template), case.index) for case in cases])


def selection_agreement(helmet: tuple[ModuleType, ModuleType], smollm2: HFText,
                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, alce_data: Path,
                        kind: str, samples: int) -> tuple[int, int]:
    """(compared, identical): HELMET's ``load_data`` run as ``eval.py`` runs it (the global
    ``random`` seeded with the run seed first) on the raw ALCE-format file and the prompt file,
    against the project's cases: the same question at each place (``shuffle(seed)`` then
    ``select(range(N))``) with the same two demonstrations (``random.sample`` per row of the
    file)."""
    import random

    import datasets

    from .helmet_harness import cache_datasets_in

    data, _ = helmet
    cache_datasets_in(tmp_path, monkeypatch)
    monkeypatch.setattr(datasets.Dataset, "map", _uncached_map(datasets.Dataset.map))
    args = SimpleNamespace(shots=2, max_test_samples=samples, seed=SEED)
    random.seed(SEED)
    loaded = data.load_data(args, f"alce_{kind}_5",
                            str(alce_data / "alce" / f"{kind}_eval_gtr_top2000.json"),
                            str(alce_data / "alce" / f"{kind}_revised.json"))
    rows = list(loaded["data"])
    task = builtin_task(f"alce_{kind}")
    context = BuildContext(smollm2, smollm2.renderer, DataSource(alce_data), SEED)  # type: ignore[arg-type]
    cases = task.build(Cell("cite", task.name, 4096, None, samples), context)
    assert len(rows) == len(cases) == samples
    return samples, sum(row["question"] == case.meta["question"]
                        and row["demo_text"].rstrip("\n") in case.prompt
                        for row, case in zip(rows, cases, strict=True))


def _uncached_map(plain: Callable[..., Any]) -> Callable[..., Any]:
    """``Dataset.map`` that always calls the function (a cached map would skip HELMET's draws
    from the global ``random``)."""
    def map_(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["load_from_cache_file"] = False
        return plain(self, *args, **kwargs)
    return map_


@pytest.mark.parametrize("kind", ["asqa", "qampari"])
def test_questions_and_demonstrations_are_the_ones_helmet_chooses(
        helmet: tuple[ModuleType, ModuleType], smollm2: HFText, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, alce_150: Path, conformance: Any, kind: str) -> None:
    """HELMET chooses for itself, from the raw file, the prompt file and the seed: 100 of the
    file's 150 questions, in its order, each with its pair of demonstrations. (Before, the
    project's own seeded shuffle and per-case draws: 64 questions shared, 7 with the same
    demonstrations.)"""
    compared, identical = selection_agreement(helmet, smollm2, monkeypatch, tmp_path, alce_150,
                                              kind, 100)
    conformance.record("HELMET load_alce", "prompts", compared, identical)
    assert identical == compared
