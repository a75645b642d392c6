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
from pytest_lceval.benchmarks.ruler.common import HELMET_RULER, RULER_CODES, case_rngs
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


def cases_of(name: str, commit: str, smollm2: Any,
             samples: int = SAMPLES) -> list[tuple[int, Case]]:
    """The project's cases (with their cell length) under ``--lceval-ruler commit``."""
    task = next(t for t in recall.tasks(ruler=commit) if t.name == name)
    context = BuildContext(smollm2, smollm2.renderer.without_template(), DataSource(None), SEED)
    return [(length, case) for length in LENGTHS[name]
            for case in task.build(Cell("recall", name, length, None, samples), context)]


def base_template(ruler: Callable[..., ModuleType], commit: str, task: str) -> str:
    """The template RULER's ``prepare.py`` passes for the base model template: the task's
    template and its answer prefix (RULER's constants.py at ``commit``)."""
    config = ruler(commit, "constants").TASKS[task]
    return str(config["template"] + config["answer_prefix"])


def check(cases: list[tuple[int, Case]], rows: list[dict[str, Any]], name: str, commit: str,
          helmet_ruler_prompts: Callable[..., list[str]], conformance: Any) -> None:
    """The project's prompts equal what HELMET builds from RULER's fields."""
    expected = helmet_ruler_prompts(HELMET_NAMES[name], rows)
    pairs = [(case.prompt, want) for (_, case), want in zip(cases, expected, strict=True)]
    conformance.record("HELMET load_ruler", "prompts", len(pairs),
                       sum(ours == theirs for ours, theirs in pairs), option(commit))
    conformance.compare("RULER", "prompts", pairs, option(commit))


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


# -- sizes --------------------------------------------------------------------------------------


def test_sizes_are_rulers_search(ruler: Callable[..., ModuleType], smollm2: Any,
                                 helmet_data: ModuleType, conformance: Any,
                                 tmp_path: Path) -> None:
    """How many noise lines (VT), distinct words (CWE) and what Zipf n (FWE) a case gets is
    RULER f682453's decision: its own search (``sys_vartrack_w_noise_random``,
    ``sys_word_pair_random``, ``generate_input_output`` of FWE) runs on each case's draws with
    the model's tokenizer, the cell's length and the task's generation budget, and the size it
    writes the sample at must be the project's.

    What RULER measures is the prompt the model reads: VT, the task in HELMET's template (RULER
    counts its example apart, as f682453 does); CWE, its example in its own base template (as
    HELMET's files hold it) and the task in HELMET's (``ExampleThenTask``), so that the sample
    it writes is the project's prompt; FWE, HELMET's template. Not RULER's: FWE's limit is the
    length less the generation budget (f682453 lets the prompt alone take the length), and the
    tries are made of the case's own draws where RULER searches once per file with its own
    (``benchmarks/ruler/size_search.py``)."""
    compared, identical = sizes_agreement(ruler, helmet_data, smollm2, tmp_path)
    conformance.record("RULER", "choices", compared, identical)
    assert identical == compared > 0


def sizes_agreement(ruler: Callable[..., ModuleType], helmet_data: ModuleType, smollm2: Any,
                    tmp_path: Path, names: tuple[str, ...] = ("vt", "cwe", "fwe"),
                    samples: int = SAMPLES) -> tuple[int, int]:
    """How many of the project's cases (built afresh) have the size RULER's search writes."""
    tasks = {"vt": "variable_tracking", "cwe": "common_words_extraction",
             "fwe": "freq_words_extraction"}
    units_of = {"vt": vt_units, "cwe": cwe_units, "fwe": fwe_units}
    compared = identical = 0
    for name in names:
        generator = ruler(HELMET_RULER, tasks[name], **(
            {"tokens_to_generate": RULER_VT_TOKENS} if name == "vt" else {}))
        templates = (base_template(ruler, HELMET_RULER, tasks[name]),
                     helmet_template(helmet_data, name, tmp_path))
        for length, case in cases_of(name, HELMET_RULER, smollm2, samples):
            theirs = units_of[name](generator, templates, smollm2, case, length, tmp_path)
            ours = len(case.meta["words"]) if name == "cwe" else case.meta[UNITS[name]]
            compared += 1
            identical += theirs == ours
    return compared, identical


UNITS = {"vt": "noise_lines", "fwe": "zipf_n"}
"""Where a case records its size (CWE: the distinct words it lists, ``words``)."""


def helmet_template(helmet_data: ModuleType, name: str, tmp_path: Path) -> str:
    """HELMET's prompt template of a RULER task, without its example."""
    path = tmp_path / "one.jsonl"
    path.write_text('{"context": "", "query": "", "outputs": ["x"]}\n')
    template = helmet_data.load_ruler(HELMET_NAMES[name], str(path))["prompt_template"]
    return str(template).replace("{example}", "")


