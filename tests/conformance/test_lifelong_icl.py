"""Conformance with Lifelong-ICL / Task Haystack (INK-USC/Lifelong-ICL, ``../shared/reference/
lifelong_icl``): the reference's own drivers (``run.py`` for Recall, Replay, Remove and
Paraphrase, ``run_baseline.py`` for Single-task ICL, ``run_repeat.py`` for Repeat,
Repeat+Shuffle and Random) run on the real tasks of ``../shared/data/llicl`` with a recording
model in place of vLLM, launched through ``cli.py`` so that every argument has the reference's
own default; the prompts it would send are compared with the project's, byte for byte. The rank
decision (``model/vllm.py`` and ``model/openai.py`` ``rank_postprocess``) and the accuracy
(``utils.py`` ``evaluate``) are compared on the same option scores, and the verdict on the same
per-resample accuracies by the reference's analysis notebook (``playground/analysis_niath.ipynb``
at the pinned commit: its ``get_one_matrix`` run from its own code cells on results files written
from the tables).
"""

from __future__ import annotations

import json
import math
import random
import sys
import types
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.task_haystack.config import HaystackSettings, LengthSetting
from pytest_lceval.benchmarks.task_haystack.data import (
    ALL64,
    MAIN16,
    PERMISSIVE16,
    LliclTask,
    load_task,
)
from pytest_lceval.benchmarks.task_haystack.plan import SUITE, CellPlan, HaystackCell, plan_cell
from pytest_lceval.benchmarks.task_haystack.prompts import (
    lifelong,
    query,
    repeat_count,
    repeated_demonstrations,
    single_task,
    task_block,
)
from pytest_lceval.benchmarks.task_haystack.ranking import score
from pytest_lceval.benchmarks.task_haystack.runner import HaystackMeasure
from pytest_lceval.benchmarks.task_haystack.verdict import paired_verdict
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.models import topk_rank
from pytest_lceval.models.hf_text import suffix_ids
from pytest_lceval.results.records import Ranking

CATEGORY = "Lifelong-ICL"
LLICL = SHARED_DATA / "llicl"
ESSAYS = SHARED_DATA / "pg_essays"
SEED = 42
"""The reference's --seed default, and the project's --lceval-seed default."""

pytestmark = pytest.mark.skipif(not LLICL.is_dir(), reason=f"no Task Haystack data at {LLICL}")


# -- the reference, run with a recording model -------------------------------------------------

@dataclass
class Call:
    """One ``run_rank`` the reference made: the context, the test inputs, the options."""

    prefix: str
    prompts: list[str]
    options: list[str]


@dataclass
class Recorder:
    """Stands in for the reference's vLLM model: counts tokens with the project's tokenizer (as
    vLLM's ``tokenizer.encode`` would) and answers each test input with an option drawn from a
    seed of the prompt, so that accuracies vary and both sides can score the same answers."""

    hf: Any
    calls: list[Call] = field(default_factory=list)
    encoded: dict[str, list[int]] = field(default_factory=dict)
    """The Random setting tokenizes the same essays again for every task and resample."""

    def set_up_model(self) -> None:
        pass

    def get_n_tokens(self, text: str) -> int:
        return len(self.encode_text_to_tokens(text))

    def encode_text_to_tokens(self, text: str) -> list[int]:
        if text not in self.encoded:
            self.encoded[text] = list(self.hf.encode(text))
        return self.encoded[text]

    def decode_tokens(self, ids: Sequence[int]) -> str:
        return str(self.hf.decode(ids))

    def run_rank(self, prefix: str, prompts: list[str], options: list[str]) -> list[dict[str, str]]:
        self.calls.append(Call(prefix, list(prompts), list(options)))
        return [{"prediction": answer(prefix, prompt, options)} for prompt in prompts]


