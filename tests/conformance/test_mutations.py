"""The conformance layer can fail: each small mutation of the project below (monkeypatched for
the one test) makes the conformance check meant to catch it fail, its agreement count short or
its assertion raised. A mutation that no check catches is a conformance test that could be
handed the answer (issue #34: before, reversing the ICL class order or changing cite's question
seed passed every test). ``docs/fidelity.md`` names, per row, the mutation that proves its test
(``test_fidelity_rows.py`` checks that every row a conformance test pins names one of these).

Two kinds. ``MUTATIONS``: the check is a conformance test's own counting function, called
in-process with the reference loaded as its module does (``hf_rank_agreement``,
``gold_agreement``, ``selection_agreement``, ``base_pooling_agreement``, ...), which also shows
each agreeing in full unmutated. ``FAILING``: the check is one conformance test (its node id
under ``tests/conformance/``), run by pytest in this process with the mutation in place, which
must report it failed. A mutation patches a module's name where the project looks it up at call
time, or, for a function a test imports by name, the function's own code (``_code``).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from _pytest.fixtures import FixtureFunctionDefinition
from conformance_tally import Tally
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet import (
    cite,
    cite_data,
    cite_metrics,
    icl,
    icl_data,
    longqa,
    rag,
    rerank,
    rerank_data,
    summ,
)
from pytest_lceval.benchmarks.helmet import pipeline as helmet_pipeline
from pytest_lceval.benchmarks.helmet import rubrics as helmet_rubrics
from pytest_lceval.benchmarks.helmet.pipeline import shuffled
from pytest_lceval.benchmarks.longbench100 import judged_tasks
from pytest_lceval.benchmarks.longbench100 import rubrics as longbench_rubrics
from pytest_lceval.benchmarks.longbench100 import tasks as lb_tasks
from pytest_lceval.benchmarks.longbench100 import text as longbench_text
from pytest_lceval.benchmarks.longbench100.longscore import base
from pytest_lceval.benchmarks.longbench100.longscore import summary as longscore_summary
from pytest_lceval.benchmarks.ruler import common as ruler_common
from pytest_lceval.benchmarks.ruler import (
    common_words,
    essay_haystack,
    filler_text,
    json_kv,
    niah,
    size_search,
    variable_tracking,
)
from pytest_lceval.benchmarks.ruler import tasks as recall
from pytest_lceval.benchmarks.task_haystack import prompts as haystack_prompts
from pytest_lceval.benchmarks.task_haystack import verdict as haystack_verdict
from pytest_lceval.benchmarks.task_haystack.ranking import Scored
from pytest_lceval.judge import replies
from pytest_lceval.models import hf, openai_api
from pytest_lceval.models.base import Renderer
from pytest_lceval.results.records import Ranking
from pytest_lceval.tasks import metrics, packing
from pytest_lceval.tasks.context_size import FILL

from . import (
    test_helmet_cite,
    test_helmet_icl,
    test_helmet_judge,
    test_helmet_longqa,
    test_helmet_metrics,
    test_helmet_pipeline,
    test_helmet_rag,
    test_helmet_rerank,
    test_helmet_summ,
    test_lifelong_icl,
    test_longbench100,
    test_ruler,
    test_ruler_aggregation,
)
from .helmet_harness import load_helmet

pytestmark = pytest.mark.skipif(
    not all((SHARED_DATA / name).exists() for name in ("trec", "nlu", "nq_oracle")),
    reason=f"shared data (trec, nlu, nq_oracle) absent from {SHARED_DATA}")

Patch = Callable[[pytest.MonkeyPatch], None]


@dataclasses.dataclass(frozen=True)
class Oracles:
    """What the checks run: each reference loaded once, and the cite data directory."""

    lifelong: SimpleNamespace
    longbench: SimpleNamespace
    helmet_icl: Any
    helmet_cite: tuple[ModuleType, ModuleType]
    alce_data: Path
    smollm2: Any


@pytest.fixture(scope="module")
def oracles(reference: Callable[..., ModuleType], smollm2: Any,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracles]:
    with test_lifelong_icl.absent_dependencies():
        lifelong = SimpleNamespace(vllm=reference("lifelong_icl", "model.vllm"))
    with test_longbench100.offline(smollm2):
        longbench = SimpleNamespace(eval=reference("longbench100", "eval_trec"))
    data = reference("helmet", "data")
    prompts = Path(str(data.__file__)).parent / "prompts"
    yield Oracles(lifelong, longbench, load_helmet(reference),
                  (data, reference("helmet", "model_utils")),
                  test_helmet_cite.write_alce_data(tmp_path_factory.mktemp("alce"), prompts),
                  smollm2)


# -- the checks ------------------------------------------------------------------------------

def rank(oracles: Oracles, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[int, int]:
    return test_lifelong_icl.hf_rank_agreement(oracles.lifelong, 200)


def icl_golds(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
              tmp_path: Path) -> tuple[int, int]:
    return test_helmet_icl.gold_agreement(oracles.helmet_icl, "icl_trec_coarse", monkeypatch,
                                          tmp_path)


def icl_prompts(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                tmp_path: Path) -> tuple[int, int]:
    test_helmet_icl.test_prompts_are_helmets_byte_for_byte(
        oracles.helmet_icl, oracles.smollm2, Ignored(), tmp_path, monkeypatch,
        "icl_trec_coarse", 1024)
    return 1, 1


def cite_selection(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                   tmp_path: Path) -> tuple[int, int]:
    return test_helmet_cite.selection_agreement(oracles.helmet_cite, oracles.smollm2,
                                                monkeypatch, tmp_path, oracles.alce_data,
                                                "asqa", 40)


def base_pooling(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                 tmp_path: Path) -> tuple[int, int]:
    return test_longbench100.base_pooling_agreement(oracles.longbench, 40)


class Ignored(Tally):
    """A conformance tally that keeps nothing (a mutated run's counts are not the layer's); it
    compares as the layer's does (``Tally.compare``)."""

    def __init__(self) -> None:
        """No test node: nothing is recorded on one."""

    def record(self, *args: Any, **kwargs: Any) -> None:
        pass


