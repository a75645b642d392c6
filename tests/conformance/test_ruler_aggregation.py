"""VT, CWE and FWE against RULER's own generators at both commits the recall suite follows
(``--lceval-ruler``: f682453, which generated HELMET's recall files, the default; and c3f5e3b,
the pinned copy), wrapped by HELMET's ``load_ruler``, on the same draws.

RULER draws with its module-level ``random`` and ``np.random``: the tests hand it the project's
draws instead (variables and values, the words of a list, the coded vocabulary) and seed its
shuffles and its choice of noise lines as the project seeds its own, so that equal inputs must
give equal text. RULER's code then does the rest: the chain's statements, where they go and how
the lines are joined; which words repeat how often, the numbering; the Zipf counts; the solved
example, sized by RULER's own search in the model's tokenizer; and the vocabulary size from the
length. The project's haystack size (its length axis: 99-100 % of the cell in the model's
tokens) is given to RULER as the number of noise lines, of words, or Zipf's n. The prompt HELMET
builds from RULER's fields must equal the project's byte for byte.

HELMET's files hold RULER's fields apart (``context``, ``query``, ``example``); the example
field is taken as RULER's solved example with its answer, without the separators RULER's own
prompt puts around it (HELMET's template adds ``\\n\\n``). RULER's base model template is used
(``prepare.py --model_template_type base``), as for a run without a chat template.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Iterator
from itertools import count, cycle, product
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import yaml

from pytest_lceval.benchmarks.ruler import tasks as recall
from pytest_lceval.benchmarks.ruler.common import HELMET_RULER, RULER_CODES
from pytest_lceval.benchmarks.ruler.common_words import wonderwords
from pytest_lceval.benchmarks.ruler.variable_tracking import Example
from pytest_lceval.builtin_suites import builtin_tasks
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell, case_seed
from pytest_lceval.results.records import Case
from pytest_lceval.tasks.base import BuildContext

SEED = 42
SAMPLES = 25
HELMET_NAMES = {"vt": "ruler_vt", "cwe": "ruler_cwe", "fwe": "ruler_fwe"}
LENGTHS = {"vt": (1024, 2048), "cwe": (1024, 4096), "fwe": (1024, 4096)}
"""CWE at 4k: RULER's long setting (30/3 repeats, a 40-word example)."""
RULER_VT_TOKENS = "30"
"""RULER's tokens_to_generate for vt (its constants.py), which its 2024 example search uses."""


def option(commit: str) -> str | None:
    return None if commit == HELMET_RULER else f"--lceval-ruler {commit}"


def cases_of(name: str, commit: str, smollm2: Any) -> list[tuple[int, Case]]:
    """The project's cases (with their cell length) under ``--lceval-ruler commit``."""
    task = next(t for t in recall.tasks(ruler=commit) if t.name == name)
    context = BuildContext(smollm2, smollm2.renderer.without_template(), DataSource(None), SEED)
    return [(length, case) for length in LENGTHS[name]
            for case in task.build(Cell("recall", name, length, None, SAMPLES), context)]


def base_template(ruler: Callable[..., ModuleType], commit: str, task: str) -> str:
    """The template RULER's ``prepare.py`` passes for the base model template: the task's
    template and its answer prefix (RULER's constants.py at ``commit``)."""
    config = ruler(commit, "constants").TASKS[task]
    return str(config["template"] + config["answer_prefix"])


def check(cases: list[tuple[int, Case]], rows: list[dict[str, Any]], name: str, commit: str,
          helmet_ruler_prompts: Callable[..., list[str]], conformance: Any) -> None:
    """The project's prompts equal what HELMET builds from RULER's fields."""
    expected = helmet_ruler_prompts(HELMET_NAMES[name], rows)
    identical = 0
    for (_, case), want in zip(cases, expected, strict=True):
        assert case.prompt == want
        identical += 1
    conformance.record("RULER", "prompts", len(cases), identical, option(commit))
    conformance.record("HELMET load_ruler", "prompts", len(cases), identical, option(commit))


def seeded(seeds: list[str]) -> Callable[[object], random.Random]:
    """Stands in for ``random.Random(args.random_seed)``: a generator seeded with the next seed
    the project shuffled with. The project shuffles a list built in RULER's order with
    ``random.Random(seed).shuffle``, so RULER's shuffle then gives the project's order."""
    given = iter(seeds)
    return lambda _: random.Random(next(given))


# -- VT -----------------------------------------------------------------------------------------


