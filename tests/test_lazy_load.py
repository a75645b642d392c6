"""The hf backend loads its weights at the first request the store lacks, never before.

A rerun whose answers are all stored must not pay for the weights, so the backend is built from
the tokenizer and the configs alone, and everything it reads before loading (the fingerprint's
dtype, the EOS ids that pad a pad-less tokenizer, the context window, the prefill chunk) must be
what the loaded model has, or a stored answer would be keyed differently from a computed one.
Tiny random models with the real SmolLM2 tokenizer, as in test_hf_backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from toy_suite import RECALL_SUITE

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pytest_lceval.models import hf  # noqa: E402
from pytest_lceval.models.registry import (  # noqa: E402
    LoadOptions,
    MissingDependencyError,
    ModelUnavailable,
)
from pytest_lceval.models.stored import StoredModel  # noqa: E402
from pytest_lceval.results.records import GenerateRequest, Prompt  # noqa: E402
from pytest_lceval.store.database import Store  # noqa: E402

REFUSE_WEIGHTS = """
import pytest

from pytest_lceval.models import hf


def _refuse(checkpoint):
    raise OSError("weights refused")


@pytest.fixture(autouse=True, scope="session")
def _weights_refused():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf.Checkpoint, "load", _refuse)
        yield
"""
"""A conftest under which any weight load fails, in every process of the inner run."""
GRID = ["--lceval-tasks", "niah_single_1", "--lengths", "256", "--depths", "0,50,100",
        "--samples", "1", "--lceval-threshold", "0", "-p", "no:randomly",
        "--lceval-context-size", "fill"]  # RULER's first step takes more than a 256 cell
"""Three cells, answered by a tiny model in well under a second each."""


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """'gen': generation_config.json names EOS ids that config.json does not (from_pretrained
    takes the file's); 'nogen': no generation_config.json and no pad token, so the pad comes
    from config.json's EOS and shows in the fingerprint; 'broken': weights that cannot be read."""
    from pytest_lceval.models.presets import preset_directory

    try:
        source = preset_directory("smollm2")
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    root = tmp_path_factory.mktemp("lazy")
    for name, eos in (("gen", 2), ("nogen", 5), ("broken", 2)):
        tokenizer = transformers.AutoTokenizer.from_pretrained(source)
        config = transformers.LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            bos_token_id=1, eos_token_id=eos)
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(config)
        if name == "gen":
            model.generation_config.eos_token_id = [2, 7]
        if name == "nogen":
            tokenizer.pad_token = None
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    (root / "nogen" / "generation_config.json").unlink()
    (root / "broken" / "model.safetensors").write_bytes(b"not a safetensors file")
    return {name: root / name for name in ("gen", "nogen", "broken")}


@pytest.fixture
def refused(monkeypatch: pytest.MonkeyPatch) -> list[hf.Checkpoint]:
    """Weight loads fail, and are recorded."""
    loads: list[hf.Checkpoint] = []

    def refuse(checkpoint: hf.Checkpoint) -> Any:
        loads.append(checkpoint)
        raise OSError("weights refused")

    monkeypatch.setattr(hf.Checkpoint, "load", refuse)
    return loads


def test_a_backend_answers_everything_but_a_request_without_its_weights(
        folders: dict[str, Path], refused: list[hf.Checkpoint]) -> None:
    backend = hf.load_hf(str(folders["gen"]), LoadOptions())
    assert len(backend.fingerprint) == 64 and backend.context_window == 1024
    assert backend.describe()["dtype"] == "float32"
    prompt = backend.renderer.render(Prompt("Hello"))
    assert prompt.startswith("<|im_start|>") and backend.renderer.count(prompt) > 1
    assert refused == []


@pytest.mark.parametrize("name", ["gen", "nogen"])
def test_what_is_read_before_the_weights_is_what_the_loaded_model_has(
        folders: dict[str, Path], name: str) -> None:
    backend = hf.load_hf(str(folders[name]), LoadOptions())
    fingerprint = backend.fingerprint
    model = backend.model
    assert backend._eos == hf._as_list(model.generation_config.eos_token_id)
    assert backend.identity()["dtype"] == str(model.dtype)
    assert (backend.context_window, backend.window_source) == \
        hf._context_window(model.config, backend.hf_tokenizer)
    assert backend.prefill_chunk is None and not hf._has_sliding_layers(model.config)
    assert backend.fingerprint == fingerprint
    assert backend._eos == ([2, 7] if name == "gen" else [5])  # the file's, else config.json's


