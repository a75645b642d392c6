"""Model config overrides (--lceval-model-args) and the chosen window (--lceval-window).

The config side is checked on real transformers configs; the HF backend on a tiny random-weight
Llama built from a config (with SmolLM2's tokenizer), whose rotary frequencies show whether the
override reached the weights' load; whole runs through pytester, with that tiny model and with
the mock model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from toy_suite import SUITE, TOY_TASK

from pytest_lceval.models.model_args import (
    ModelArgsError,
    args_text,
    override_config,
    parse_model_args,
)
from pytest_lceval.models.registry import LoadOptions, MissingDependencyError

transformers = pytest.importorskip("transformers")

LINEAR = 'rope_scaling={"rope_type":"linear","factor":2.0}'
TOY = ["-p", "no:randomly", "--lengths", "1k", "--depths", "50", "--samples", "2",
       "--lceval-threshold", "0"]
"""One cell of the toy task (1k, depth 50, two cases); threshold 0, as a random model's
answers are wrong."""


def _llama(**values: Any) -> Any:
    return transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, **values)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight Llama (hidden size 32, window 4096) with SmolLM2's tokenizer."""
    torch = pytest.importorskip("torch")
    from pytest_lceval.models.presets import preset_directory

    try:
        source = preset_directory("smollm2")
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    folder = tmp_path_factory.mktemp("tiny") / "llama"
    torch.manual_seed(0)
    config = _llama(bos_token_id=1, eos_token_id=2, pad_token_id=2)
    config.vocab_size = len(tokenizer)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# -- the option's text ---------------------------------------------------------------------------

def test_items_are_split_at_top_level_commas_and_values_read_as_json() -> None:
    given = parse_model_args([f'rope_theta=500000,{LINEAR}', "hidden_act=gelu"])
    assert given == {"rope_theta": 500000, "hidden_act": "gelu",
                     "rope_scaling": {"rope_type": "linear", "factor": 2.0}} \
        and list(given) == ["rope_theta", "rope_scaling", "hidden_act"]
    assert args_text(given) == f'rope_theta=500000,{LINEAR},hidden_act="gelu"'


@pytest.mark.parametrize(("text", "why"), [
    ("rope_theta", "'rope_theta' is not KEY=VALUE"),
    ("=5", "'=5' is not KEY=VALUE"),
    ("a=1,a=2", "a is given twice"),
    ('rope_scaling={"factor":2', "is not valid JSON"),
])
def test_malformed_text_is_refused(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_model_args([text])


# -- against the config class --------------------------------------------------------------------

def test_rope_theta_and_rope_scaling_land_in_rope_parameters_keeping_the_models_theta() -> None:
    """transformers 5 keeps RoPE in rope_parameters: from_pretrained(rope_theta=...) ignores
    the value and rope_scaling={...} drops the model's theta; here both take effect."""
    theta = override_config(_llama(), {"rope_theta": 500000})
    assert theta.config.rope_parameters == {"rope_type": "default", "rope_theta": 500000.0}
    assert theta.changes == {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}
    scaled = override_config(_llama(), parse_model_args([LINEAR]))
    assert scaled.config.rope_parameters == {"rope_type": "linear", "factor": 2.0,
                                             "rope_theta": 100000.0}
    yarn = override_config(_llama(), parse_model_args(
        ['rope_scaling={"rope_type":"yarn","factor":4.0},max_position_embeddings=16384']))
    assert yarn.config.max_position_embeddings == 16384
    assert yarn.config.rope_parameters["original_max_position_embeddings"] == 4096  # not 16k


def test_a_value_the_model_already_has_changes_nothing() -> None:
    assert override_config(_llama(), {"rope_theta": 100000}).changes == {}


@pytest.mark.parametrize(("given", "message"), [
    ({"rope_thta": 5}, "--lceval-model-args: LlamaConfig has no key 'rope_thta'; did you mean "
                       "rope_theta?"),
    ({"rope_theta": "high"}, "--lceval-model-args: LlamaConfig.rope_theta is float (100000.0), "
                             'not "high"'),
    ({"max_position_embeddings": 2.5}, "LlamaConfig.max_position_embeddings is int (4096), "
                                       "not 2.5"),
    ({"rope_scaling": {"rope_type": "linear"}}, "Missing required keys"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 0.5}}, "factor field must be"),
    ({"rope_scaling": {"rope_type": "stretchy", "factor": 2}}, "unknown rope_type 'stretchy'; "
                                                               "transformers knows default, "),
    ({"rope_scaling": 2}, "rope_scaling must be a JSON object"),
])
def test_an_unknown_key_or_a_refused_value_is_one_line(given: dict[str, Any],
                                                       message: str) -> None:
    with pytest.raises(ModelArgsError) as failure:
        override_config(_llama(), given)
    assert message in str(failure.value) and "\n" not in str(failure.value)