class ChainReplay:
    """RULER's ``random`` and ``np`` for variable tracking: each chain RULER draws gets the
    given variables and value, and the noise lines its statements go before are drawn as the
    project draws them (``random.Random(f"{seed}:{lines}").sample``)."""

    def __init__(self) -> None:
        self.seed = 0
        self.names: Iterator[str] = iter(())
        self.values: Iterator[str] = iter(())
        self.np = SimpleNamespace(random=SimpleNamespace(randint=self.randint))

    def chain(self, names: list[str], value: str, seed: int = 0) -> None:
        """Every chain RULER draws from now on: ``names`` (again and again: its searches draw
        one chain per try) and ``value``; its lines drawn with ``seed``."""
        self.names, self.values, self.seed = cycle(names), cycle([value]), seed

    def choices(self, population: str, k: int) -> list[str]:
        name = next(self.names)
        assert len(name) == k and set(name) <= set(population)
        return list(name)

    def randint(self, low: int, high: int) -> int:
        value = int(next(self.values))
        assert low <= value < high
        return value

    def sample(self, population: range, count: int) -> list[int]:
        return random.Random(f"{self.seed}:{len(population)}").sample(population, count)


@pytest.mark.parametrize("commit", RULER_CODES)
def test_vt_prompts_are_rulers_in_helmets_template(
        commit: str, ruler: Callable[..., ModuleType], smollm2: Any,
        helmet_ruler_prompts: Callable[..., list[str]], conformance: Any) -> None:
    vt = ruler(commit, "variable_tracking", tokens_to_generate=RULER_VT_TOKENS)
    template = base_template(ruler, commit, "variable_tracking")
    example_seed = case_seed(SEED, "vt", "example")
    drawn = Example.draw(smollm2, commit, example_seed).chain
    cases = cases_of("vt", commit, smollm2)
    rows = []
    for _, case in cases:
        replay, shown = ChainReplay(), case.meta["example_chain"]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(vt, "random", replay)
            patch.setattr(vt, "np", replay.np)
            patch.setattr(vt.args, "template", template)
            # the example: drawn once per file (f682453 with its value; c3f5e3b with 12345)
            replay.chain(drawn.names, shown["value"] if commit == "f682453" else "12345",
                         example_seed)
            icl = vt.sys_vartrack_w_noise_random(num_samples=1, max_seq_length=500,
                                                 incremental=5, num_chains=1, num_hops=4)[0]
            example = f"{icl['input']} {' '.join(icl['outputs'])}"
            if commit != "f682453":  # each case renames its variables and value
                replay.chain(shown["names"], shown["value"])
                replay.names = iter(shown["names"])
                example = vt.randomize_icl(example)
            replay.chain(list(case.gold), case.meta["value"],
                         case_seed(SEED, "vt", case.index, "positions"))
            patch.setattr(vt.args, "template", "{context}")
            context, answer = vt.generate_input_output(case.meta["noise_lines"], 1, 4)
        assert answer == list(case.gold)
        rows.append({"context": context, "query": case.meta["value"], "num_v": 5,
                     "example": example, "outputs": answer})
    check(cases, rows, "vt", commit, helmet_ruler_prompts, conformance)


# -- CWE ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", RULER_CODES)
def test_cwe_prompts_are_rulers_in_helmets_template(
        commit: str, ruler: Callable[..., ModuleType], smollm2: Any,
        helmet_ruler_prompts: Callable[..., list[str]], conformance: Any) -> None:
    cwe = ruler(commit, "common_words_extraction")
    assert set(cwe.words) == set(wonderwords())  # RULER's vocabulary is the project's
    template = base_template(ruler, commit, "common_words_extraction")
    head, tail = template.split("{context}")
    cases = cases_of("cwe", commit, smollm2)
    rows = []
    for length, case in cases:
        words = case.meta["words"]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cwe, "random", _cwe_draws(case))
            patch.setattr(cwe.args, "template", template)
            patch.setattr(cwe.args, "max_seq_length", length)
            text, answer = cwe.generate_input_output(len(words))
        assert answer == list(case.gold) and text.endswith(tail)
        start = text.rindex(head)
        assert text[start - 1] == "\n"  # RULER's example, a newline, the task
        rows.append({"context": text[start + len(head):-len(tail)], "query": "",
                     "example": text[:start - 1], "outputs": answer})
    check(cases, rows, "cwe", commit, helmet_ruler_prompts, conformance)


def _cwe_draws(case: Case) -> SimpleNamespace:
    """RULER's ``random`` for CWE: the example's words, then the list's (the first ten are the
    common ones), as the project drew them; its shuffles seeded as the project's."""
    examples, words = case.meta["example_words"], case.meta["words"]
    drawn = iter([examples, words])
    order = case_seed(SEED, "cwe", case.index, "order")

    def sample(population: list[str], k: int) -> list[str]:
        given = next(drawn)
        assert len(given) == k and set(given) <= set(population)
        return list(given)

    return SimpleNamespace(sample=sample, Random=seeded([f"{order}:{len(examples)}",
                                                         f"{order}:{len(words)}"]))


