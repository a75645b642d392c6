"""Property tests of the recall generators, on the mock word tokenizer and on SmolLM2's BPE.

Every property is checked against an independent measurement where one exists: lengths with the
model's own renderer, depths by tokenising the context before the needle, golds by parsing the
context (the JSON object with ``json.loads``).
"""

from __future__ import annotations

import json
import re
import time
from itertools import cycle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.ruler.filler_items import Stream, fill
from pytest_lceval.benchmarks.ruler.filler_text import NOISE, Piece, insert_at_depth
from pytest_lceval.benchmarks.ruler.json_kv import INSTRUCTION, JsonKvTask
from pytest_lceval.benchmarks.ruler.niah import NiahTask
from pytest_lceval.benchmarks.ruler.size_search import niah_steps
from pytest_lceval.builtin_suites import builtin_task, builtin_tasks
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import MockBackend
from pytest_lceval.models.registry import LoadOptions
from pytest_lceval.results.records import Case
from pytest_lceval.tasks.base import BuildContext, CellDoesNotFit
from pytest_lceval.tasks.context_size import REFERENCE
from pytest_lceval.tasks.fitting import window

RECALL = sorted(task.name for task in builtin_tasks("recall"))
RETRIEVAL = sorted(task.name for task in builtin_tasks("recall")
                   if isinstance(task, NiahTask | JsonKvTask))
"""The tasks that retrieve a keyed item (the aggregation tasks are checked in
test_recall_fidelity)."""
HAS_DATA = (SHARED_DATA / "pg_essays").is_dir()
PROPERTIES = settings(max_examples=25, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])


SOURCES = [DataSource(None), *([DataSource(SHARED_DATA)] if HAS_DATA else [])]
"""The offline fixtures always; the shared data directory (pg_essays) when this machine has it."""
sources = st.sampled_from(SOURCES)


def mock_context(template: bool, data: DataSource, seed: int = 0) -> BuildContext:
    backend = MockBackend("grep", {}, LoadOptions(chat_template="on" if template else "off"))
    return BuildContext(backend.tokenizer, backend.renderer, data, seed)



# -- independent views of a case ------------------------------------------------------------------


def context_span(task: object, prompt: str) -> tuple[int, int]:
    """Where the test context lies in a rendered prompt (the demonstrations come before it)."""
    if isinstance(task, JsonKvTask):
        head = "JSON data:\n{"
        return prompt.rfind(head) + len(head), prompt.rfind("}\n\n" + INSTRUCTION)
    assert isinstance(task, NiahTask)
    head = task.wording.instruction() + "\n"
    return prompt.rfind(head) + len(head), prompt.rfind("\nWhat ")


def gold_items(task: object, case: Case) -> list[str]:
    """The texts that carry the answer: the queried needles, or the queried JSON pair."""
    key = case.meta["keys"][0]
    if isinstance(task, JsonKvTask):
        return [f'"{key}": "{case.gold[0]}"']
    assert isinstance(task, NiahTask)
    if task.queries > 1:
        keys = case.meta["keys"]
        return [task.wording.needle(k, v) for k, v in zip(keys, case.gold, strict=True)]
    return [task.wording.needle(key, value) for value in case.gold]


def occurrences(key: str, text: str) -> int:
    """Whole-key occurrences ('old-oak' is not counted inside 'bold-oak')."""
    return len(re.findall(rf"(?<![\w-]){re.escape(key)}(?![\w-])", text))


def measured_depth(tokenizer: object, context: str, item: str) -> float:
    encode = tokenizer.encode  # type: ignore[attr-defined]
    before = len(encode(context[: context.index(item)].rstrip()))
    return 100.0 * before / max(len(encode(context)) - len(encode(item)), 1)