# -- the HF backend ------------------------------------------------------------------------------

def test_the_override_reaches_the_config_the_weights_load_with(tiny: Path) -> None:
    from pytest_lceval.models.hf import load_hf

    plain = load_hf(str(tiny), LoadOptions())
    scaled = load_hf(str(tiny), LoadOptions(model_args=parse_model_args(
        [f"{LINEAR},max_position_embeddings=8192"])))
    assert scaled.model.config.rope_parameters["factor"] == 2.0
    inv_freq = scaled.model.model.rotary_emb.inv_freq
    assert inv_freq.tolist() == (plain.model.model.rotary_emb.inv_freq / 2).tolist()
    assert scaled.fingerprint != plain.fingerprint
    assert scaled.identity()["config_overrides"] == {
        "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 100000.0}}
    assert (plain.context_window, plain.describe()["window"]) == (4096, "4096 (model config)")
    assert scaled.describe()["window"] == \
        "8192 (max_position_embeddings in --lceval-model-args)"
    chosen = load_hf(str(tiny), LoadOptions(window=16384))
    assert (chosen.context_window, chosen.describe()["window"]) == \
        (16384, "16384 (--lceval-window)")
    assert chosen.fingerprint == plain.fingerprint  # the window skips cells, answers alike


# -- whole runs ----------------------------------------------------------------------------------

def _rows(pytester: pytest.Pytester, run: str) -> list[dict[str, Any]]:
    lines = (pytester.path / "reports" / run / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture
def toy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_an_override_answers_anew_and_without_it_the_old_answers_are_read(
        toy: pytest.Pytester, tiny: Path) -> None:
    model = ["--model", f"hf:{tiny}", *TOY]
    toy.runpytest(*model, "--lceval-run", "plain").assert_outcomes(passed=1)
    outcome = toy.runpytest(*model, "--lceval-model-args", "rope_theta=500000")
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["lceval: model args rope_theta=500000 (--lceval-model-args); "
                                  "window from the model's own config"])
    [folder] = [path.name for path in (toy.path / "reports").iterdir()
                if path.name.endswith("rope_theta_500000")]
    toy.runpytest(*model, "--lceval-run", "again").assert_outcomes(passed=1)
    plain, variant, again = _rows(toy, "plain"), _rows(toy, folder), _rows(toy, "again")
    assert plain[0]["model_requests"] == variant[0]["model_requests"] == 2
    assert again[0]["model_requests"] == 0  # the plain model's answers, read from the store
    assert variant[0]["fingerprint"] != plain[0]["fingerprint"] == again[0]["fingerprint"]
    assert variant[0]["model_args"] == {"rope_theta": 500000} and plain[0]["model_args"] == {}
    summary = (toy.path / "reports" / folder / "summary.md").read_text()
    assert f"Model `hf:{tiny} (rope_theta=500000)`" in summary


@pytest.mark.parametrize(("model", "args", "line"), [
    ("hf", "rope_thta=500000", "ERROR: pytest-lceval: --model=hf:*: --lceval-model-args: "
                               "LlamaConfig has no key 'rope_thta'; did you mean rope_theta?"),
    ("hf", 'rope_scaling={"rope_type":"yarn"}', "ERROR: pytest-lceval: --model=hf:*: "
                                                "--lceval-model-args: LlamaConfig refuses "
                                                "*Missing required keys*"),
    ("hf", "rope_theta", "ERROR: pytest-lceval: bad value * for --lceval-model-args *: "
                         "'rope_theta' is not KEY=VALUE. Write KEY=VALUE items*"),
    ("mock:grep", "rope_theta=5", "ERROR: pytest-lceval: --lceval-model-args rope_theta=5 with "
                                  "--model=mock:grep: a mock model has no config"),
])
def test_a_bad_override_stops_the_run_at_start_with_one_line(
        toy: pytest.Pytester, tiny: Path, model: str, args: str, line: str) -> None:
    spec = f"hf:{tiny}" if model == "hf" else model
    outcome = toy.runpytest("--model", spec, *TOY, "--lceval-model-args", args)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines([line])
    assert len([text for text in outcome.stderr.lines if text.strip()]) == 1


def test_the_window_option_sets_the_skipped_cells_and_the_claimed_window(
        toy: pytest.Pytester) -> None:
    outcome = toy.runpytest("--model", "mock:grep", "-p", "no:randomly", "--lengths", "1k,2k",
                            "--depths", "50", "--samples", "2", "--lceval-window", "1k",
                            "--lceval-run", "w")
    outcome.assert_outcomes(passed=1, skipped=1)
    outcome.stdout.fnmatch_lines(["lceval: window 1024 tokens from --lceval-window"])
    rows = {row["length"]: row for row in _rows(toy, "w")}
    assert rows[2048]["outcome"] == "skipped" and rows[1024]["outcome"] == "passed"
    assert {row["context_window"] for row in rows.values()} == {1024}
