"""Task Haystack prompts exactly as METHODS §3 and the paper's Table 3, on the offline pack."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from pytest_lceval.benchmarks.task_haystack.config import (
    OFFLINE_PACK,
    HaystackSettings,
    LengthSetting,
)
from pytest_lceval.benchmarks.task_haystack.data import available_tasks, load_task
from pytest_lceval.benchmarks.task_haystack.plan import (
    HaystackCell,
    cells,
    plan_cell,
    resample_order,
)
from pytest_lceval.benchmarks.task_haystack.prompts import (
    DEMO_SEP,
    TASK_SEP,
    StreamSpec,
    depth_percent,
    haystack,
    irrelevant_prose,
    lifelong,
    permutations,
    query,
    single_task,
    stream_subset,
    task_block,
)
from pytest_lceval.settings import Settings

NAMES = available_tasks(OFFLINE_PACK)
TASKS = tuple(load_task(OFFLINE_PACK, name) for name in NAMES)


def spec(setting: str = "recall", resample: int = 0, n_shot: int = 1,
         trial: int = 0) -> StreamSpec:
    return StreamSpec(setting, TASKS, resample, n_shot, trial, seed=7)


def full(context, task, row) -> str:  # type: ignore[no-untyped-def]
    request = context.request(task, row)
    return request.prefix + request.suffix


def demos_text(task, resample: int, n_shot: int) -> list[str]:  # type: ignore[no-untyped-def]
    return [task.demonstration_prompt.format_map(row)
            for row in task.demonstrations(resample, n_shot)]


def test_task_block_is_instruction_then_first_balanced_rounds() -> None:
    task = TASKS[0]
    block = task_block(task, 2, 3)
    lines = [task.instruction, *demos_text(task, 2, 3)]
    assert block == DEMO_SEP.join(lines)
    labels = Counter(row["label"] for row in task.demonstrations(2, 3))
    assert set(labels.values()) == {3} and set(labels) == set(task.options)


def test_single_task_is_block_then_test_input() -> None:
    task, row = TASKS[1], TASKS[1].test[0]
    context = single_task(task, 4, 2)
    assert full(context, task, row) == task_block(task, 4, 2) + DEMO_SEP + query(task, row)
    assert query(task, row) == task.inference_prompt.format_map(row)


def test_lifelong_is_stream_then_test_instruction_then_input() -> None:
    task, row = TASKS[3], TASKS[3].test[5]
    context = lifelong(spec(resample=1, n_shot=2), task)
    blocks = [task_block(t, 1, 2) for t in TASKS]
    assert full(context, task, row) == (TASK_SEP.join(blocks) + TASK_SEP + task.instruction
                                        + DEMO_SEP + query(task, row))
    # The shared prefix is the same for every test task of the stream.
    assert {lifelong(spec(resample=1, n_shot=2), t).prefix for t in TASKS} == {context.prefix}


@pytest.mark.parametrize("resample", range(5))
def test_both_conditions_use_the_same_resample(resample: int) -> None:
    task = TASKS[2]
    needle = single_task(task, resample, 1).prefix
    stream = lifelong(spec(resample=resample), task).prefix
    assert needle in stream
    for other in set(range(5)) - {resample}:
        if task_block(task, other, 1) != needle:
            assert task_block(task, other, 1) not in stream


def test_stream_follows_the_permutation_order() -> None:
    order = permutations(NAMES, 3, seed=7)[2]
    stream = tuple(load_task(OFFLINE_PACK, name) for name in order)
    prefix = haystack(stream, 0, 1)
    positions = [prefix.index(task_block(task, 0, 1)) for task in stream]
    assert positions == sorted(positions)
    assert prefix.startswith(stream[0].instruction)


def test_permutations_are_seeded_and_stable_under_count() -> None:
    five = permutations(NAMES, 5, seed=42)
    assert permutations(NAMES, 2, seed=42) == five[:2]
    assert permutations(NAMES, 5, seed=43) != five
    assert all(sorted(p) == sorted(NAMES) for p in five)
    assert len(set(five)) == 5


def test_scale_task_subsets_are_nested() -> None:
    small, large = stream_subset(NAMES, 4, seed=1), stream_subset(NAMES, 8, seed=1)
    assert large[:4] == small and len(set(large)) == 8
    assert stream_subset(NAMES, len(NAMES), seed=1) == tuple(NAMES)


def test_depth_is_the_normalised_stream_index() -> None:
    assert [depth_percent(i, 5) for i in range(5)] == [0.0, 25.0, 50.0, 75.0, 100.0]
    assert depth_percent(0, 1) == 100.0


def test_controlled_settings_have_the_shapes_of_table_3() -> None:
    task, row = TASKS[4], TASKS[4].test[0]
    block, stream = task_block(task, 0, 1), haystack(TASKS, 0, 1)
    tail = DEMO_SEP + query(task, row)

    paraphrase = full(lifelong(spec("paraphrase"), task), task, row)
    assert paraphrase == stream + TASK_SEP + task.instruction_2 + tail

    replay = full(lifelong(spec("replay"), task), task, row)
    assert replay == stream + TASK_SEP + block + tail

    # Remove as the released run_remove.sh runs it (--use_paraphrase), and as Table 3 draws it.
    remove = full(lifelong(spec("remove"), task), task, row)
    others = tuple(t for t in TASKS if t.name != task.name)
    assert remove == haystack(others, 0, 1) + TASK_SEP + task.instruction_2 + tail
    same = full(lifelong(spec("remove-same-instruction"), task), task, row)
    assert same == haystack(others, 0, 1) + TASK_SEP + task.instruction + tail
    assert block not in remove

    random_prompt = full(lifelong(spec("random"), task, prose="Some essay prose."), task, row)
    assert random_prompt == "Some essay prose." + TASK_SEP + block + tail

    demos = demos_text(task, 0, 1)
    repeat = full(lifelong(spec("repeat"), task), task, row)
    assert repeat == DEMO_SEP.join([task.instruction, *demos * len(TASKS)]) + tail
    assert repeat.count(task.instruction) == 1

    shuffled = full(lifelong(spec("repeat-shuffle", trial=1), task), task, row)
    lines = shuffled.split(DEMO_SEP)
    assert Counter(shuffled.split(DEMO_SEP)) == Counter(repeat.split(DEMO_SEP))
    assert DEMO_SEP.join(lines[1: 1 + 2 * len(demos)]) == DEMO_SEP.join(demos)  # first copy
    assert shuffled == full(lifelong(spec("repeat-shuffle", trial=1), task), task, row)


def test_seam_is_placed_before_the_separators() -> None:
    for setting in ("recall", "replay", "remove", "paraphrase", "repeat"):
        for task in TASKS[:3]:
            request = lifelong(spec(setting), task).request(task, task.test[0])
            assert request.prefix and not request.prefix[-1].isspace()
            assert request.suffix[0] == "\n"


def test_trailing_spaces_of_the_inference_template_are_dropped() -> None:
    task = dataclasses.replace(TASKS[0], inference_prompt="Sentence: {text}\nLabel: ")
    assert query(task, {"text": "hi", "label": "x"}) == "Sentence: hi\nLabel:"


def test_irrelevant_prose_is_the_essays_joined_repeated_and_cut_at_the_token_budget() -> None:
    # Lifelong-ICL's get_irrelevant_context: every essay as it is, in order, again until the
    # budget is reached, then exactly n tokens (here one character each), mid-word if need be.
    essays = ["One two.\n", "Three"]

    def encode(text: str) -> list[int]:
        return [ord(char) for char in text]

    def decode(ids: object) -> str:
        return "".join(chr(i) for i in ids)  # type: ignore[attr-defined]

    assert irrelevant_prose(essays, encode, decode, 12) == "One two.\nThr"
    assert irrelevant_prose(essays, encode, decode, 20) == "One two.\nThreeOne tw"
    assert irrelevant_prose(essays, encode, decode, 0) == ""


def _settings(**changes: object) -> HaystackSettings:
    base = HaystackSettings(
        root=OFFLINE_PACK, source="fixtures:llicl_offline", tasks=tuple(NAMES),
        lengths=(LengthSetting(len(NAMES), 1), LengthSetting(4, 2)), permutations=2,
        resamples=3, test_size=4, settings=("recall", "replay"), batch_size=8)
    return dataclasses.replace(base, **changes)


def _core(tasks: tuple[str, ...] = ()) -> Settings:
    return Settings(model="mock:icl", lengths=(1024,), depths=(50.0,), samples=1, seed=42,
                    data_dir=None, out_root=OFFLINE_PACK, run_name=None,
                    store_path=OFFLINE_PACK / "x", chat_template="off", threshold=0.5,
                    tasks=tasks)


def test_grid_is_task_by_length_by_permutation_by_setting() -> None:
    grid = cells(_settings(), _core())
    assert len(grid) == 2 * (len(NAMES) + 4) * 2
    first = grid[0]
    assert first.id == f"{stream_subset(NAMES, len(NAMES), 42)[0]}-10t1s-p0-recall"
    assert first.length_mark == "len_10t1s"
    assert {c.setting for c in grid} == {"recall", "replay"}
    narrowed = cells(_settings(), _core(tasks=(NAMES[0],)))
    assert {c.task for c in narrowed} == {NAMES[0]}


def test_plan_places_the_task_at_its_permutation_index() -> None:
    hs = _settings()
    cell = HaystackCell("task_haystack", NAMES[2], 0, None, 4, n_task=10, n_shot=1,
                        permutation=1, setting="recall")
    plan = plan_cell(cell, hs, seed=42)
    order = permutations(stream_subset(NAMES, 10, 42), 2, 42)[1]
    assert [t.name for t in plan.stream] == list(order)
    assert plan.index == order.index(NAMES[2])
    assert plan.depth == depth_percent(plan.index, 10)
    assert len(plan.rows) == 4 and sorted(plan.resamples) == [0, 1, 2]
    random_plan = plan_cell(dataclasses.replace(cell, permutation=0, setting="random"), hs, 42)
    assert random_plan.index is None and random_plan.depth is None


def test_neighbouring_tests_start_on_different_resamples() -> None:
    assert resample_order(0, 5) == (0, 1, 2, 3, 4)
    assert resample_order(6, 5) == (1, 2, 3, 4, 0)
    assert {resample_order(i, 5)[0] for i in range(5)} == set(range(5))