def test_only_a_request_the_store_lacks_loads_the_weights(folders: dict[str, Path],
                                                         tmp_path: Path) -> None:
    request = GenerateRequest("The capital of France is", 4, ())
    store = Store(tmp_path / "store.sqlite")
    try:
        cold = hf.load_hf(str(folders["gen"]), LoadOptions())
        StoredModel(cold, store).generate([request])
        assert "model" in vars(cold)
        warm = hf.load_hf(str(folders["gen"]), LoadOptions())
        answers = StoredModel(warm, store).generate([request])
        assert "model" not in vars(warm) and answers[0].prompt_tokens > 0
    finally:
        store.close()


def test_weights_that_cannot_be_read_fail_the_first_request_in_one_line(
        folders: dict[str, Path]) -> None:
    backend = hf.load_hf(str(folders["broken"]), LoadOptions())
    assert backend.fingerprint  # the backend itself is fine: tokenizer and config read
    with pytest.raises(ModelUnavailable) as caught:
        backend.generate([GenerateRequest("Hello", 4, ())])
    message = str(caught.value)
    assert message.startswith(f"cannot load --model=hf:{folders['broken']}: ")
    assert "deserializ" in message and "\n" not in message


# -- through the plugin ------------------------------------------------------------------------

def _rows(pytester: pytest.Pytester, run: str) -> list[dict[str, Any]]:
    text = (pytester.path / "reports" / run / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def recall(pytester: pytest.Pytester, folders: dict[str, Path]) -> Iterator[list[str]]:
    """The recall suite on the tiny model with a store of its own; yields the common args."""
    pytester.makepyfile(test_recall=RECALL_SUITE)
    yield [f"--model=hf:{folders['gen']}", f"--lceval-store={pytester.path / 'store.sqlite'}",
           *GRID]


def test_a_stored_rerun_never_loads_the_weights_in_any_worker(
        pytester: pytest.Pytester, recall: list[str]) -> None:
    pytester.runpytest(*recall, "--lceval-run=cold").assert_outcomes(passed=3)
    pytester.makeconftest(REFUSE_WEIGHTS)
    pytester.runpytest(*recall, "--lceval-run=warm").assert_outcomes(passed=3)
    pytester.runpytest_subprocess(*recall, "--lceval-run=warm2", "-n", "2").assert_outcomes(
        passed=3)
    assert sum(row["model_requests"] for row in _rows(pytester, "cold")) == 3
    for run in ("warm", "warm2"):
        assert sum(row["model_requests"] for row in _rows(pytester, run)) == 0


def test_a_load_that_fails_stops_the_run_at_the_first_cell_that_needs_the_model(
        pytester: pytest.Pytester, recall: list[str]) -> None:
    """The stored cell passes without the weights; the next one fails to load them in one line
    and the run stops, as a backend that cannot be built stops it."""
    pytester.runpytest(*recall, "--lceval-run=first", "-k", "256-0]").assert_outcomes(
        passed=1, deselected=2)
    pytester.makeconftest(REFUSE_WEIGHTS)
    outcome = pytester.runpytest(*recall, "--lceval-run=all")
    assert outcome.ret == pytest.ExitCode.INTERRUPTED
    outcome.assert_outcomes(passed=1, failed=1)
    outcome.stdout.fnmatch_lines(["*Interrupted: pytest-lceval: cannot load --model=hf:*: "
                                  "weights refused*"])


def test_weights_that_cannot_be_read_stop_the_run_in_one_line(
        pytester: pytest.Pytester, folders: dict[str, Path]) -> None:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    outcome = pytester.runpytest(f"--model=hf:{folders['broken']}", *GRID)
    assert outcome.ret == pytest.ExitCode.INTERRUPTED
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([f"*Interrupted: pytest-lceval: cannot load "
                                  f"--model=hf:{folders['broken']}: Error while deserializing "
                                  f"header*"])
    assert "Traceback" not in outcome.stdout.str()


def test_the_run_says_once_what_the_cpu_decoder_probe_found_and_a_stored_rerun_not_at_all(
        pytester: pytest.Pytester, recall: list[str]) -> None:
    """The probe runs as the weights load, at the first cell the store lacks, and the run
    prints its one line (which shortcuts are off on this host, and why). A rerun whose answers
    are all stored loads no weights, so it probes nothing and says nothing."""
    cold = pytester.runpytest(*recall, "--lceval-run=cold")
    cold.assert_outcomes(passed=3)
    said = [line for line in cold.outlines if line.startswith("lceval: CPU decoder: ")]
    assert len(said) == 1 and said[0].endswith(" s)")
    warm = pytester.runpytest(*recall, "--lceval-run=warm")
    warm.assert_outcomes(passed=3)
    assert not [line for line in warm.outlines if "CPU decoder" in line]
