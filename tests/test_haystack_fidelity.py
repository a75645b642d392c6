"""Task Haystack details checked against the reference code (INK-USC/Lifelong-ICL): the NIAH
heatmap's depth bins (playground/analysis_niath.ipynb) and the Random setting's prose length
(run_repeat.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from run_outputs import read_results
from test_haystack_report import METRICS

from pytest_lceval.benchmarks.task_haystack.config import OFFLINE_PACK, LengthSetting
from pytest_lceval.benchmarks.task_haystack.data import available_tasks, load_task
from pytest_lceval.benchmarks.task_haystack.figures import depth_bins, niah_grid
from pytest_lceval.benchmarks.task_haystack.metrics import Measured
from pytest_lceval.benchmarks.task_haystack.plan import CellPlan
from pytest_lceval.benchmarks.task_haystack.prompts import (
    REPEAT_MAX_TOKENS,
    repeat_count,
    task_block,
)
from pytest_lceval.benchmarks.task_haystack.runner import HaystackMeasure
from pytest_lceval.benchmarks.task_haystack.verdict import VALUES
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.results.cells import CellResult


def test_depth_bins_are_the_reference_array_split_into_8() -> None:
    assert depth_bins(16, 8) == [b for b in range(8) for _ in range(2)]  # 8 bins of 2
    assert depth_bins(10, 8) == [0, 0, 1, 1, 2, 3, 4, 5, 6, 7]  # np.array_split's sizes
    assert depth_bins(64, 8) == [b for b in range(8) for _ in range(8)]
    assert depth_bins(3, 3) == [0, 1, 2]
    assert depth_bins(4, 8) == [0, 2, 4, 6]  # a short stream beside longer ones


def cell(index: int, verdict: str, n_task: int = 16) -> Measured:
    result = CellResult(nodeid=f"t{index}", suite="task_haystack", task=f"t{index}",
                        length=1000, depth=None, extra={}, model="m", fingerprint="f", seed=1,
                        source="s")
    result.input_tokens_mean = 1000
    return Measured(result, replace(METRICS, length_setting=f"{n_task}t1s", n_task=n_task,
                                    stream_index=index, verdict=verdict,
                                    verdict_value=VALUES[verdict]))


def test_niah_heatmap_has_the_paper_s_8_rows_of_2_positions() -> None:
    verdicts = ["FAIL" if index in (2, 3, 15) else "PASS" for index in range(16)]
    columns, rows, grid = niah_grid([cell(i, v) for i, v in enumerate(verdicts)])
    # The reference labels: round() of the depth of each bin's last position, 100 * i / 16.
    assert rows == ["6%", "19%", "31%", "44%", "56%", "69%", "81%", "94%"]
    assert [row[0] for row in grid] == [0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.5]


def test_n_repeat_is_capped_as_in_run_repeat() -> None:
    assert repeat_count(16, 1000) == 16  # one copy per task while 16 blocks fit 32768 tokens
    assert repeat_count(16, 2500) == 13  # min(16, 32768 // 2500)
    assert repeat_count(16, 40000) == 1
    assert REPEAT_MAX_TOKENS == 32768  # MAX_SEQ_LEN of run_repeat.py


def test_random_prose_is_n_repeat_minus_1_blocks_as_in_run_repeat() -> None:
    names = available_tasks(OFFLINE_PACK)[:4]
    stream = tuple(load_task(OFFLINE_PACK, name) for name in names)
    plan = CellPlan(task=stream[1], stream=stream, length=LengthSetting(4, 2), setting="random",
                    permutation=0, rows=(), resamples=(0,), seed=3)
    tokenizer = WordTokenizer()
    model = SimpleNamespace(
        tokenizer=tokenizer, renderer=Renderer(None, lambda text: len(tokenizer.encode(text))))
    run = HaystackMeasure(SimpleNamespace(data=DataSource(None)),  # type: ignore[arg-type]
                          None, model)  # type: ignore[arg-type]
    prose = run._prose(plan, 0, repeats=4)
    block = len(tokenizer.encode(task_block(stream[1], 0, 2)))
    # Cut at exactly 3 blocks' worth of tokens (n_repeat - 1 = 3).
    assert len(tokenizer.encode(prose)) == 3 * block
    # Not the rule it replaced (the recall stream minus the block: 134 words here, not 99).
    rest = sum(len(tokenizer.encode(task_block(t, 0, 2))) for t in stream) - block
    assert abs(len(tokenizer.encode(prose)) - rest) > 10


def test_repeat_cells_record_n_repeat(pytester: pytest.Pytester) -> None:
    suite = (Path(__file__).parent.parent / "suites" / "test_task_haystack.py").read_text()
    pytester.makepyfile(test_task_haystack=suite)
    pytester.runpytest("--model", "mock:icl", "--haystack-setting", "repeat,random,recall",
                       "--haystack-ntasks", "3", "--haystack-test-size", "2", "--lceval-run",
                       "r", "-p", "no:randomly", "-p", "no:cacheprovider")
    rows = read_results(pytester, "r")
    by_setting: dict[str, list[dict[str, object]]] = {}
    for row in rows:
        by_setting.setdefault(row["metrics"]["setting"], []).append(row["metrics"])
    for setting in ("repeat", "random"):
        assert all(m["n_repeat_by_resample"] == {"0": 3, "1": 3, "2": 3}
                   for m in by_setting[setting])
    assert all("n_repeat_by_resample" not in m for m in by_setting["recall"])