# -- the mutations ---------------------------------------------------------------------------

def _relabelled(order: Callable[[tuple[str, ...]], tuple[str, ...]]) -> Patch:
    """ICL class ids from another order of the hub's names."""
    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        load = icl_data._load
        monkeypatch.setattr(icl_data, "_load", lambda folder, layout: load(
            folder, dataclasses.replace(layout, classes=order(layout.classes))))
    return patch


def _cite_demo_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = cite.demo_draws
    monkeypatch.setattr(cite, "demo_draws", lambda count, demos, seed: draws(count, demos,
                                                                              seed + 1))


def _cite_demo_separator(monkeypatch: pytest.MonkeyPatch) -> None:
    demonstration = cite_data.Demos.demonstration
    monkeypatch.setattr(cite_data.Demos, "demonstration",
                        lambda self, demo: demonstration(self, demo) + " ")


def _icl_input_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    seed = icl.input_seed
    monkeypatch.setattr(icl, "input_seed", lambda text, run_seed: seed(text, run_seed + 1))


MUTATIONS: dict[str, tuple[Patch, Callable[..., tuple[int, int]]]] = {
    # name: (the mutation, the check that must catch it)
    "rank-rule-full-vocabulary": (
        lambda mp: mp.setattr(hf, "rank_top_k", lambda options: None), rank),
    "rank-top-20": (lambda mp: mp.setattr(hf, "REFERENCE_TOP_K", 20), rank),
    "icl-class-order-sorted": (_relabelled(lambda names: tuple(sorted(names))), icl_golds),
    "icl-class-order-reversed": (_relabelled(lambda names: names[::-1]), icl_golds),
    "icl-input-seed": (_icl_input_seed, icl_golds),
    "icl-label-map-unshuffled": (
        lambda mp: mp.setattr(icl, "label_map", lambda classes, seed: list(range(classes))),
        icl_golds),
    "icl-template-character": (
        lambda mp: mp.setattr(icl, "INSTRUCTION", icl.INSTRUCTION.replace("label: {", "label:{")),
        icl_prompts),
    "cite-question-seed": (
        lambda mp: mp.setattr(cite, "shuffled", lambda count, seed: shuffled(count, seed + 1)),
        cite_selection),
    "cite-question-order-reversed": (
        lambda mp: mp.setattr(cite, "shuffled", lambda count, seed: shuffled(count, seed)[::-1]),
        cite_selection),
    "cite-demonstration-seed": (_cite_demo_seed, cite_selection),
    "cite-demonstration-separator": (_cite_demo_separator, cite_selection),
    "longscore-base-per-length": (
        lambda mp: mp.setattr(base, "base_value",
                              lambda strata, mean: base.length_weighted_mean(strata)),
        base_pooling),
    "longscore-base-first-length-only": (
        lambda mp: mp.setattr(base, "base_value", lambda strata, mean: base.stratified_mean(
            [next(iter(strata.values()))])),
        base_pooling),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_the_mutation_is_caught(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                                tmp_path: Path, name: str) -> None:
    mutate, check = MUTATIONS[name]
    with monkeypatch.context() as patch:
        mutate(patch)
        try:
            compared, identical = check(oracles, patch, tmp_path)
        except AssertionError:
            return  # the check's own assertion caught it
    assert identical < compared, f"mutation {name} passed its conformance check"


def test_every_check_passes_unmutated(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                                      tmp_path: Path) -> None:
    """Without a mutation each check agrees in full, so a caught mutation is the mutation's."""
    for check in {check for _, check in MUTATIONS.values()}:
        compared, identical = check(oracles, monkeypatch, tmp_path)
        assert identical == compared > 0, check.__name__


# -- mutations a conformance test must fail ----------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Run:
    """A conformance test called in this process: ``given`` holds its parameters' values (a
    ``Provided`` is computed from the test's request), ``uses`` the fixtures its
    ``usefixtures`` mark names; the rest come from ``FIXTURES``."""

    test: Callable[..., Any]
    given: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    uses: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The test and its parameters, as pytest would name it."""
        shown = "-".join(str(value) for key, value in self.given.items() if key != "niah_cases")
        return f"{self.test.__name__}[{shown}]" if shown else self.test.__name__


@dataclasses.dataclass(frozen=True)
class Provided:
    """A parameter computed here rather than by the test module's fixture of that name (one
    whose value would hide the mutation: cases built before it)."""

    make: Callable[[pytest.FixtureRequest], Any]


class Fixtures:
    """The fixture values of conformance tests called in this process: a test module's own
    fixtures are run from their functions (module- and session-scoped ones once: several
    modules name different fixtures ``helmet`` or ``ref``), the others come from pytest."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str], Any] = {}
        self.open: list[Iterator[Any]] = []

    def value(self, module: ModuleType, name: str, request: pytest.FixtureRequest) -> Any:
        definition = getattr(module, name, None)
        if not isinstance(definition, FixtureFunctionDefinition):
            return request.getfixturevalue(name)
        key = (module.__name__, name)
        kept = definition._fixture_function_marker.scope != "function"
        if kept and key in self.kept:
            return self.kept[key]
        function = definition._get_wrapped_function()
        value = function(**{arg: self.value(module, arg, request)
                            for arg in inspect.signature(function).parameters})
        if inspect.isgenerator(value):
            self.open.append(value)
            value = next(value)
        if kept:
            self.kept[key] = value
        return value

    def close(self) -> None:
        for generator in reversed(self.open):
            next(generator, None)