def answer(prefix: str, prompt: str, options: Sequence[str]) -> str:
    """A reproducible answer: an option, or now and then no prediction at all."""
    value = zlib.crc32((prefix[-300:] + prompt).encode("utf-8"))
    return "NO_PREDICTION" if value % 20 == 0 else options[value // 20 % len(options)]


@contextmanager
def absent_dependencies() -> Iterator[None]:
    """vLLM, cohere and retrying, which the reference's ``model`` package imports but the
    recording model never uses, as empty stand-ins for the time of the import."""
    stand_ins = {
        "vllm": {"LLM": object, "SamplingParams": object},
        "cohere": {},
        "retrying": {"retry": lambda **_: (lambda function: function)},
    }
    added = []
    for name, attributes in stand_ins.items():
        if name in sys.modules:
            continue
        try:
            __import__(name)
        except ImportError:
            module = types.ModuleType(name)
            module.__dict__.update(attributes)
            sys.modules[name] = added.append(name) or module
    try:
        yield
    finally:
        for name in added:
            del sys.modules[name]


@pytest.fixture(scope="module")
def ref(reference: Callable[..., ModuleType]) -> SimpleNamespace:
    with absent_dependencies():
        return SimpleNamespace(cli=reference("lifelong_icl", "cli"),
                               vllm=reference("lifelong_icl", "model.vllm"),
                               openai=reference("lifelong_icl", "model.openai"),
                               utils=reference("lifelong_icl", "utils"))


@dataclass
class ReferenceRun:
    calls: list[Call]
    tables: dict[str, Any]
    """What the driver wrote with ``DataFrame.to_csv``, by file name (results, permutations)."""


@pytest.fixture(scope="module")
def drive(ref: SimpleNamespace, smollm2: Any, tmp_path_factory: pytest.TempPathFactory
          ) -> Callable[..., ReferenceRun]:
    """``drive(split_tasks, *cli arguments)``: ``cli.main`` with those arguments, a split
    ``configs/<name>.json`` listing ``split_tasks`` for train and test, and the recording model.
    The reference reads ``configs/`` from the working directory and appends each result to a CSV
    file as it goes; the tables are taken as they are written, without touching the disk."""
    import glob

    import pandas

    mp = pytest.MonkeyPatch()
    home = tmp_path_factory.mktemp("lifelong_icl")
    (home / "configs").mkdir()
    mp.chdir(home)
    drivers = [ref.cli.run, ref.cli.run_baseline, ref.cli.run_repeat]
    # The reference concatenates the essays in the file system's order; sorted here, as the
    # project reads them.
    essays = ref.cli.run_repeat.__globals__["get_irrelevant_context"].__globals__
    mp.setitem(essays, "glob", SimpleNamespace(glob=lambda pattern: sorted(glob.glob(pattern))))

    done: dict[tuple[str, ...], ReferenceRun] = {}

    def run(split: Sequence[str], *arguments: str) -> ReferenceRun:
        key = (*split, "|", *arguments)
        if key not in done:
            done[key] = launch(split, *arguments)
        return done[key]

    def launch(split: Sequence[str], *arguments: str) -> ReferenceRun:
        name = f"split{zlib.crc32(json.dumps(list(split)).encode())}"
        (home / "configs" / f"{name}.json").write_text(
            json.dumps({"train": list(split), "test": list(split)}))
        recorder = Recorder(smollm2.hf)
        tables: dict[str, Any] = {}
        with pytest.MonkeyPatch.context() as inner:
            for driver in drivers:
                inner.setitem(driver.__globals__, "get_model", lambda args, logger: recorder)
            inner.setattr(pandas.DataFrame, "to_csv",
                          lambda frame, path, **_: tables.__setitem__(Path(path).stem, frame))
            inner.setattr(sys, "argv", [
                "cli.py", "--data_dir", str(LLICL), "--output_dir", str(home / "out"),
                "--split", name, "--model", "recorded", "--irrelevant_dir", str(ESSAYS),
                *arguments])
            ref.cli.main()
        return ReferenceRun(recorder.calls, tables)

    yield run
    mp.undo()


# -- the project -----------------------------------------------------------------------------

def settings(tasks: Sequence[str], n_task: int, n_shot: int) -> HaystackSettings:
    return HaystackSettings(root=LLICL, source="data:llicl", tasks=tuple(tasks),
                            lengths=(LengthSetting(n_task, n_shot),), permutations=5, resamples=5,
                            test_size=100, settings=("recall",), batch_size=64)


def plan(hs: HaystackSettings, task: str, permutation: int, setting: str) -> CellPlan:
    length = hs.lengths[0]
    cell = HaystackCell(SUITE, task, 0, None, hs.test_size, n_task=length.n_task,
                        n_shot=length.n_shot, permutation=permutation, setting=setting)
    return plan_cell(cell, hs, SEED)


def measure(smollm2: Any) -> HaystackMeasure:
    """The runner's context building (Single-task, Lifelong) with the project's tokenizer."""
    model = SimpleNamespace(tokenizer=smollm2, renderer=smollm2.renderer,
                            context_window=1 << 30)
    evaluator = SimpleNamespace(data=DataSource(SHARED_DATA))
    runner = HaystackMeasure(evaluator, None, model)  # type: ignore[arg-type]
    runner._longest = lambda *_: 0  # type: ignore[method-assign]  # no window to check here
    return runner


def compare(call: Call, prefix: str, task: LliclTask) -> tuple[int, int]:
    """(prompts compared, prompts identical): the reference sends ``call.prefix + "\\n" +
    prompt`` (``run_rank``'s ``demo_sep``); the project ``prefix + query`` (the context's prefix
    and head). The options must be the task's, in its order."""
    assert call.options == list(task.options)
    rows = task.test_cases(100)
    same_context = call.prefix + "\n" == prefix
    identical = sum(same_context and ref == query(task, row)
                    for ref, row in zip(call.prompts, rows, strict=True))
    return len(call.prompts), identical


def joined(context: Any) -> str:
    return context.prefix + context.head


def assert_seam(tokenizer: Any, context: Any, task: LliclTask) -> None:
    """Backends read the context's prefix and each test input's suffix tokenized apart (the
    prefix is computed once); the model must still read the ids of the joined prompt, which is
    what the reference tokenizes."""
    request = context.request(task, task.test[0])
    assert (tokenizer.encode(request.prefix) + suffix_ids(tokenizer, request.prefix,
                                                          request.suffix)
            == tokenizer.encode(request.prefix + request.suffix))


# -- prompts ---------------------------------------------------------------------------------

STREAMS = {
    # (split the reference reads, --n_task): the paper's 16 tasks are the first 16 of the
    # default split's seeded shuffle; the permissive 16 are a split of their own.
    "main16": (ALL64, 16),
    "permissive16": (PERMISSIVE16, 16),
    "scale-task-8": (ALL64, 8),
}
ARGUMENTS = {
    "recall": ["--exp_mode", "recall"],
    "paraphrase": ["--exp_mode", "recall", "--use_paraphrase"],
    "replay": ["--exp_mode", "replay"],
    "remove": ["--exp_mode", "remove", "--use_paraphrase"],
    "remove-same-instruction": ["--exp_mode", "remove"],
}


@pytest.mark.parametrize("stream, setting, permutations", [
    ("main16", "recall", 5),
    ("main16", "paraphrase", 1),
    ("main16", "replay", 1),
    ("main16", "remove", 1),
    ("main16", "remove-same-instruction", 1),
    ("permissive16", "recall", 2),
    ("scale-task-8", "recall", 2),
])
def test_lifelong_prompts_are_the_references(drive: Callable[..., ReferenceRun], smollm2: Any,
                                             stream: str, setting: str, permutations: int,
                                             conformance: Any) -> None:
    """Every test input of every (permutation, resample, task): the reference's run.py with the
    arguments of its released scripts (``scripts/evaluate/run_recall.sh``,
    ``scripts/controlled_experiments/run_paraphrase.sh``, ``run_replay.sh``, ``run_remove.sh``)
    against the project's Lifelong context of the same cell; the permutations are the
    reference's own (``permutations.csv``) for the project's default seed."""
    split, n_task = STREAMS[stream]
    n_shot = 2
    run = drive(split, *ARGUMENTS[setting], "--n_task", str(n_task), "--n_shot", str(n_shot),
                "--permutation_num", str(permutations))
    hs = settings(MAIN16 if stream == "main16" else split, n_task, n_shot)
    streams = run.tables["permutations"].values.tolist()
    rows = run.tables["results"]
    assert len(run.calls) == len(rows) == permutations * 5 * n_task
    compared = identical = 0
    for call, (_, row) in zip(run.calls, rows.iterrows(), strict=True):
        cell = plan(hs, row["task_name"], row["permutation_id"], setting)
        assert [t.name for t in cell.stream] == streams[row["permutation_id"]]
        context = lifelong(cell.spec(row["fewshot_sample_id"]), cell.task)
        counts = compare(call, joined(context), cell.task)
        compared, identical = compared + counts[0], identical + counts[1]
        if row["permutation_id"] == row["fewshot_sample_id"] == 0:
            assert_seam(smollm2, context, cell.task)
    conformance.record(CATEGORY, "prompts", compared, identical,
                       option=None if setting != "remove-same-instruction"
                       else "--haystack-setting remove-same-instruction")
    assert identical == compared


def test_single_task_prompts_are_the_references(drive: Callable[..., ReferenceRun], smollm2: Any,
                                                conformance: Any) -> None:
    """run_baseline.py (the Single-task ICL baseline: 0..8, 12 and 16 shots per class, five
    resamples each, one for 0 shots) against the project's Single-task context, on the paper's
    16 tasks."""
    tasks = MAIN16
    run = drive(tasks, "--exp_mode", "baseline")
    rows = run.tables["results"]
    assert len(run.calls) == len(rows) == len(tasks) * (1 + 10 * 5)
    compared = identical = 0
    for call, (_, row) in zip(run.calls, rows.iterrows(), strict=True):
        task = load_task(LLICL, row["task_name"])
        context = single_task(task, int(row["train_set_id"]), int(row["n_shot_per_class"]))
        counts = compare(call, joined(context), task)
        compared, identical = compared + counts[0], identical + counts[1]
    conformance.record(CATEGORY, "prompts", compared, identical)
    assert identical == compared


@pytest.mark.parametrize("setting, arguments", [
    ("repeat", []),
    ("repeat-shuffle", ["--repeat_shuffle"]),
    ("random", ["--use_irrlevant_prefix"]),
])
def test_repeat_and_random_prompts_are_the_references(
        drive: Callable[..., ReferenceRun], ref: SimpleNamespace, smollm2: Any, setting: str,
        arguments: list[str], conformance: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_repeat.py with the arguments of ``run_repeat.sh`` and ``run_irrelevant.sh`` (16 tasks,
    4 shots, n_repeat left to its default, the number of tasks) against the project's context.
    Repeat+Shuffle draws its shuffles from one global ``random`` stream in the reference and
    from a seeded stream per cell here; the reference is handed the project's shuffles (the
    order of each copy), so what is compared is everything else."""
    hs = settings(MAIN16, 16, 4)
    runner = measure(smollm2)
    plans = {name: plan(hs, name, 0, setting) for name in MAIN16}
    if setting == "repeat-shuffle":
        monkeypatch.setitem(ref.cli.run_repeat.__globals__, "random",
                            SimpleNamespace(shuffle=ProjectShuffles(plans, runner)))
    run = drive(ALL64, "--exp_mode", "repeat", "--n_task", "16", "--n_shot", "4", *arguments)
    rows = run.tables["results"]
    expected, skipped = reference_order(plans, runner, shuffled=setting == "repeat-shuffle")
    assert len(run.calls) == len(rows) == len(expected)
    compared = identical = 0
    for call, (_, row), (name, _, repeats, context) in zip(
            run.calls, rows.iterrows(), expected, strict=True):
        cell = plans[name]
        assert row["task_name"] == name and row["n_repeat"] == repeats
        counts = compare(call, joined(context), cell.task)
        compared, identical = compared + counts[0], identical + counts[1]
    conformance.record(CATEGORY, "prompts", compared, identical)
    assert identical == compared
    # The released loop reuses its resample variable for the shuffles, records n_repeat - 2 as
    # the resample id and then skips a later resample of that id as "tested": the project
    # measures every resample (docs/fidelity.md, Repeat+Shuffle).
    assert bool(skipped) == (setting == "repeat-shuffle"), skipped


def reference_order(plans: dict[str, CellPlan], runner: HaystackMeasure, shuffled: bool
                    ) -> tuple[list[tuple[str, int, int, Any]], list[tuple[str, int]]]:
    """The (task, resample) of each call run_repeat.py makes, with the project's n_repeat and
    context for it, and the (task, resample) it skips: its results table records
    ``n_repeat - 2`` as the resample id of a shuffled run (the shuffle loop's variable), and a
    later resample whose id is recorded counts as tested."""
    made, skipped = [], []
    for name in MAIN16:
        recorded: set[int] = set()
        for resample in range(5):
            if resample in recorded:
                skipped.append((name, resample))
                continue
            _, context = runner._contexts(plans[name], resample)
            repeats = runner._repeats[resample]
            made.append((name, resample, repeats, context))
            recorded.add(repeats - 2 if shuffled and repeats >= 2 else resample)
    return made, skipped


class ProjectShuffles:
    """``random.shuffle`` for the reference's Repeat+Shuffle: each call reorders the examples
    (recognised by their content) as the project's next copy of them."""

    def __init__(self, plans: dict[str, CellPlan], runner: HaystackMeasure) -> None:
        self.copies: dict[frozenset[str], list[list[Any]]] = {}
        for cell in plans.values():
            for resample in range(5):
                spec = cell.spec(resample)
                block = runner.model.renderer.count(
                    task_block(cell.task, resample, spec.n_shot))
                spec = replace(spec, repeats=repeat_count(len(cell.stream), block))
                rows = repeated_demonstrations(spec, cell.task)
                size = spec.n_shot * cell.task.n_class
                chunks = [list(rows[i:i + size]) for i in range(0, len(rows), size)]
                self.copies[_key(chunks[0])] = chunks[1:]

    def __call__(self, examples: list[Any]) -> None:
        examples[:] = self.copies[_key(examples)].pop(0)


def _key(rows: Sequence[Any]) -> frozenset[str]:
    return frozenset(json.dumps(row, sort_keys=True) for row in rows)
def test_test_inputs_of_every_task_are_the_references_but_a_trailing_space(
        reference: Callable[..., ModuleType], conformance: Any) -> None:
    """``SingleTaskDataloader.prepare_prompts`` on every test input of all 80 tasks: identical,
    except that the project drops the trailing space of cola's "Label: " (the one template of
    the data with one; in neither 16-task set), so that each option's own leading-space token
    follows the prompt (docs/fidelity.md, trailing space)."""
    loader = reference("lifelong_icl", "dataloader.single_task").SingleTaskDataloader(None, None)
    compared = identical = 0
    trailing, other = set(), []
    for folder in sorted(p for p in LLICL.iterdir() if (p / "config.json").is_file()):
        task = load_task(LLICL, folder.name)
        config = json.loads((folder / "config.json").read_text())
        expected = loader.prepare_prompts(config, list(task.test))
        for prompt, row in zip(expected, task.test, strict=True):
            ours = query(task, row)
            compared, identical = compared + 1, identical + (ours == prompt)
            if ours == prompt.rstrip(" ") != prompt:
                trailing.add(task.name)
            elif ours != prompt:
                other.append((task.name, ours, prompt))
    conformance.record(CATEGORY, "prompts", compared, identical)
    assert not other, other[0]
    assert trailing == {"cola"}
    assert compared - identical == len(load_task(LLICL, "cola").test)


# -- the decision, the accuracy, the verdict --------------------------------------------------

def option_scores(rng: random.Random, count: int) -> tuple[list[int], dict[int, float]]:
    """Token ids of ``count`` options and a top-k of next-token log-probabilities: options in
    or out of it, ties between them, none of them, or no log-probabilities at all."""
    ids = rng.sample(range(1000, 50000), count)
    kind = rng.choice(["all", "some", "none", "tie", "empty", "close"])
    if kind == "empty":
        return ids, {}
    top = {token: -rng.uniform(0.0, 20.0) for token in rng.sample(range(50000, 60000), 30)}
    shown = {"all": ids, "some": rng.sample(ids, rng.randint(1, count)), "none": [],
             "tie": ids, "close": ids}[kind]
    for token in shown:
        top[token] = -rng.uniform(0.0, 20.0)
    if kind == "tie":
        tied = rng.sample(ids, 2)
        top[tied[1]] = top[tied[0]]
    if kind == "close":
        top[ids[1]] = math.nextafter(top[ids[0]], 0.0)
    return ids, top


def test_rank_decision_of_vllm_is_the_references(ref: SimpleNamespace, conformance: Any) -> None:
    """``vLLM.rank_postprocess`` (the top-100 log-probabilities of the first generated token;
    an option outside them scores -1e10, none of them gives NO_PREDICTION at -1e9, ties go to
    the first) against the project's ``rank_from_top`` and ``Ranking.choice``, on the same
    scores."""
    rng = random.Random(23)
    model = ref.vllm.vLLM.__new__(ref.vllm.vLLM)
    compared = identical = 0
    for _ in range(400):
        options = [f"label{i}" for i in range(rng.randint(2, 12))]
        ids, top = option_scores(rng, len(options))
        output = SimpleNamespace(outputs=[SimpleNamespace(
            text="", logprobs=[{t: SimpleNamespace(logprob=v) for t, v in top.items()}]
            if top else [])])
        expected = model.rank_postprocess([output], {o: [i] for o, i in zip(options, ids,
                                                                             strict=True)})
        ranking = topk_rank.rank_from_top(top, [[i] for i in ids], 0)
        chosen = "NO_PREDICTION" if ranking.choice is None else options[ranking.choice]
        compared, identical = compared + 1, identical + (chosen == expected[0]["prediction"])
    conformance.record(CATEGORY, "outputs", compared, identical)
    assert identical == compared


def hf_rank_agreement(ref: SimpleNamespace, cases: int = 400) -> tuple[int, int]:
    """(compared, identical): the HF backend's decision from a whole next-token distribution
    (``hf._ranking`` with the top-k its default options give) against the reference's
    ``vLLM.rank_postprocess`` on the 100 most likely tokens of the same logits, which is what
    vLLM returns it (``logprobs=100``). The test draws the logits only: where the options fall
    (inside, outside or across the 100th place) the two decide for themselves."""
    import torch

    from pytest_lceval.models import hf
    from pytest_lceval.models.options import LoadOptions

    rng = random.Random(31)
    generator = torch.Generator().manual_seed(31)
    model = ref.vllm.vLLM.__new__(ref.vllm.vLLM)
    compared = identical = 0
    for _ in range(cases):
        logits = torch.randn(4096, generator=generator) * 3
        ids = rng.sample(range(4096), rng.randint(2, 8))
        for token in rng.sample(ids, rng.randint(0, len(ids))):
            logits[token] += rng.choice([4.0, 6.0, 9.0])  # some options near or in the top 100
        logprobs = torch.log_softmax(logits, dim=-1)
        values, top = torch.topk(logprobs, 100)
        output = SimpleNamespace(outputs=[SimpleNamespace(text="", logprobs=[{
            int(t): SimpleNamespace(logprob=float(v)) for t, v in zip(top, values, strict=True)}])])
        options = [f"label{i}" for i in range(len(ids))]
        expected = model.rank_postprocess([output], {o: [i] for o, i in zip(options, ids,
                                                                             strict=True)})
        ranking = hf._ranking(logits, ids, 0, 0.0, hf.rank_top_k(LoadOptions()))
        chosen = "NO_PREDICTION" if ranking.choice is None else options[ranking.choice]
        compared, identical = compared + 1, identical + (chosen == expected[0]["prediction"])
    return compared, identical


def test_rank_decision_of_the_hf_backend_is_the_references(ref: SimpleNamespace,
                                                            conformance: Any) -> None:
    """A local model ranks as the reference's vLLM does by default: the decision (an option,
    or no prediction) from the same logits, on 400 distributions that put options inside,
    outside and across the 100th place (``--lceval-rank full`` would decide 'an option' where
    the reference finds none)."""
    compared, identical = hf_rank_agreement(ref)
    conformance.record(CATEGORY, "outputs", compared, identical)
    assert identical == compared


def test_rank_decision_of_openai_is_the_references(ref: SimpleNamespace, smollm2: Any,
                                                   conformance: Any) -> None:
    """``OpenAI.rank_postprocess`` (the top-20 token texts; each option is looked for as its
    first subword with and without a leading space, and the best of the two counts) against
    the project's reading of the same top-20 (``spellings``, ``rank_from_top``)."""
    rng = random.Random(29)
    model = ref.openai.OpenAI.__new__(ref.openai.OpenAI)
    words = ["positive", "negative", "neutral", "entailment", "not_entailment", "yes", "no",
             "World", "Sports", "Business", "Sci/Tech", "sarcastic", "literal", "true", "false"]
    compared = identical = 0
    for _ in range(400):
        options = rng.sample(words, rng.randint(2, 5))
        firsts = {o: smollm2.decode(smollm2.encode(o)[:1]) for o in options}
        spaced = {o: smollm2.decode(smollm2.encode(" " + o)[:1]) for o in options}
        if len(set(firsts.values())) < len(options) or len(set(spaced.values())) < len(options):
            continue  # options sharing a first token are refused before any request
        candidates = [*firsts.values(), *spaced.values()]
        shown = rng.sample(candidates, rng.randint(0, len(candidates)))
        top = {text: -rng.uniform(0.0, 8.0) for text in shown}
        if len(shown) >= 2 and rng.random() < 0.3:
            top[shown[1]] = top[shown[0]]
        for filler in ("the", " a", "\n", ":", " I"):
            top.setdefault(filler, -rng.uniform(0.0, 8.0))
        output = SimpleNamespace(choices=[SimpleNamespace(
            message=SimpleNamespace(content=""),
            logprobs=SimpleNamespace(content=[SimpleNamespace(top_logprobs=[
                SimpleNamespace(token=t, logprob=v) for t, v in top.items()])]))])
        tokens = {}
        for option in options:
            tokens[option], tokens[" " + option] = [firsts[option]], [spaced[option]]
        expected = model.rank_postprocess([output], tokens)[0]["prediction"]
        ranking = topk_rank.rank_from_top(top, topk_rank.spellings(smollm2, options), 0)
        chosen = "NO_PREDICTION" if ranking.choice is None else options[ranking.choice]
        compared, identical = compared + 1, identical + (chosen == expected)
    conformance.record(CATEGORY, "outputs", compared, identical)
    assert compared >= 200
    assert identical == compared


def test_accuracy_is_the_references(ref: SimpleNamespace, conformance: Any) -> None:
    """``utils.evaluate`` (sklearn's accuracy; in rank mode the OOD rate is the share of
    NO_PREDICTION) against the project's ``score`` of the same answers, labels outside the
    options included (the public scierc data has one)."""
    rng = random.Random(31)
    args = SimpleNamespace(inference_method="rank")
    compared = identical = 0
    for size in [1, 2, 5, *range(10, 210)]:
        options = tuple(f"class {i}" for i in range(rng.randint(2, 8)))
        labels = [rng.choice([*options, "Hypohym Of"]) for _ in range(size)]
        answers = [rng.choice([*options, "NO_PREDICTION"]) for _ in range(size)]
        task = SimpleNamespace(options=options)
        rankings = [Ranking(tuple(None if a == "NO_PREDICTION" else 0.0 if a == o else -1.0
                                  for o in options), True, 0) for a in answers]
        scored = score(task, [{"label": label} for label in labels], rankings)  # type: ignore[arg-type]
        accuracy, _, ood = ref.utils.evaluate(args, labels, answers, list(options))
        same = scored.accuracy == accuracy and scored.no_prediction / size == ood
        compared, identical = compared + 1, identical + same
    conformance.record(CATEGORY, "outputs", compared, identical)
    assert identical == compared


NOTEBOOK_TASKS = 8
"""Tables the notebook judges per call: one task each at its own position of an 8-task stream,
so that each of its 8 depth bins holds one task's verdict."""


def notebook_verdicts(notebook: SimpleNamespace, tables: Sequence[tuple[list[float], list[float]]],
                      folder: Path) -> list[int]:
    """Each (lifelong, single) table's verdict as the notebook's ``get_one_matrix`` decides it
    (-1 fail, 0 pass, +1 significantly better), from results files in the drivers' format: a
    task's recall rows in resample order for each of the 5 permutations, which all put the task
    at its own position, and its baseline rows at 2 shots. The notebook averages a position's
    verdicts over the permutations and the positions over 8 bins: one task per bin and the same
    rows in every permutation leave each bin that task's verdict."""
    import pandas

    verdicts: list[int] = []
    for start in range(0, len(tables), NOTEBOOK_TASKS):
        batch = tables[start:start + NOTEBOOK_TASKS]
        names = [f"task{index}" for index in range(NOTEBOOK_TASKS)]
        recall = [{"task_name": names[index], "permutation_id": permutation,
                   "fewshot_sample_id": resample, "accuracy": accuracy}
                  for permutation in range(5) for index, (life, _) in enumerate(batch)
                  for resample, accuracy in enumerate(life)]
        baseline = [{"task_name": names[index], "n_shot_per_class": 2,
                     "train_set_id": resample, "accuracy": accuracy}
                    for index, (_, single) in enumerate(batch)
                    for resample, accuracy in enumerate(single)]
        recall_dir, baseline_dir = folder / f"recall{start}", folder / f"baseline{start}"
        recall_dir.mkdir()
        baseline_dir.mkdir()
        pandas.DataFrame(recall).to_csv(recall_dir / "results.csv")
        pandas.DataFrame(baseline).to_csv(baseline_dir / "results.csv")
        pandas.DataFrame([names[:len(batch)]] * 5).to_csv(recall_dir / "permutations.csv")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # identical groups; empty bins
            bins = notebook.get_one_matrix(str(baseline_dir), str(recall_dir),
                                           n_task=len(batch), n_shot=2)
        verdicts += [int(value) for value in bins[:len(batch)]]
    return verdicts


def verdict_agreement(notebook: SimpleNamespace,
                      tables: Sequence[tuple[list[float], list[float]]],
                      folder: Path) -> tuple[int, int]:
    """How many of ``tables`` get the notebook's verdict from the project's paired verdict."""
    theirs = notebook_verdicts(notebook, tables, folder)
    ours = [paired_verdict(dict(enumerate(life)), dict(enumerate(single))).value
            for life, single in tables]
    return len(tables), sum(a == b for a, b in zip(ours, theirs, strict=True))


def accuracy_tables(rng: random.Random) -> Iterator[tuple[list[float], list[float]]]:
    """Five paired accuracies (k / 100, as the reference computes them): random pairs,
    identical groups, constant shifts, one differing pair, groups constant within."""
    def group() -> list[float]:
        return [rng.randint(0, 100) / 100 for _ in range(5)]
    for _ in range(150):
        yield group(), group()
    for _ in range(30):
        same = group()
        yield same, list(same)
    for _ in range(30):
        single, shift = group(), rng.choice([-3, -1, 1, 2])
        yield [max(0, min(100, round(a * 100) + shift)) / 100 for a in single], single
    for _ in range(30):
        single = group()
        life = list(single)
        life[rng.randrange(5)] = rng.randint(0, 100) / 100
        yield life, single
    for _ in range(20):
        yield [rng.randint(0, 100) / 100] * 5, [rng.randint(0, 100) / 100] * 5
    for _ in range(40):
        single = group()
        yield [max(0.0, min(1.0, a + rng.choice([-0.05, -0.04, 0.03]) +
                            rng.choice([-0.01, 0.0, 0.01]))) for a in single], single


def test_verdict_is_the_references(drive: Callable[..., ReferenceRun],
                                   lifelong_notebook: SimpleNamespace, conformance: Any,
                                   tmp_path: Path) -> None:
    """The project's paired verdict against the one the notebook's own ``get_one_matrix``
    computes, on 300 tables of paired accuracies and on the reference's own tables (recall on
    the paper's 16 tasks, 2 shots, 5 permutations, against run_baseline.py's 2-shot rows),
    paired by resample id (the notebook pairs rows in file order: the files hold them in
    resample order)."""
    rng = random.Random(37)
    tables = list(accuracy_tables(rng))
    recall = drive(ALL64, *ARGUMENTS["recall"], "--n_task", "16", "--n_shot", "2",
                   "--permutation_num", "5").tables["results"]
    baseline = drive(MAIN16, "--exp_mode", "baseline").tables["results"]
    single = baseline[baseline["n_shot_per_class"] == 2]
    for (_, _), group in recall.groupby(["task_name", "permutation_id"]):
        name = group["task_name"].iloc[0]
        pairs = single[single["task_name"] == name].sort_values("train_set_id")
        life = group.sort_values("fewshot_sample_id")
        assert life["fewshot_sample_id"].tolist() == pairs["train_set_id"].tolist()
        tables.append((life["accuracy"].tolist(), pairs["accuracy"].tolist()))
    compared, identical = verdict_agreement(lifelong_notebook, tables, tmp_path)
    conformance.record(CATEGORY, "outputs", compared, identical)
    assert compared >= 300
    assert identical == compared