def check_case(task: object, case: Case, context: BuildContext, length: int,
               depth: float | None) -> None:
    """Every property a built case must have."""
    renderer = context.renderer
    low, high = window(length)
    # RULER never cuts a noise line: such a haystack may end one line short of the window.
    if isinstance(task, NiahTask) and task.haystack == "noise":
        low -= renderer.count("\n" + NOISE)
    if case.meta.get("context_size") == REFERENCE:  # RULER's search: whole steps, within
        assert isinstance(task, NiahTask)
        step = niah_steps(task.haystack, length, task.max_new_tokens, []).step
        assert case.meta["haystack_units"] % step == 0 and case.total_tokens <= high
    else:
        assert low <= case.total_tokens <= high
    assert case.prompt_tokens == renderer.count(case.prompt)
    start, end = context_span(task, case.prompt)
    assert 0 < start < end
    text = case.prompt[start:end]
    for item in gold_items(task, case):
        assert text.count(item) == 1, item
    # The question, and a raw prompt's answer prefix (HELMET starts a chat template's assistant
    # turn empty)
    asked = 1 if isinstance(task, JsonKvTask) or renderer.uses_template else 2
    for key in case.meta["keys"]:
        assert occurrences(key, case.prompt) == occurrences(key, text) + asked
    if isinstance(task, JsonKvTask):
        pairs = json.loads("{" + text + "}")
        assert pairs[case.meta["keys"][0]] == case.gold[0]
        assert case.prompt.endswith("Corresponding value:") != renderer.uses_template
    else:
        assert isinstance(task, NiahTask)
        found = [m.group(1) for key in case.meta["keys"] for m in re.finditer(
            rf"special magic \w+ for {re.escape(key)} is: ([\w-]+)\.", text)]
        assert sorted(found) == sorted(case.gold)
        assert case.prompt.endswith(task.wording.prefix(case.meta["keys"])) \
            != renderer.uses_template
    assert case.stop == ()  # HELMET's stop_new_line: false
    assert (case.chat is not None) == renderer.uses_template
    assert task.score(" " + ", ".join(case.gold) + ".", case) == 1.0  # type: ignore[attr-defined]
    if depth is None:
        assert case.depth is None
        return
    assert case.depth is not None and abs(case.depth - depth) <= 2.0
    tokens = case.meta["context_tokens"]
    real = measured_depth(context.tokenizer, text, gold_items(task, case)[0])
    assert abs(real - case.depth) <= 100.0 * 3 / tokens


def cell_for(name: str, length: int, depth: float, samples: int = 1
             ) -> tuple[object, Cell, float | None]:
    task = builtin_task(name)
    used = round(depth, 1) if task.uses_depth else None
    return task, Cell("recall", name, length, used, samples), used


# -- properties ---------------------------------------------------------------------------------


@PROPERTIES
@given(name=st.sampled_from(RETRIEVAL), length=st.integers(2048, 16384),
       depth=st.floats(0, 100), index=st.integers(0, 3), seed=st.integers(0, 2**31 - 1),
       template=st.booleans(), data=sources)
def test_cases_fit_and_place_keys_with_the_word_tokenizer(
        data: DataSource, name: str, length: int, depth: float, index: int, seed: int,
        template: bool) -> None:
    task, cell, used = cell_for(name, length, depth, samples=index + 1)
    context = mock_context(template, data, seed)
    check_case(task, task.build(cell, context)[index], context, length, used)


@PROPERTIES
@given(name=st.sampled_from(RETRIEVAL), length=st.integers(4096, 16384),
       depth=st.floats(0, 100), seed=st.integers(0, 2**31 - 1), data=sources,
       template=st.booleans())
def test_cases_fit_and_place_keys_with_a_real_bpe(
        smollm2: object, data: DataSource, name: str, length: int, depth: float,
        seed: int, template: bool) -> None:
    task, cell, used = cell_for(name, length, depth)
    renderer = smollm2.renderer  # type: ignore[attr-defined]
    if not template:  # the base-model rendering: BOS rule kept, no chat template
        renderer = Renderer(None, renderer.count)
    context = BuildContext(smollm2, renderer, data, seed)  # type: ignore[arg-type]
    check_case(task, task.build(cell, context)[0], context, length, used)


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(RECALL), length=st.integers(2048, 8192), depth=st.floats(0, 100),
       seed=st.integers(0, 2**31 - 1), data=sources)
def test_same_coordinates_give_byte_identical_prompts(
        data: DataSource, name: str, length: int, depth: float, seed: int) -> None:
    """A fresh build and one on a backend that already built the same case in another cell
    (sharing its tokenised corpus and filler) agree byte for byte."""
    task, cell, _ = cell_for(name, length, depth)
    first = task.build(cell, mock_context(True, data, seed))[0]
    warmed = mock_context(True, data, seed)
    _, other, _ = cell_for(name, length // 2 + 1024, 100 - depth)
    task.build(other, warmed)
    second = task.build(cell, warmed)[0]
    assert first.prompt == second.prompt
    assert (first.gold, first.depth, first.prompt_tokens) == \
        (second.gold, second.depth, second.prompt_tokens)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(RECALL), length=st.integers(1, 60), template=st.booleans(),
       data=sources)