FIXTURES = Fixtures()


@pytest.fixture(scope="module", autouse=True)
def _fixtures_closed() -> Iterator[None]:
    """The generator fixtures ``FIXTURES`` opened are finished with this module."""
    yield
    FIXTURES.close()


@pytest.fixture(autouse=True)
def _caches_emptied() -> Iterator[None]:
    """What a mutation made must not outlive it in the project's caches (``functools.cache``
    results, a tokenizer's counted pieces and haystacks): they are emptied after each test."""
    yield
    for name, module in list(sys.modules.items()):
        if name.startswith("pytest_lceval"):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()
    filler_text._CACHES.clear()
    packing._COSTS.clear()


def call(run: Run, request: pytest.FixtureRequest) -> None:
    module = sys.modules[run.test.__module__]
    for name in run.uses:
        FIXTURES.value(module, name, request)
    arguments: dict[str, Any] = {}
    for name in inspect.signature(run.test).parameters:
        value = run.given.get(name, Ignored() if name == "conformance" else None)
        if isinstance(value, Provided):
            value = value.make(request)
        arguments[name] = FIXTURES.value(module, name, request) if value is None else value
    run.test(**arguments)


def _constant(owner: Any, name: str, change: Callable[[Any], Any]) -> Patch:
    """``owner.name`` changed (where the project looks it up at call time)."""
    return lambda mp: mp.setattr(owner, name, change(getattr(owner, name)))


