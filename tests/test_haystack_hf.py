"""Task Haystack on the transformers backend: a tiny random Llama with the real SmolLM2
tokenizer, so option first tokens, the prefix/suffix seam and prefix reuse meet a real
byte-level BPE. Random weights answer in milliseconds; nothing can pass by luck because every
check compares two ways of computing the same thing."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pytest_lceval.benchmarks.task_haystack.config import OFFLINE_PACK  # noqa: E402
from pytest_lceval.benchmarks.task_haystack.data import available_tasks, load_task  # noqa: E402
from pytest_lceval.benchmarks.task_haystack.prompts import StreamSpec, lifelong, single_task  # noqa: E402
from pytest_lceval.benchmarks.task_haystack.ranking import OptionCollisionError, check_options  # noqa: E402
from pytest_lceval.models.hf import HFBackend, load_hf  # noqa: E402
from pytest_lceval.models.registry import LoadOptions, MissingDependencyError  # noqa: E402
from pytest_lceval.results.records import RankRequest  # noqa: E402

TASKS = tuple(load_task(OFFLINE_PACK, name) for name in available_tasks(OFFLINE_PACK))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pytest_lceval.models.presets import preset_directory

    try:
        source = preset_directory("smollm2")
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        bos_token_id=1, eos_token_id=2, pad_token_id=2, initializer_range=0.5)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-haystack")
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def backend(tiny: Path) -> HFBackend:
    return load_hf(str(tiny), LoadOptions(chat_template="off", dtype="float32", device="cpu"))


def test_first_tokens_in_context_agree_with_the_backend(backend: HFBackend) -> None:
    for task in TASKS:
        request = lifelong(StreamSpec("recall", TASKS, 0, 1), task).request(task, task.test[0])
        ours = check_options(backend.tokenizer, task, request.suffix)
        assert ours == backend.text.option_ids(request.prefix + request.suffix, task.options)
        assert len(set(ours)) == len(ours)


def test_colliding_options_are_refused_with_the_real_tokenizer(backend: HFBackend) -> None:
    import dataclasses

    clash = dataclasses.replace(TASKS[0], options=("very good", "very bad"))
    with pytest.raises(OptionCollisionError,
                       match=r"'very good' -> ' very', 'very bad' -> ' very'"):
        check_options(backend.tokenizer, clash, "Review: fine\nSentiment:")


def test_prefix_reuse_reads_the_same_ids_and_predicts_as_the_full_prompt(
        backend: HFBackend) -> None:
    spec = StreamSpec("recall", TASKS, 2, 1)
    requests = [lifelong(spec, task).request(task, row)
                for task in TASKS[:4] for row in task.test[:3]]
    requests += [single_task(task, 2, 1).request(task, task.test[0]) for task in TASKS[:4]]
    encode = backend.tokenizer.encode
    for request in requests:  # the seam merges nothing for this byte-level BPE
        assert encode(request.prefix) + encode(request.suffix) == \
            encode(request.prefix + request.suffix)
    reused = backend.rank(requests)
    whole = backend.rank([RankRequest("", r.prefix + r.suffix, r.options) for r in requests])
    for a, b in zip(reused, whole, strict=True):
        assert a.choice == b.choice and a.prompt_tokens == b.prompt_tokens
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_the_suite_runs_on_the_hf_backend(pytester: pytest.Pytester, tiny: Path) -> None:
    suite = (Path(__file__).parent.parent / "suites" / "test_task_haystack.py").read_text()
    pytester.makepyfile(test_task_haystack=suite)
    outcome = pytester.runpytest(
        "--model", f"hf:{tiny}", "--chat-template", "off", "--lceval-device", "cpu",
        "--haystack-ntasks", "3", "--haystack-test-size", "2", "--haystack-resamples", "2",
        "--lceval-run", "r1", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert outcome.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    lines = (pytester.path / "reports" / "r1" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all('"seam_exact": true' in line for line in lines)
