"""Plain unit tests of the core: lengths, metrics, intervals, store, progress, lazy imports."""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from pytest_lceval.foundation.grid import case_seed, format_length, parse_depth, parse_length
from pytest_lceval.foundation.measurement import mean_ci
from pytest_lceval.models.mock import load_mock
from pytest_lceval.models.registry import LoadOptions, ModelSpec, UnknownModelError, split_spec
from pytest_lceval.models.stored import StoredModel
from pytest_lceval.results.records import GenerateRequest
from pytest_lceval.run.progress import CellProgress
from pytest_lceval.store.database import Store, StoreCorruptionWarning
from pytest_lceval.tasks.metrics import normalize_answer, string_match_all, substring_exact_match


@pytest.mark.parametrize(("text", "tokens"),
                         [("8k", 8192), ("1.5k", 1536), ("3000", 3000), ("128K", 131072)])
def test_lengths_are_binary_k(text: str, tokens: int) -> None:
    assert parse_length(text) == tokens
    assert parse_length(format_length(tokens)) == tokens


@pytest.mark.parametrize("bad", ["", "8x", "-1k", "0", "1.0001k"])
def test_bad_lengths_raise(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_length(bad)


def test_depth_percent_and_bounds() -> None:
    assert parse_depth("50%") == 50.0
    with pytest.raises(ValueError, match="outside 0..100"):
        parse_depth("101")


def test_case_seed_is_stable_across_processes() -> None:
    here = case_seed(42, "json_kv", 4096, 50.0, 3)
    code = ("from pytest_lceval.foundation.grid import case_seed; "
            "print(case_seed(42, 'json_kv', 4096, 50.0, 3))")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "123"}).stdout.strip()
    assert int(there) == here


def test_subem_normalises_like_squad() -> None:
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert substring_exact_match("It is the Eiffel Tower.", ["eiffel tower"]) == 1.0
    assert substring_exact_match("Paris", ["eiffel tower"]) == 0.0


def test_string_match_all_is_the_fraction_of_golds_found() -> None:
    assert string_match_all("values: 123, 456", ["123", "456", "789", "000"]) == 0.5
    with pytest.raises(ValueError):
        string_match_all("x", [])


def test_mean_ci_wilson_for_binary_and_t_for_graded() -> None:
    mean, low, high = mean_ci([1, 1, 1, 0])
    assert mean == 0.75 and 0.2 < low < 0.4 and 0.9 < high < 1.0
    mean, low, high = mean_ci([0.0] * 10)
    assert (mean, low) == (0.0, 0.0) and 0.2 < high < 0.35
    mean, low, high = mean_ci([0.5, 0.25, 0.75, 0.5])
    assert low < mean < high and mean == 0.5


def _model(tmp_path: Path) -> StoredModel:
    return StoredModel(load_mock("grep", LoadOptions()), Store(tmp_path / "s.sqlite"),
                       batch_size=2)


def _needle_request(key: int) -> GenerateRequest:
    filler = "filler " * 40
    return GenerateRequest(f"{filler}for k{key} is: {key}. {filler}\nWhat is k{key}?", 4)


def test_stored_model_sends_each_distinct_missing_request_once(tmp_path: Path) -> None:
    model = _model(tmp_path)
    requests = [_needle_request(i) for i in (1, 2, 1, 3)]
    first = model.generate(requests)
    assert model.calls.requests == 3 and model.calls.batches == 2
    again = _model(tmp_path)
    assert again.generate(requests) == first and again.calls.requests == 0


def test_corrupted_answer_is_warned_about_and_recomputed(tmp_path: Path) -> None:
    model = _model(tmp_path)
    request = _needle_request(1)
    model.generate([request])
    model.store._connect().execute("UPDATE answers SET payload = '{\"text\": \"9\"}'")
    fresh = _model(tmp_path)
    with pytest.warns(StoreCorruptionWarning, match="corrupted"):
        answer = fresh.generate([request])[0]
    assert answer.text == "1" and fresh.calls.requests == 1


def test_compute_once_runs_the_function_once(tmp_path: Path) -> None:
    store, calls = Store(tmp_path / "s.sqlite"), []

    def compute() -> int:
        calls.append(1)
        return 7

    assert store.compute_once("k", compute) == 7
    assert Store(tmp_path / "s.sqlite").compute_once("k", compute) == 7
    assert len(calls) == 1


def test_unknown_model_lists_known_specs() -> None:
    with pytest.raises(UnknownModelError, match="Did you mean hf.*Known: smollm2"):
        split_spec("hff:/x")


def test_a_model_spec_is_read_once_into_its_parts_and_keeps_its_text() -> None:
    served = ModelSpec("openai:gpt-4o")
    assert (served.kind, served.target, served.builtin, served.served) == \
        ("openai", "gpt-4o", True, True)
    assert served == "openai:gpt-4o" and json.dumps({"model": served}) == \
        '{"model": "openai:gpt-4o"}'
    assert ModelSpec(served) is served  # never parsed twice
    assert (ModelSpec("smollm2").kind, ModelSpec("vllm:/m").served) == ("preset", False)
    other = ModelSpec("toy:small")  # another plugin's spec: only loading tells
    assert (other.kind, other.target, other.builtin) == (None, "toy:small", False)
    assert pickle.loads(pickle.dumps(served)).kind == "openai"


def test_progress_in_a_log_waits_for_slow_cells_and_leaves_their_end_to_the_run_line() -> None:
    stream = io.StringIO()
    quick = CellProgress("cell", stream, log_every=60.0)
    quick(1, 2, 100, 0.1)
    quick(2, 2, 200, 0.2)
    assert stream.getvalue() == ""
    slow = CellProgress("cell", stream, log_every=0.0)
    slow(1, 4, 100, 0.5)
    slow(2, 4, 200, 1.0)
    slow(4, 4, 400, 2.0)
    assert stream.getvalue().splitlines() == ["cell: 1/4 cases, 200 tok/s",
                                              "cell: 2/4 cases, 200 tok/s"]


def test_help_imports_no_model_library(tmp_path: Path) -> None:
    code = ("import sys, pytest; code = pytest.main(['--help']); "
            "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'openai') "
            "if m in sys.modules)); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--lengths" in done.stdout and "--lceval-seed" in done.stdout
    assert done.stdout.strip().endswith("[]")


def test_no_warnings_from_mock_loading() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_mock("grep?window=100&miss=20-80", LoadOptions())