def _edited(function: Callable[..., Any], old: str, new: str) -> Patch:
    """``function`` with ``old`` in its source made ``new``: its own code replaced, so that a
    conformance test that imported it by name calls the mutated one too."""
    source = textwrap.dedent(inspect.getsource(function))
    assert source.count(old) == 1, (function, old)
    made: dict[str, Any] = {}
    exec(compile(source.replace(old, new), inspect.getfile(function), "exec"),  # noqa: S102
         function.__globals__, made)
    edited = inspect.unwrap(getattr(made[function.__name__], "fget", made[function.__name__]))
    return lambda mp: mp.setattr(function, "__code__", edited.__code__)


def _patched_task(module: Any, name: str, **changes: Any) -> Patch:
    """The built-in task instance ``name`` of ``module.TASKS`` with ``changes``."""
    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        task = next(task for task in module.TASKS if task.name == name)
        for field, value in changes.items():
            monkeypatch.setattr(task, field, value)
    return patch


def _sized(size: str) -> Patch:
    """The recall tasks built with ``size`` whatever they are asked for."""
    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        tasks = recall.tasks
        monkeypatch.setattr(recall, "tasks", lambda *args, **kwargs: tasks(
            *args, **{**kwargs, "size": size}))
    return patch


def _essay_step(step: int) -> Patch:
    def steps(original: Callable[..., Any]) -> Callable[..., Any]:
        return lambda haystack, *args: dataclasses.replace(
            original(haystack, *args), first=step, step=step) if haystack == "essay" else \
            original(haystack, *args)
    return _constant(niah, "niah_steps", steps)


def _first_copy_shuffled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Repeat+Shuffle with its first copy shuffled too (reversed)."""
    original = haystack_prompts.repeated_demonstrations

    def repeated(spec: Any, task: Any) -> list[Any]:
        rows = original(spec, task)
        if spec.setting != "repeat-shuffle":
            return rows
        size = len(task.demonstrations(spec.resample, spec.n_shot))
        return [*reversed(rows[:size]), *rows[size:]]

    monkeypatch.setattr(haystack_prompts, "repeated_demonstrations", repeated)


def _keyed_by_position(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KILT file without ``id`` keyed by each question's place in the file."""
    groups = rag._groups

    def numbered(path: Path, below: float | None) -> tuple[str, dict[Any, list[Any]]]:
        field, found = groups(path, below)
        return field, found if field == "id" else {
            str(index): rows for index, rows in enumerate(found.values())}

    monkeypatch.setattr(rag, "_groups", numbered)


def _fresh_niah_cases(request: pytest.FixtureRequest) -> Callable[[str, str], list[Any]]:
    """test_ruler's ``niah_cases`` without its cache: built after the mutation."""
    smollm2 = request.getfixturevalue("smollm2")
    return lambda name, placement: test_ruler.build_cases(
        next(task for task in recall.tasks(placement) if task.name == name), smollm2)


def _niah_prompts(name: str, placement: str = "depths") -> Run:
    return Run(test_ruler.test_niah_prompts_are_rulers_contexts_in_helmets_template,
               {"task_name": name, "placement": placement, "commit": "f682453",
                "niah_cases": Provided(_fresh_niah_cases)})


def _given(test: Callable[..., Any], names: str, values: Sequence[Any],
           uses: tuple[str, ...] = ()) -> Run:
    """``test`` with the parameters ``names`` (comma-separated) of one of its parametrizations."""
    return Run(test, dict(zip(names.split(","), values, strict=True)), uses)