def recording(module: ModuleType, patch: pytest.MonkeyPatch) -> list[int]:
    """The first argument of every ``generate_input_output`` RULER's search makes."""
    tried: list[int] = []
    generate = module.generate_input_output

    def recorded(size: int, *args: Any, **kwargs: Any) -> Any:
        tried.append(size)
        return generate(size, *args, **kwargs)

    patch.setattr(module, "generate_input_output", recorded)
    return tried


Templates = tuple[str, str]
"""A task's template in RULER's base form, and HELMET's without its example."""


def vt_units(vt: ModuleType, templates: Templates, smollm2: Any, case: Case, length: int,
             tmp_path: Path) -> int:
    example_seed = case_seed(SEED, "vt", "example")
    drawn = Example.draw(smollm2, HELMET_RULER, example_seed).chain
    replay = ChainReplay()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vt, "random", replay)
        patch.setattr(vt, "np", replay.np)
        patch.setattr(vt.args, "template", templates[0])
        patch.setattr(vt.args, "tokens_to_generate", int(RULER_VT_TOKENS))
        replay.chain(drawn.names, case.meta["example_chain"]["value"], example_seed)
        icl = vt.sys_vartrack_w_noise_random(num_samples=1, max_seq_length=500,
                                             incremental=5, num_chains=1, num_hops=4)[0]
        replay.chain(list(case.gold), case.meta["value"],
                     case_seed(SEED, "vt", case.index, "positions"))
        patch.setattr(vt.args, "template", templates[1])
        patch.setattr(vt.args, "tokens_to_generate", case.max_new_tokens)
        tried = recording(vt, patch)
        vt.sys_vartrack_w_noise_random(num_samples=1, max_seq_length=length, num_chains=1,
                                       num_hops=4, icl_example=icl)
    return tried[-1]


def cwe_units(cwe: ModuleType, templates: Templates, smollm2: Any, case: Case, length: int,
              tmp_path: Path) -> int:
    """Each try of RULER's search draws the case's example words, then the first n words of
    the case's order of the vocabulary (the project's draw, read past the case's own words)."""
    rng, _ = case_rngs(SimpleNamespace(seed=SEED), "cwe", case.index)
    vocabulary = wonderwords()
    order = rng.sample(vocabulary, len(vocabulary))
    assert order[:len(case.meta["words"])] == case.meta["words"]
    examples = case.meta["example_words"]
    seed = case_seed(SEED, "cwe", case.index, "order")
    sizes: list[int] = []

    def sample(population: list[str], k: int) -> list[str]:
        sizes.append(k)
        return list(examples) if len(sizes) % 2 else order[:k]  # the example's, the list's

    draws = SimpleNamespace(sample=sample, Random=lambda _: random.Random(f"{seed}:{sizes[-1]}"))
    template = ExampleThenTask(templates[0], "\n" + templates[1])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cwe, "random", draws)
        patch.setattr(cwe.args, "template", template)
        patch.setattr(cwe.args, "max_seq_length", length)
        patch.setattr(cwe.args, "tokens_to_generate", case.max_new_tokens)
        tried = recording(cwe, patch)
        [written] = cwe.sys_word_pair_random(num_samples=1, max_seq_length=length,
                                             save_dir=str(tmp_path), incremental=10)
    return tried[-1] if written["input"] == case.prompt else -1  # -1: another prompt


class ExampleThenTask(str):
    """CWE's one template, as RULER formats it twice per try: its example in RULER's own
    template (as HELMET's files hold it), then the task in the template the model reads
    (HELMET's, after the blank line HELMET puts after the example)."""

    task: str
    formatted: int

    def __new__(cls, example: str, task: str) -> ExampleThenTask:
        template = super().__new__(cls, example)
        template.task, template.formatted = task, 0
        return template

    def format(self, *args: Any, **kwargs: Any) -> str:
        self.formatted += 1
        return str.format(self if self.formatted % 2 else self.task, *args, **kwargs)


def fwe_units(fwe: ModuleType, templates: Templates, smollm2: Any, case: Case, length: int,
              tmp_path: Path) -> int:
    """RULER's search for n (from ``limit // 6`` by ``limit // 32``), then its check of the
    sample, each on the case's coded words."""
    limit = length - case.max_new_tokens
    size = len(case.meta["coded_words"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fwe.args, "template", templates[1])
        patch.setattr(fwe, "random", _fwe_draws(case))
        _, _, searched = fwe.generate_input_output(limit, vocab_size=size,
                                                   incremental=limit // 32)
        patch.setattr(fwe, "random", _fwe_draws(case))
        _, _, written = fwe.generate_input_output(limit, num_words=searched, vocab_size=size,
                                                  incremental=limit // 32)
    return int(written)


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