# -- FWE ----------------------------------------------------------------------------------------


class Stop(Exception):
    """Ends RULER's ``sys_kwext`` once it has chosen the vocabulary size."""


@pytest.mark.parametrize("commit", RULER_CODES)
def test_fwe_prompts_are_rulers_in_helmets_template(
        commit: str, ruler: Callable[..., ModuleType], smollm2: Any,
        helmet_ruler_prompts: Callable[..., list[str]], conformance: Any) -> None:
    fwe = ruler(commit, "freq_words_extraction")
    cases = cases_of("fwe", commit, smollm2)
    rows = []
    for length, case in cases:
        vocabulary = case.meta["coded_words"]
        with pytest.MonkeyPatch.context() as patch:  # RULER's vocabulary size for the length
            patch.setattr(fwe, "generate_input_output", _stop_with_vocabulary_size)
            with pytest.raises(Stop) as stopped:
                fwe.sys_kwext(num_samples=1, max_seq_length=length, incremental=10)
        assert stopped.value.args[0] == len(vocabulary)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fwe, "random", _fwe_draws(case))
            patch.setattr(fwe.args, "template", "{context}")
            context, answer, _ = fwe.generate_input_output(
                10**9, num_words=case.meta["zipf_n"], vocab_size=len(vocabulary))
        assert answer == list(case.gold)
        rows.append({"context": context, "query": "", "outputs": answer})
    check(cases, rows, "fwe", commit, helmet_ruler_prompts, conformance)


def _stop_with_vocabulary_size(*_: Any, vocab_size: int, **__: Any) -> None:
    raise Stop(vocab_size)


def _fwe_draws(case: Case) -> SimpleNamespace:
    """RULER's ``random`` for FWE. RULER draws its coded words, sorts and shuffles them and puts
    '...' in place of the first: it gets the project's words (and one more for the place of
    '...'), and its shuffle puts them in the project's order; then it shuffles the text's
    words (twice, the same way), seeded as the project's shuffle."""
    vocabulary = case.meta["coded_words"]
    assert vocabulary[0] == "..."
    replaced = next(word for word in map("".join, product(string.ascii_lowercase, repeat=6))
                    if word not in vocabulary)
    given = iter([replaced, *vocabulary[1:]])
    rank = {word: at for at, word in enumerate(vocabulary)}
    shuffles = count()
    order = f"{case_seed(SEED, 'fwe', case.index, 'order')}:{case.meta['zipf_n']}"

    def choices(population: str, k: int) -> list[str]:
        word = next(given)
        assert len(word) == k and set(word) <= set(population)
        return list(word)

    def generator(_: object) -> Any:
        if next(shuffles):
            return random.Random(order)
        return SimpleNamespace(shuffle=lambda words: words.sort(key=lambda w: rank.get(w, 0)))

    return SimpleNamespace(choices=choices, Random=generator)


# -- budgets ------------------------------------------------------------------------------------


HELMET_TASKS = {"ruler_niah_s_1": "niah_single_1", "ruler_niah_s_2": "niah_single_2",
                "ruler_niah_s_3": "niah_single_3", "ruler_niah_mk_1": "niah_multikey_1",
                "ruler_niah_mk_2": "niah_multikey_2", "ruler_niah_mk_3": "niah_multikey_3",
                "ruler_niah_mq": "niah_multiquery", "ruler_niah_mv": "niah_multivalue",
                "ruler_cwe": "cwe", "ruler_fwe": "fwe", "ruler_vt": "vt", "json_kv": "json_kv"}


def test_recall_budgets_are_helmets(helmet_data: ModuleType) -> None:
    """Each recall task generates at most HELMET's generation_max_length for it
    (configs/ruler.yaml, configs/recall.yaml; RULER's QA tasks come with the RAG data)."""
    configs = Path(helmet_data.__file__).parent / "configs"
    budgets: dict[str, int] = {}
    for name in ("ruler.yaml", "recall.yaml"):
        config = yaml.safe_load((configs / name).read_text())
        for dataset, budget in zip(config["datasets"].split(","),
                                   str(config["generation_max_length"]).split(","),
                                   strict=True):
            assert budgets.setdefault(dataset, int(budget)) == int(budget)
    ours = {task.name: task.max_new_tokens for task in builtin_tasks("recall")}
    assert {HELMET_TASKS[name]: budget for name, budget in budgets.items()
            if name in HELMET_TASKS} == ours