def _char(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


LB = test_longbench100
LL = test_lifelong_icl
RAG = test_helmet_rag.FILES
RULER_SIZES = Run(test_ruler_aggregation.test_sizes_are_rulers_search)
RERANK = _given(test_helmet_rerank.test_prompts_are_helmets_byte_for_byte,
                "length,k,samples,chat", (4096, 14, 21, False))
LONGQA = test_helmet_longqa.test_prompts_are_helmets
SUMM = _given(test_helmet_summ.test_prompts_are_helmets, "name,data,length,template",
              ("multi_lexsum", "helmet", 1536, False))
JUDGE_REPLIES = _given(test_helmet_judge.test_replies_helmet_scores_score_the_same,
                       "rubric,aspect,fields,scales", test_helmet_judge.ASPECTS[0])
ALCE = test_helmet_metrics.test_alce_correctness_and_citations_are_helmets

FAILING: dict[str, tuple[Patch, Run]] = {
    # name: (the mutation, the conformance test it must fail)
    # recall
    "noise-line-character": (
        _constant(niah, "NOISE", lambda text: _char(text, "green", "Green")),
        _niah_prompts("niah_single_1")),
    "ruler-depth-index-rounded": (
        _edited(essay_haystack.insertion_index, "int(units * (depth / 100))",
                "round(units * (depth / 100))"),
        _niah_prompts("niah_multikey_1", "ruler")),
    "essay-order-rotated": (
        _constant(essay_haystack, "essay",
                  lambda essay: lambda texts, copies=1: essay((*texts[1:], texts[0]), copies)),
        _niah_prompts("niah_single_2")),
    "needle-sentence-character": (
        _edited(niah.Wording.needle, 'is: {value}."', 'is {value}."'),
        _niah_prompts("niah_single_3")),
    "niah-plural-wording-singular": (
        _edited(niah.Wording.instruction, '"Some special magic {} are"', '"A special magic {} is"'),
        _niah_prompts("niah_multivalue")),
    "vt-hop-trailing-space-dropped": (
        _edited(variable_tracking.Chain.lines, 'VAR {a} "', 'VAR {a}"'),
        _given(test_ruler_aggregation.test_vt_prompts_are_rulers_in_helmets_template, "commit",
               ("f682453",))),
    "cwe-example-answer-separator": (
        _constant(common_words, "EXAMPLE_ANSWER_SEPARATOR",
                  lambda separators: {**separators, "f682453": " "}),
        _given(test_ruler_aggregation.test_cwe_prompts_are_rulers_in_helmets_template, "commit",
               ("f682453",))),
    "fwe-vocabulary-of-c3f5e3b": (
        _edited(common_words.vocabulary_size, 'ruler == "c3f5e3b"', 'ruler'),
        _given(test_ruler_aggregation.test_fwe_prompts_are_rulers_in_helmets_template, "commit",
               ("f682453",))),
    "recall-long-answer-budget-50": (
        _constant(recall, "LONG_ANSWER_TOKENS", lambda _: 50),
        Run(test_ruler_aggregation.test_recall_budgets_are_helmets)),
    "recall-scored-without-prefix": (
        _constant(ruler_common, "helmet_scored", lambda _: lambda output, meta: output),
        _given(test_ruler.test_recall_scores_are_helmets_and_rulers, "task_name", ("cwe",))),
    "json-kv-three-demonstrations": (
        _constant(json_kv, "DEMOS", lambda _: 3),
        Run(test_ruler.test_json_kv_prompts_and_scores_are_helmets)),
    "recall-size-fill": (
        _sized(FILL), _given(test_ruler.test_niah_haystack_size_is_rulers_search, "task_name",
                             ("niah_single_2",))),
    "niah-essay-step-250": (
        _essay_step(250), _given(test_ruler.test_niah_haystack_size_is_rulers_search,
                                 "task_name", ("niah_multikey_1",))),
    "vt-size-step-5": (_constant(variable_tracking, "SEARCH_STEP", lambda _: 5), RULER_SIZES),
    "size-search-answer-not-appended": (
        _constant(size_search, "count_with",
                  lambda _: lambda fitted, suffix, renderer: fitted.prompt_tokens),
        RULER_SIZES),
    # 100-LongBench
    "kv-pair-sentence-character": (
        _constant(lb_tasks, "KV_PAIR", lambda text: _char(text, " is ", " is: ")),
        _given(LB.test_prompts_are_the_references, "task", ("kv_retrieval",))),
    "star-sentence-character": (
        _constant(lb_tasks, "STAR", lambda text: _char(text, "little", "Little")),
        _given(LB.test_prompts_are_the_references, "task", ("counting_stars",))),
    "passage-retrieval-prompt-character": (
        _constant(lb_tasks, "RETRIEVAL_PROMPT", lambda text: text.replace("\n", " \n", 1)),
        _given(LB.test_prompts_are_the_references, "task", ("passage_retrieval",))),
    "passage-count-prompt-character": (
        _constant(lb_tasks, "COUNT_PROMPT", lambda text: text.replace("\n", " \n", 1)),
        _given(LB.test_prompts_are_the_references, "task", ("passage_count",))),
    "qa-instruction-character": (
        _constant(lb_tasks, "QA_INSTRUCTION", lambda text: _char(text, "related with",
                                                                  "related to")),
        _given(LB.test_prompts_are_the_references, "task", ("single_doc_qa_yesno",))),
    "qa-probe-prompt-character": (
        _constant(lb_tasks, "QA_PROBE_PROMPT", lambda text: text.replace("\n", " \n", 1)),
        _given(LB.test_prompts_are_the_references, "task", ("single_doc_qa",))),
    "longbench-kv-budget-32": (
        _patched_task(lb_tasks, "kv_retrieval", max_new_tokens=32),
        Run(LB.test_generation_budgets_are_the_references)),
    "longbench-chat-template-on": (
        _patched_task(lb_tasks, "kv_retrieval", use_chat_template=True),
        _given(LB.test_prompts_are_the_references, "task", ("kv_retrieval",))),
    "longbench-number-read-as-integer": (
        _edited(longbench_text.first_number, "return match.group()",
                "return str(int(match.group()))"),
        _given(LB.test_rule_scores_are_the_references, "task", ("passage_count",))),
    "longbench-qa-prompt-character": (
        _constant(lb_tasks, "QA_PROMPT", lambda text: text.replace("\n", " \n", 1)),
        _given(LB.test_prompts_are_the_references, "task", ("multi_doc_qa",))),
    "longbench-base-instruction-character": (
        _constant(judged_tasks, "QA_ALONE_INSTRUCTION", lambda text: text.rstrip() + ": "),
        _given(LB.test_base_prompts_are_the_references, "task", ("multi_doc_qa",))),
    "longbench-qa-f1-of-the-whole-output": (
        _edited(judged_tasks.score_qa_f1, "qa_f1(output,", "qa_f1(output + ' x',"),
        _given(LB.test_original_metrics_are_the_references, "task", ("single_doc_qa",))),
    "longscore-lc-off-by-a-hundredth": (
        _edited(longscore_summary.TaskRow.avg_lc.fget, "longscore(score, self.base, self.floor)",
                "longscore(score + 0.0001, self.base, self.floor)"),
        Run(LB.test_longscore_is_the_references)),
    # Task Haystack
    "haystack-query-keeps-trailing-space": (
        _edited(haystack_prompts.query, '.rstrip(" ")', ""),
        Run(LL.test_test_inputs_of_every_task_are_the_references_but_a_trailing_space)),
    "haystack-repeat-cap-16k": (
        _constant(haystack_prompts, "REPEAT_MAX_TOKENS", lambda _: 16384),
        _given(LL.test_repeat_and_random_prompts_are_the_references, "setting,arguments",
               ("repeat", []))),
    "repeat-shuffle-first-copy-shuffled": (
        _first_copy_shuffled,
        _given(LL.test_repeat_and_random_prompts_are_the_references, "setting,arguments",
               ("repeat-shuffle", ["--repeat_shuffle"]))),
    "random-prose-essays-joined-by-spaces": (
        _edited(haystack_prompts.irrelevant_prose, 'text = "".join(essays)',
                'text = " ".join(essays)'),
        _given(LL.test_repeat_and_random_prompts_are_the_references, "setting,arguments",
               ("random", ["--use_irrlevant_prefix"]))),
    "haystack-task-separator": (
        _constant(haystack_prompts, "TASK_SEP", lambda _: "\n"),
        _given(LL.test_lifelong_prompts_are_the_references, "stream,setting,permutations",
               ("permissive16", "recall", 2))),
    "haystack-permutations-reversed": (
        _edited(haystack_prompts.permutations, "rng.sample(list(tasks),",
                "rng.sample(list(tasks)[::-1],"),
        _given(LL.test_lifelong_prompts_are_the_references, "stream,setting,permutations",
               ("scale-task-8", "recall", 2))),
    "remove-keeps-the-instruction": (
        _edited(haystack_prompts.lifelong, 'if setting == "remove":',
                'if setting == "remove-same-instruction":'),
        _given(LL.test_lifelong_prompts_are_the_references, "stream,setting,permutations",
               ("main16", "remove", 1))),
    "rank-ties-to-the-last": (
        _edited(Ranking.choice.fget, "max(scored,", "max(reversed(scored),"),
        Run(LL.test_rank_decision_of_vllm_is_the_references)),
    "accuracy-counts-no-prediction-right": (
        _edited(Scored.accuracy.fget, "sum(self.correct)",
                "sum(self.correct) + sum(c is None for c in self.choices)"),
        Run(LL.test_accuracy_is_the_references)),
    "verdict-alpha-0.10": (
        _constant(haystack_verdict.paired_verdict, "__defaults__", lambda _: (0.1,)),
        Run(LL.test_verdict_is_the_references)),
    # HELMET's shared pipeline
    "templated-prompt-keeps-the-cue": (
        _edited(Renderer.render, "return self.template(prompt.user) + prompt.answer_prefix",
                "return self.template(prompt.user + prompt.cue) + prompt.answer_prefix"),
        _given(test_helmet_icl.test_prompts_are_helmets_byte_for_byte, "name,length",
               ("icl_banking77", 2048))),
    "icl-scored-without-prefix": (
        _constant(icl, "helmet_scored", lambda _: lambda output, meta: output),
        _given(test_helmet_icl.test_run_test_scores_the_outputs_as_the_project_does, "chat",
               (False,))),
    "rag-stops-at-a-newline-by-default": (
        _patched_task(rag, "kilt_nq", stop_new_line=False),
        _given(test_helmet_pipeline.test_the_released_code_reads_each_config_as_the_project_does,
               "config", ("rag.yaml",))),
    "rerank-budget-100": (
        _patched_task(rerank, "msmarco_rerank", max_new_tokens=100),
        _given(test_helmet_pipeline.test_the_released_code_reads_each_config_as_the_project_does,
               "config", ("rerank.yaml",))),
    "openai-chat-sends-a-newline-stop": (
        _edited(openai_api._stop, "kept = [marker for marker in stop if marker][:4]",
                'kept = ["\\n"]'),
        Run(test_helmet_pipeline.test_the_openai_chat_path_sends_the_user_message_alone_without_a_stop)),
    "overflow-cut-one-token-more": (
        _edited(helmet_pipeline.truncate_context, "spans[-over][0]", "spans[-over - 1][0]"),
        _given(test_helmet_rag.test_prompts_are_helmets_byte_for_byte,
               "task,dataset,test,demo,length,depths,chat", RAG[0])),
    "normalize-answer-keeps-articles": (
        _edited(metrics.normalize_answer, "text = _ARTICLES.sub", "_ = _ARTICLES.sub"),
        Run(test_helmet_pipeline.test_normalize_answer_and_sub_em_are_helmets)),
    # RAG, re-rank, ICL, cite
    "rag-instruction-character": (
        _constant(rag, "INSTRUCTION", lambda text: _char(text, "concise", "Concise")),
        _given(test_helmet_rag.test_prompts_are_helmets_byte_for_byte,
               "task,dataset,test,demo,length,depths,chat", RAG[3])),
    "rag-sub-em-of-the-parsed-answer-only": (
        _edited(rag.sub_em, "max(", "min("),
        _given(test_helmet_rag.test_run_test_scores_the_outputs_as_the_project_does, "chat",
               (False,))),
    "rag-k-at-8k-20": (
        _constant(rag, "HELMET_K", lambda k: {**k, 8192: 20}),
        _given(test_helmet_rag.test_prompts_are_helmets_byte_for_byte,
               "task,dataset,test,demo,length,depths,chat", RAG[1])),
    "kilt-no-id-keyed-by-position": (
        _keyed_by_position,
        _given(test_helmet_rag.test_files_without_ids_are_keyed_on_the_question_as_helmet_keys_them,
               "files", (RAG[0],))),
    "rerank-instruction-character": (
        _constant(rerank, "INSTRUCTION", lambda text: text.replace(" ", "  ", 1)), RERANK),
    "ndcg-rounded-to-4-decimals": (
        _edited(rerank.ndcg_at_10, "]), 5)", "]), 4)"),
        _given(test_helmet_rerank.test_run_test_scores_the_outputs_as_the_project_does, "chat",
               (False,))),
    "rerank-demonstrations-keep-asked-queries": (
        _edited(rerank_data.helmet_demos, "> 2 * len(asked)", "< 0"), RERANK),
    "cite-document-template-character": (
        _edited(cite_data.Demos.document, "self.doc_prompt.format(",
                "self.doc_prompt.replace('(Title:', '(title:').format("),
        _given(test_helmet_cite.test_prompts_are_helmets, "name,data,length,template",
               ("alce_asqa", "alce", 4096, False))),
    "alce-str-em-without-normalising": (
        _edited(cite_metrics.str_em, "any(normalize_answer(answer) in text",
                "any(answer in text"),
        _given(ALCE, "kind,template", ("asqa", False))),
    "citations-at-most-2": (
        _constant(cite_metrics, "AT_MOST_CITATIONS", lambda _: 2),
        _given(ALCE, "kind,template", ("qampari", False))),
    "cite-number-without-correctness": (
        _edited(cite.CiteTask.cell_metrics, "fmean((correctness, recall, precision))",
                "fmean((recall, recall, precision))"),
        _given(ALCE, "kind,template", ("asqa", False))),
    # the judge
    "judge-answer-keeps-newlines": (
        _edited(helmet_rubrics.helmet_answer, 'output.replace("\\n", " ")', "output"),
        _given(test_helmet_judge.test_qa_judge_prompt_is_helmets, "template", (False,),
               ("helmets_words",))),
    "judge-reply-object-read-greedily": (
        _constant(replies, "_OBJECT", lambda _: re.compile(r"\{.*\}", re.DOTALL)), JUDGE_REPLIES),
    "longbench-qa-score-over-5": (
        _edited(longbench_rubrics.LongBenchQA.score, "/ 6", "/ 5"),
        Run(LB.test_judged_scores_are_the_references)),
    # long QA and summaries
    "longqa-demonstration-answer-separator": (
        _edited(longqa.frame, "\\n{ANSWER} {demo.answers[0]}", "\\n{ANSWER}{demo.answers[0]}"),
        _given(LONGQA, "name,length,template", ("infbench_choice_leval", 2048, False))),
    "longqa-margin-190": (
        _constant(longqa, "MARGIN", lambda _: 190),
        _given(LONGQA, "name,length,template", ("infbench_qa_leval", 4096, False))),
    "narrativeqa-cut-as-one-story": (
        _constant(longqa, "SEPARATOR", lambda _: "\n"),
        _given(LONGQA, "name,length,template", ("narrativeqa", 2048, False))),
    "rouge-l-as-rouge-2": (
        _edited(longqa.rouge_l_f1, '"rougeL"', '"rouge2"'),
        _given(test_helmet_metrics.test_rouge_l_f1_is_helmets, "name,template",
               ("narrativeqa", False))),
    "rouge-l-of-the-whole-output-only": (
        _edited(longqa.readings, "return [output, helmet_parse_output(output, ANSWER)]",
                "return [output]"),
        _given(test_helmet_metrics.test_rouge_l_f1_is_helmets, "name,template",
               ("infbench_qa_leval", False))),
    "choice-match-without-the-option-in-the-output": (
        _edited(longqa.choice_match, "if full.lower() in output.lower():", "if False:"),
        _given(test_helmet_metrics.test_choice_exact_match_is_helmets, "template", (False,))),
    "summ-demonstrations-joined-by-one-newline": (
        _edited(summ.Template.head, 'shown = "\\n\\n".join(', 'shown = "\\n".join('), SUMM),
    "summ-cut-ten-tokens-short": (
        _constant(summ, "helmet_count", lambda count: lambda *args: count(*args) - 10),
        _given(test_helmet_summ.test_prompts_are_helmets, "name,data,length,template",
               ("multi_lexsum", "substitute", 1536, True))),
    "rouge-lsum-as-rouge-2": (
        _edited(summ.rouge_lsum_f1, '"rougeLsum"', '"rouge2"'),
        _given(test_helmet_metrics.test_rouge_lsum_f1_is_helmets, "name,template",
               ("multi_lexsum", False))),
}


@pytest.mark.parametrize("name", sorted(FAILING))
def test_the_mutation_fails_its_conformance_test(name: str, request: pytest.FixtureRequest,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    mutate, run = FAILING[name]
    with monkeypatch.context() as patch:
        mutate(patch)
        with pytest.raises(Exception):  # noqa: B017 (an assertion, or the test's own parse)
            call(run, request)


@pytest.mark.parametrize("name", sorted({run.name for _, run in FAILING.values()}))
def test_every_conformance_test_run_passes_unmutated(name: str, request: pytest.FixtureRequest
                                                      ) -> None:
    """Each conformance test the mutations run passes as it is called here, so what a
    mutation makes it raise is the mutation's (not how this module calls it)."""
    call(next(run for _, run in FAILING.values() if run.name == name), request)
