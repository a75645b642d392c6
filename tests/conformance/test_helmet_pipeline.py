"""HELMET's shared pipeline (``arguments.py``, ``eval.py``, ``model_utils.py``, ``utils.py``)
against the project's: what the released code makes of each category's config (no newline stop,
budgets, chat template), what its OpenAI model sends (the user message alone, no stop), and its
shared metrics (``normalize_answer``, ``parse_output``, SubEM, ``parse_rankings``) on hostile
outputs. The prompts themselves, raw and templated, and ``eval.py``'s scoring of whole runs are
compared per category in test_helmet_{rag,rerank,icl}.py beside this file.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
from fake_openai import FakeServer, Seen, chat
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.output import helmet_parse_output
from pytest_lceval.benchmarks.helmet.rerank import parse_ranking
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.chat_choice import renderer_for
from pytest_lceval.models.hf_text import HFText
from pytest_lceval.models.openai_api import OpenAIBackend
from pytest_lceval.models.serving import ServingOptions
from pytest_lceval.results.records import Case
from pytest_lceval.tasks.base import BuildContext
from pytest_lceval.tasks.metrics import normalize_answer, substring_exact_match
from pytest_lceval.tasks.stops import STOP_CHOICES, with_stops

from .helmet_harness import (
    Helmet,
    cache_datasets_in,
    hostile_outputs,
    kilt_rows,
    load_helmet,
    oracle_rows,
    ranking_outputs,
    run_args,
    write_jsonl,
)

CONFIGS = {
    # config -> (the project's tasks of its datasets, HELMET's dataset name stems)
    "rag.yaml": ("kilt_nq", "kilt_triviaqa", "kilt_hotpotqa", "kilt_popqa"),
    "rag_short.yaml": ("kilt_nq", "kilt_triviaqa", "kilt_hotpotqa", "kilt_popqa"),
    "rerank.yaml": ("msmarco_rerank",),
    "rerank_short.yaml": ("msmarco_rerank",),
    "icl.yaml": ("icl_trec_coarse", "icl_trec_fine", "icl_banking77", "icl_clinic150",
                 "icl_nlu"),
    "icl_short.yaml": ("icl_trec_coarse", "icl_trec_fine", "icl_banking77", "icl_clinic150",
                       "icl_nlu"),
}
PREFIXES = ("Answer:", "label:", "Ranking:", "Summary:", "corresponding value:")


@pytest.fixture(scope="module")
def helmet(reference: Any) -> Helmet:
    return load_helmet(reference)


def released_arguments(helmet: Helmet, config: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``arguments.parse_arguments`` as ``eval.py --config CONFIG`` runs it."""
    monkeypatch.setattr(sys, "argv", ["eval.py", "--config", str(config),
                                      "--model_name_or_path", "local/model"])
    return helmet.eval.parse_arguments()


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_the_released_code_reads_each_config_as_the_project_does(
        helmet: Helmet, config: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The config's ``stop_new_line: true`` lands on an attribute nothing reads, so the model
    gets no stop (``LLM.stops`` None); the project's default adds none and ``config`` adds the
    newline. Chat template and generation budgets are the config's."""
    path = Path(helmet.eval.__file__).parent / "configs" / config
    args = released_arguments(helmet, path, monkeypatch)
    assert args.stop_new_line is True and args.stop_newline is False
    llm = helmet.model_utils["LLM"]("local/model", stop_newline=args.stop_newline)
    assert llm.stops is None
    budgets = {int(b) for b in str(args.generation_max_length).split(",")}
    for name in CONFIGS[config]:
        task: Any = builtin_task(name)
        assert task.use_chat_template is args.use_chat_template
        assert budgets == {task.max_new_tokens}
        assert task.stop_new_line is args.stop_new_line
        case = Case(index=0, prompt="p", gold=("g",), prompt_tokens=1)
        assert with_stops([case], task, "released")[0].stop == ()
        assert with_stops([case], task, "config")[0].stop == ("\n",)
    assert STOP_CHOICES[0] == "released"


# -- the OpenAI path -----------------------------------------------------------------------------

class _Client:
    """A stand-in for ``openai.OpenAI`` that records what HELMET's OpenAIModel sends."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.chat = self
        self.completions = self

    def create(self, **kwargs: Any) -> Any:
        self.sent.append(kwargs)
        message = type("M", (), {"content": " Paris"})
        usage = type("U", (), {"prompt_tokens": 1, "completion_tokens": 1})
        return type("R", (), {"choices": [type("C", (), {"message": message})],
                              "usage": usage, "system_fingerprint": None})


def test_the_openai_chat_path_sends_the_user_message_alone_without_a_stop(
        helmet: Helmet, smollm2: HFText, conformance: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """HELMET's ``OpenAIModel`` (``run_api.sh``: ``--use_chat_template True --stop_newline
    False``) sends ``user_template`` as the only message: no answer prefix, no stop. The
    project's OpenAI backend in chat mode sends the same messages for the same rows."""
    if not (SHARED_DATA / "nq_oracle").is_dir():
        pytest.skip(f"shared data (nq_oracle) absent from {SHARED_DATA}")
    cache_datasets_in(tmp_path, monkeypatch)
    rows = oracle_rows(SHARED_DATA)
    picked = random.Random(3).sample(range(len(rows)), 40)
    pool = [{"title": rows[i]["ctxs"][0]["title"], "text": rows[i]["ctxs"][0]["text"]}
            for i in picked[30:]]
    folder = tmp_path / "data" / "kilt"
    test = write_jsonl(folder / "nq-dev-multikilt_1000_k20_dep6.jsonl", kilt_rows(
        [rows[i] for i in picked[:24]], pool, 5, 6, 1, random.Random(1), lambda i: f"q{i}"))
    demo = write_jsonl(folder / "nq-train-multikilt_1000_k3_dep6.jsonl", kilt_rows(
        [rows[i] for i in picked[24:30]], pool, 3, 6, 1, random.Random(2), lambda i: f"t{i}"))

    random.seed(42)
    args = run_args("kilt_nq", tmp_path, chat=True, max_length=4096, generation_max_length=20,
                    max_test_samples=20, shots=2)
    data = helmet.data["load_data"](args, "kilt_nq", str(test), str(demo))
    model = object.__new__(helmet.model_utils["OpenAIModel"])
    helmet.model_utils["LLM"].__init__(
        model, "gpt-4o", temperature=args.temperature, top_p=args.top_p, max_length=4096,
        generation_max_length=20, do_sample=False, stop_newline=args.stop_newline,
        use_chat_template=True, system_message=args.system_message)
    client = _Client()
    model.model, model.tokenizer, model.seed, model.API_MAX_LENGTH = client, smollm2, 42, 128000
    helmet_rows = [dict(row) for row in data["data"]][::6]  # the rows at depth 0
    for row in helmet_rows:
        model.generate(inputs=model.prepare_inputs(row, data))

    with FakeServer().running() as server:
        server.answer = lambda request: chat(" Paris")
        options = ServingOptions(base_url=server.url, api_mode="chat")
        backend = OpenAIBackend("openai:fake", "fake", openai.OpenAI(
            api_key="EMPTY", base_url=server.url, max_retries=0), smollm2, "chat", options,
            (8192, "test"), server.url)
        task = builtin_task("kilt_nq")
        context = BuildContext(smollm2, renderer_for(backend.renderer, "auto", task),
                               DataSource(tmp_path / "data"), 42)
        cases = task.build(Cell("rag", "kilt_nq", 4096, 0.0, 20), context)
        backend.generate([case.request() for case in cases])
        bodies: list[Seen] = server.requests("/chat/completions")
    assert len(bodies) == len(client.sent) == 20
    sent_by_user = {body.body["messages"][0]["content"]: body.body for body in bodies}
    sent = [(sent_by_user[helmet_sent["messages"][0]["content"]], helmet_sent)
             for helmet_sent in client.sent]
    conformance.compare("HELMET load_qa (kilt)", "prompts",
                        [(body["messages"], helmet_sent["messages"]) for body, helmet_sent in sent])
    for body, helmet_sent in sent:
        assert helmet_sent["stop"] is None and "stop" not in body
        assert body["max_completion_tokens"] == helmet_sent["max_tokens"] == 20


