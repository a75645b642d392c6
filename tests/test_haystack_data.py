"""Task data: loading, task sets, the offline pack, and fetching over (loopback) HTTP."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_lceval.benchmarks.task_haystack import offline_pack
from pytest_lceval.benchmarks.task_haystack.config import OFFLINE_PACK
from pytest_lceval.benchmarks.task_haystack.data import (
    ALL64,
    MAIN16,
    PERMISSIVE16,
    TASK_FILES,
    TASK_SETS,
    TaskDataError,
    available_tasks,
    load_task,
    resolve_task_names,
)
from pytest_lceval.benchmarks.task_haystack.ranking import check_options
from pytest_lceval.models.mock import WordTokenizer


def test_task_sets_have_the_papers_sizes() -> None:
    assert len(MAIN16) == len(set(MAIN16)) == 16
    assert len(PERMISSIVE16) == len(set(PERMISSIVE16)) == 16
    assert len(ALL64) == len(set(ALL64)) == 64
    assert set(MAIN16) <= set(ALL64)
    assert len(TASK_SETS["all80"]) == 80


def test_names_resolve_with_close_matches_for_typos() -> None:
    available = list(ALL64)
    assert resolve_task_names("main16", available) == MAIN16
    assert resolve_task_names(" emo , boolq,emo", available) == ("emo", "boolq")
    with pytest.raises(ValueError, match=r"emotoin \(did you mean emotion"):
        resolve_task_names("emotoin", available)
    with pytest.raises(ValueError, match="main16"):
        resolve_task_names("main61", available)


def test_offline_pack_has_at_least_eight_distinct_learnable_tasks() -> None:
    names = available_tasks(OFFLINE_PACK)
    assert len(names) >= 8
    tasks = [load_task(OFFLINE_PACK, name) for name in names]
    assert len({task.options for task in tasks}) == len(tasks)
    assert len({task.instruction for task in tasks}) == len(tasks)
    tokenizer = WordTokenizer()
    for task in tasks:
        check_options(tokenizer, task, task.inference_prompt.format_map(task.test[0]))
        for resample in range(5):  # balanced rounds, as the public data
            rows = task.demonstrations(resample, 16)
            labels = [row["label"] for row in rows]
            assert all(labels.count(option) == 16 for option in task.options)
        assert {row["label"] for row in task.test} == set(task.options)


def test_offline_pack_is_exactly_what_the_generator_writes(tmp_path: Path) -> None:
    offline_pack.write_pack(tmp_path)
    for name in available_tasks(OFFLINE_PACK):
        for file_name in TASK_FILES:
            assert (tmp_path / name / file_name).read_bytes() == \
                (OFFLINE_PACK / name / file_name).read_bytes(), f"{name}/{file_name}"


def test_demonstrations_beyond_the_train_file_are_refused() -> None:
    task = load_task(OFFLINE_PACK, "number_parity")
    with pytest.raises(TaskDataError, match="only 32 rows"):
        task.demonstrations(0, 17)


def test_a_malformed_task_names_the_file(tmp_path: Path) -> None:
    shutil.copytree(OFFLINE_PACK / "number_parity", tmp_path / "broken")
    with (tmp_path / "broken" / "train_3.jsonl").open("a") as handle:
        handle.write(json.dumps({"label": "odd"}) + "\n")
    with pytest.raises(TaskDataError, match=r"train_3.jsonl line 33 lacks \['text'\]"):
        load_task(tmp_path, "broken")