def test_tiny_budgets_raise_with_the_numbers_without_hanging(
        data: DataSource, name: str, length: int, template: bool) -> None:
    task = builtin_task(name)
    started = time.perf_counter()
    with pytest.raises(CellDoesNotFit, match=rf"{name} at {length} tokens: .*\d+ tokens"):
        task.build(Cell("recall", name, length, 50.0 if task.uses_depth else None, 1),
                   mock_context(template, data))
    assert time.perf_counter() - started < 2.0


def test_real_bpe_cells_below_the_instructions_and_key_items_do_not_fit(
        smollm2: object) -> None:
    """niah_multikey_3's instructions, UUID needle and budget take over 128 SmolLM2 tokens."""
    context = BuildContext(smollm2, smollm2.renderer,  # type: ignore[arg-type]
                           DataSource(None), 0)
    with pytest.raises(CellDoesNotFit, match=r"key items \d+ .*> cell length 128"):
        builtin_task("niah_multikey_3").build(Cell("recall", "niah_multikey_3", 128, 50.0, 1),
                                          context)


# -- with the mock model ------------------------------------------------------------------------


@pytest.mark.parametrize("data", SOURCES, ids=lambda d: "data" if d.root else "fixtures")
@pytest.mark.parametrize("template", [False, True])
@pytest.mark.parametrize("name", RETRIEVAL)
def test_mock_grep_answers_every_retrieval_task(data: DataSource, name: str,
                                                template: bool) -> None:
    """mock:grep reads needles before the prompt's last 400 characters, so depths < 100 %."""
    backend = MockBackend("grep", {}, LoadOptions(chat_template="on" if template else "off"))
    context = BuildContext(backend.tokenizer, backend.renderer, data, 0)
    task = builtin_task(name)
    cases = task.build(Cell("recall", name, 4096, 40.0 if task.uses_depth else None, 3), context)
    outputs = backend.generate([case.request() for case in cases])
    assert [task.score(out.text, case) for out, case in zip(outputs, cases, strict=True)] == \
        [1.0, 1.0, 1.0]


@pytest.mark.parametrize("data", SOURCES, ids=lambda d: "data" if d.root else "fixtures")
def test_sources_are_recorded(data: DataSource) -> None:
    _, essays_source = data.essays()
    context = mock_context(False, data)
    for name in RECALL:
        task = builtin_task(name)
        case = task.build(Cell("recall", name, 2048, 50.0 if task.uses_depth else None, 1),
                          context)[0]
        essay = isinstance(task, NiahTask) and task.haystack == "essay"
        assert case.meta["source"] == (essays_source if essay else "synthetic")
        assert case.meta["requested_depth"] == (50.0 if task.uses_depth else None)


def test_offline_fixtures_build_long_haystacks_by_cycling() -> None:
    context = mock_context(False, DataSource(None))
    case = builtin_task("niah_single_2").build(Cell("recall", "niah_single_2", 32768, 50.0, 1),
                                           context)[0]
    assert case.meta["source"] == "fixtures"
    assert window(32768)[0] <= case.total_tokens <= 32768


# -- the building blocks ------------------------------------------------------------------------


def test_fill_closes_the_gap_with_uneven_items() -> None:
    sizes = cycle([7, 9, 8, 10, 7, 9, 11, 8, 9, 10, 7, 8])
    stream = Stream(("x" * size for size in sizes), lambda texts: [len(t) for t in texts])
    for budget in range(40, 200):
        assert budget - 2 <= sum(p.tokens for p in fill(stream, budget)) <= budget


def test_insert_at_depth_takes_the_boundary_nearest_the_depth() -> None:
    pieces = [Piece(" " + "word " * 49 + "end.", 50)] * 2
    item = Piece(" NEEDLE.", 2, "gold")
    assert [insert_at_depth(pieces, item, depth).index(item) for depth in (0, 20, 40, 60, 90, 100)
            ] == [0, 0, 1, 1, 2, 2]