# -- the shared metrics --------------------------------------------------------------------------

def _outputs() -> list[tuple[str, list[str]]]:
    """Hostile outputs around golds of several kinds, 320 of them."""
    golds = [["Ada Lovelace", "Lovelace"], ["the Beatles"], ["42"], ["U.S.A."], ["a"],
             ["Ünïcödé"], ["New York City", "NYC"], [""]]
    return [(output, gold) for index, gold in enumerate(golds)
            for output in hostile_outputs(gold, PREFIXES[index % len(PREFIXES)], 40, index)]


def test_normalize_answer_and_sub_em_are_helmets(helmet: Helmet, conformance: Any) -> None:
    utils = helmet.utils
    conformance.compare("HELMET metrics", "outputs", [
        pair for output, golds in _outputs() for pair in (
            (normalize_answer(output), utils["normalize_answer"](output), repr(output[:60])),
            (substring_exact_match(output, golds), float(utils[
                "drqa_metric_max_over_ground_truths"](utils["substring_exact_match_score"],
                                                      output, golds)), repr(output[:60])))])


@pytest.mark.parametrize("prefix", PREFIXES)
def test_parse_output_is_helmets(helmet: Helmet, conformance: Any, prefix: str) -> None:
    conformance.compare("HELMET metrics", "outputs", [
        (helmet_parse_output(text, prefix), helmet.utils["parse_output"](text, prefix),
         repr(text[:60])) for output, _ in _outputs()
        for text in (output, prefix + output)])  # as generated, and as eval.py scores it


def test_parse_rankings_is_helmets(helmet: Helmet, conformance: Any) -> None:
    """An output with a chain of ids parses to HELMET's ranking; one with no number at all is
    unparsed here and, in HELMET, a ranking of its whole text, which matches no id."""
    ids = [str(7_000_000 + 37 * i) for i in range(14)]
    outputs = ranking_outputs(ids, ids[::-1], 240, 0) + [o for o, _ in _outputs()]
    parsed = [(parse_ranking(text), helmet.utils["parse_rankings"](text), repr(text[:60]))
              for output in outputs for text in (output, "Ranking:" + output)]
    conformance.compare("HELMET metrics", "outputs", [
        (theirs if mine is None and unparsed(theirs) else mine, theirs, text)
        for mine, theirs, text in parsed])


def unparsed(ranking: dict[str, Any]) -> bool:
    """HELMET's ranking of an output with no number: its whole text, which matches no id."""
    return not any(key.isdigit() for key in ranking) and len(ranking) == 1
