"""The recall suite against HELMET's and RULER's reference code: prompts (exact strings for a fixed
seed on the mock word tokenizer), decoding, the chat-template default, depths, and RULER's
vt / cwe / fwe tasks with golds recomputed from the prompt by independent solvers."""

from __future__ import annotations

import re
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from run_outputs import read_results
from toy_suite import RECALL_SUITE

from pytest_lceval.benchmarks.ruler import tasks as recall
from pytest_lceval.benchmarks.ruler.common import HELMET_RULER
from pytest_lceval.benchmarks.ruler.filler_text import NOISE
from pytest_lceval.benchmarks.ruler.niah import NiahTask
from pytest_lceval.benchmarks.ruler.size_search import niah_steps
from pytest_lceval.builtin_suites import builtin_task, builtin_tasks
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.chat_choice import renderer_for
from pytest_lceval.models.mock import MockBackend
from pytest_lceval.models.registry import LoadOptions
from pytest_lceval.results.records import Case
from pytest_lceval.run.evaluation import Evaluator
from pytest_lceval.settings import DEFAULT_DEPTHS
from pytest_lceval.tasks.base import BuildContext, CellDoesNotFit
from pytest_lceval.tasks.context_size import FILL, REFERENCE
from pytest_lceval.tasks.fitting import window

AGGREGATION = ["cwe", "fwe", "vt"]
NIAH = sorted(t.name for t in builtin_tasks("recall") if isinstance(t, NiahTask))

# HELMET's templates for RULER tasks (data.py, load_ruler) and JSON KV (load_json_kv); a base
# model reads user_template + "\n" + system_template.
HELMET = {
    "niah": ("A special magic {type_needle_v} is hidden within the following text. Make sure to "
             "memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\n"
             "What is the special magic {type_needle_v} for {query} mentioned in the provided "
             "text?",
             "The special magic {type_needle_v} for {query} mentioned in the provided text is"),
    "niah_mv": ("Some special magic {type_needle_v} are hidden within the following text. Make "
                "sure to memorize it. I will quiz you about the {type_needle_v} afterwards.\n"
                "{context}\nWhat are all the special magic {type_needle_v} for {query} "
                "mentioned in the provided text?",
                "The special magic {type_needle_v} for {query} mentioned in the provided text "
                "are"),
    "vt": ("{example}Memorize and track the chain(s) of variable assignment hidden in the "
           "following text.\n\n{context}\nQuestion: Find all variables that are assigned the "
           "value {query} in the text above.",
           "Answer: According to the chain(s) of variable assignment in the text above, {num_v} "
           "variables are assigned the value {query}, they are:"),
    "cwe": ("{example}Below is a numbered list of words. In these words, some appear more often "
            "than others. Memorize the ones that appear most often.\n{context}\nQuestion: What "
            "are the 10 most common words in the above list?",
            "Answer: The top 10 words that appear most often in the list are:"),
    "fwe": ("Read the following coded text and track the frequency of each coded word. Find "
            "the three most frequently appeared coded words.\n{context}\nQuestion: Do not "
            "provide any explanation. Please ignore the dots '....'. What are the three most "
            "frequently appeared words in the above coded text?",
            "Answer: According to the coded text above, the three most frequently appeared "
            "words are:"),
}
PROPERTIES = settings(max_examples=20, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])


def mock_context(template: bool = False, seed: int = 42) -> BuildContext:
    backend = MockBackend("grep", {}, LoadOptions(chat_template="on" if template else "off"))
    return BuildContext(backend.tokenizer, backend.renderer, DataSource(None), seed)


def build(name: str, length: int, depth: float | None = None, context: BuildContext | None = None,
          samples: int = 1, ruler: str = HELMET_RULER, size: str = FILL) -> list[Case]:
    """A recall cell's cases; by default in the filled cell, whose prompts the tests pin (the
    size RULER's search picks: ``test_haystacks_take_the_size_rulers_search_picks``)."""
    task = next(task for task in recall.tasks(ruler=ruler, size=size) if task.name == name)
    used = depth if task.uses_depth else None
    return task.build(Cell("recall", name, length, used, samples), context or mock_context())


def squeeze(prompt: str) -> str:
    """The prompt with each run of whole noise lines written as '[N noise lines]'."""
    out: list[str] = []
    run = 0
    for line in prompt.split("\n") + ["<end>"]:
        if line == NOISE:
            run += 1
            continue
        if run:
            out.append(f"[{run} noise lines]")
            run = 0
        out.append(line)
    return "\n".join(out[:-1])


def split_template(template: str, **fields: str) -> tuple[str, str]:
    """A template's text before and after {context}, the other fields filled in."""
    before, after = template.split("{context}")
    return before.format(**fields), after.format(**fields)


# -- item 1: prompts; no demonstrations for RULER tasks, JSON KV keeps HELMET's two ------------


@pytest.mark.parametrize("name", NIAH)
def test_niah_prompts_are_helmets_template_with_no_demonstrations(name: str) -> None:
    task = builtin_task(name)
    assert isinstance(task, NiahTask)
    case = build(name, 1024, 40.0)[0]
    multi = not task.uses_depth
    kind = task.value_kind + ("s" if multi else "")
    keys = case.meta["keys"]
    query = keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + ", and " + keys[-1]
    user, system = HELMET["niah_mv" if multi else "niah"]
    head, tail = split_template(user, type_needle_v=kind, query=query)
    end = tail + "\n" + system.format(type_needle_v=kind, query=query)
    assert case.prompt.startswith(head) and case.prompt.endswith(end)
    assert case.prompt.count("hidden within the following text") == 1
    assert case.prompt.count("mentioned in the provided text") == 2


def test_niah_single_1_prompt_is_pinned() -> None:
    """Seed 42, word tokenizer, 200 tokens at 40 %: no demonstrations, whole noise lines (RULER
    never cuts one), the needle on its own line, HELMET's budget of 50 tokens."""
    case = build("niah_single_1", 200, 40.0)[0]
    assert squeeze(case.prompt) == (
        "A special magic number is hidden within the following text. Make sure to memorize it. "
        "I will quiz you about the number afterwards.\n"
        "[2 noise lines]\n"
        "One of the special magic numbers for secretive-funding is: 6139240.\n"
        "[2 noise lines]\n"
        "What is the special magic number for secretive-funding mentioned in the provided text?\n"
        "The special magic number for secretive-funding mentioned in the provided text is")
    assert case.gold == ("6139240",)
    assert case.max_new_tokens == 50


def test_niah_multikey_2_prompt_is_pinned() -> None:
    case = build("niah_multikey_2", 180, 100.0)[0]
    assert case.prompt == (
        "A special magic number is hidden within the following text. Make sure to memorize it. "
        "I will quiz you about the number afterwards.\n"
        "One of the special magic numbers for fantastic-halibut is: 4323041.\n"
        "One of the special magic numbers for quack-apparel is: 3683128.\n"
        "One of the special magic numbers for courageous-landform is: 6817497.\n"
        "One of the special magic numbers for encouraging-cytoplasm is: 9210914.\n"
        "One of the special magic numbers for late-vol is: 2576735.\n"
        "One of the special magic numbers for overrated-mouton is: 6013038.\n"
        "One of the special magic numbers for decisive-office is: 2672863.\n"
        "One of the special magic numbers for red-pudding is: 9424188.\n"
        "What is the special magic number for red-pudding mentioned in the provided text?\n"
        "The special magic number for red-pudding mentioned in the provided text is")
    assert case.gold == ("9424188",)


def test_json_kv_keeps_helmets_two_demonstrations() -> None:
    case = build("json_kv", 160, 50.0)[0]
    pairs = case.prompt[:case.prompt.index("}\n\n")].count('": "')
    assert pairs == 15
    assert case.prompt[case.prompt.index("}\n\n"):] == (
        '}\n\nExtract the value corresponding to the specified key in the JSON object below.\n\n'
        'Key: "f18fca10-8155-4d47-b474-63ef13e8233e"\n'
        'Corresponding value: f9cad1a6-d48d-4f63-93f5-4d3dce3f0f66\n\n'
        'Key: "9751396b-75ef-4e2c-adc0-d6ed6f522017"\n'
        'Corresponding value: 30925e39-f57f-4d37-bc73-a94cea3da19b\n\n'
        'Key: "66b574c5-da42-4533-8b8e-d6ca3566cce6"\n'
        'Corresponding value:')
    assert case.gold == ("91e68c0b-0dbd-43fc-9bda-ac0e235064f3",)


# -- item 2: no stop at a newline; the whole output is scored -----------------------------------


def answered(case: Case, text: str) -> str:
    """What a model that says ``text`` is scored on, through a backend and the request."""
    backend = MockBackend("constant", {"text": text}, LoadOptions(chat_template="off"))
    return backend.generate([case.request()])[0].text


def test_an_answer_after_a_leading_newline_scores() -> None:
    task = builtin_task("niah_single_1")
    case = build("niah_single_1", 256, 50.0)[0]
    assert case.stop == () and case.request().stop == ()
    assert task.score(answered(case, "\n" + case.gold[0]), case) == 1.0
    kv = build("json_kv", 256, 50.0)[0]
    assert builtin_task("json_kv").score(answered(kv, "\n\n " + kv.gold[0]), kv) == 1.0


def test_multi_value_answers_over_several_lines_score() -> None:
    task = builtin_task("niah_multivalue")
    case = build("niah_multivalue", 512)[0]
    lines = "\n".join(f"{i}. {value}" for i, value in enumerate(case.gold, 1))
    assert task.score(answered(case, " " + lines), case) == 1.0
    assert task.score(answered(case, "\n" + "\n".join(case.gold[:2])), case) == 0.5
    assert task.score(answered(case, case.gold[3] + "\n"), case) == 0.25


# -- item 3: HELMET's use_chat_template per category, --chat-template overriding ---------------


def templated() -> Renderer:
    return Renderer(lambda user: f"<user>{user}<assistant>", len)


@pytest.mark.parametrize(("choice", "task", "expected"), [
    ("auto", "niah_single_1", False), ("auto", "json_kv", False), ("auto", "vt", False),
    ("auto", object(), True), ("on", "cwe", True), ("off", "fwe", False),
    ("off", object(), False),
])
def test_auto_follows_helmets_category_default_and_on_off_override(
        choice: str, task: object, expected: bool) -> None:
    """The backend loads with its template unless --chat-template is off; auto then drops it
    for the categories HELMET runs without one."""
    loaded = templated().without_template() if choice == "off" else templated()
    chosen = renderer_for(loaded, choice, builtin_task(task) if isinstance(task, str) else task)
    assert chosen.uses_template is expected
    assert chosen.count("abc") == 3


def test_a_chat_api_keeps_its_template() -> None:
    fixed = Renderer(lambda user: user, len, fixed=True)
    assert renderer_for(fixed, "auto", builtin_task("niah_single_1")) is fixed


@pytest.mark.parametrize(("mode", "kept"), [("chat", True), ("completions", False)])
def test_only_a_chat_api_keeps_the_template_under_auto(smollm2: object, mode: str,
                                                       kept: bool) -> None:
    """In chat mode the server templates every prompt, so auto cannot send a raw one there."""
    openai = pytest.importorskip("openai")
    from pytest_lceval.models.openai_api import OpenAIBackend
    from pytest_lceval.models.serving import ServingOptions

    url = "http://127.0.0.1:9/v1"  # never contacted: nothing is generated
    model = OpenAIBackend("openai:x", "x", openai.OpenAI(api_key="EMPTY", base_url=url),
                          smollm2, mode, ServingOptions(), (8192, "test"), url)  # type: ignore[arg-type]
    chosen = renderer_for(model.renderer, "auto", builtin_task("niah_single_1"))
    assert chosen.uses_template is kept


def evaluator(choice: str, backend: MockBackend) -> Evaluator:
    """An Evaluator with just what context_for reads."""
    chosen = SimpleNamespace(chat_template=choice, seed=42, ref_tokenizer=None)
    return Evaluator(None, chosen, backend, DataSource(None), None)  # type: ignore[arg-type]


def test_the_evaluator_builds_recall_cases_from_the_raw_prompt_under_auto() -> None:
    backend = MockBackend("grep", {}, LoadOptions(chat_template="on"))
    task = builtin_task("niah_single_1")
    context = evaluator("auto", backend).context_for(task)
    case = task.build(Cell("recall", "niah_single_1", 256, 50.0, 1), context)[0]
    assert not case.prompt.startswith("<user>") and case.chat is None
    assert "provided text?\nThe special magic number for" in case.prompt
    assert evaluator("on", backend).context_for(task).renderer.uses_template


def _two_recall_cells(pytester: pytest.Pytester, option: list[str], tasks: str,
                      *grid: str) -> list[dict[str, Any]]:
    """The results rows of a mock:grep recall run of two tasks, one cell each, both passing
    (threshold 0), with ``option`` and ``grid``."""
    pytester.makepyfile(test_recall=RECALL_SUITE)
    outcome = pytester.runpytest("--model", "mock:grep", *option, "--lceval-tasks", tasks,
                                 *grid, "--samples", "1", "--lceval-threshold", "0",
                                 "--lceval-run", "r", "-p", "no:randomly")
    outcome.assert_outcomes(passed=2)
    return read_results(pytester, "r")


@pytest.mark.parametrize(("option", "recorded"), [("auto", "off"), ("on", "on")])
def test_results_record_which_template_applied(pytester: pytest.Pytester, option: str,
                                               recorded: str) -> None:
    rows = _two_recall_cells(pytester, ["--chat-template", option], "niah_single_1,vt",
                             "--lengths", "1k", "--depths", "50")
    assert [row["metrics"]["chat_template"] for row in rows] == [recorded, recorded]


@pytest.mark.parametrize(("option", "recorded"), [([], "f682453"),
                                                  (["--lceval-ruler", "c3f5e3b"], "c3f5e3b")])
def test_lceval_ruler_picks_the_generators_and_results_record_it(
        pytester: pytest.Pytester, option: list[str], recorded: str) -> None:
    rows = _two_recall_cells(pytester, option, "vt,fwe", "--lengths", "1k")
    assert [row["metrics"]["ruler"] for row in rows] == [recorded, recorded]
    vt = next(row for row in rows if "vt" in row["nodeid"])["samples"][0]["prompt"]
    squeezed = vt.startswith("Memorize and track the chain(s) of variable assignment hidden in "
                             "the following text. ")  # the 2024 example's one-line template
    assert squeezed == (recorded == "f682453")


@pytest.mark.parametrize(("option", "value", "choices"), [
    ("--lceval-ruler", "2024", "f682453*c3f5e3b"),
    ("--lceval-context-size", "full", "reference*fill"),
])
def test_an_unknown_choice_is_refused_at_start_up(pytester: pytest.Pytester, option: str,
                                                  value: str, choices: str) -> None:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    outcome = pytester.runpytest("--model", "mock:grep", option, value)
    assert outcome.ret != 0
    outcome.stderr.fnmatch_lines([f"*{option}: invalid choice: '{value}'*{choices}*"])


STEPPED = {"niah_single_1": "haystack_units", "niah_single_2": "haystack_units",
           "niah_multikey_2": "haystack_units", "vt": "noise_lines", "cwe": "words",
           "fwe": "zipf_n"}
"""A task of each haystack and generator, and where its case records its size."""


@pytest.mark.parametrize("length", [2048, 4096])
@pytest.mark.parametrize("name", sorted(STEPPED))
def test_haystacks_take_the_size_rulers_search_picks(name: str, length: int) -> None:
    """Under ``--lceval-context-size reference`` (the default) a haystack's size is on RULER
    f682453's steps (essay words by 500; noise lines and needles by 25, by 5 below 4k; VT's
    lines and CWE's words by 10; FWE's n from (L - budget) // 6 by (L - budget) // 32), the
    largest whose prompt with the answer fits: at most two steps below the filled cell's
    (the answer it is measured with may cost one). The exact size is compared with RULER's
    own search in tests/conformance."""
    def units(case: Case) -> int:
        found = case.meta[STEPPED[name]]
        return len(found) if isinstance(found, list) else int(found)

    reference = build(name, length, 50.0, samples=2, size=REFERENCE)
    filled = build(name, length, 50.0, samples=2)
    task = next(task for task in recall.tasks() if task.name == name)
    limit = length - task.max_new_tokens
    first, step = {"vt": (10, 10), "cwe": (10, 10), "fwe": (limit // 6, limit // 32)}.get(
        name, (0, 0))
    if isinstance(task, NiahTask):
        first = step = niah_steps(task.haystack, length, task.max_new_tokens, []).step
    for ours, full in zip(reference, filled, strict=True):
        assert ours.meta["context_size"] == "reference" and full.meta["context_size"] == "fill"
        assert (units(ours) - first) % step == 0
        assert units(full) - 2 * step < units(ours) <= units(full)
        assert ours.total_tokens <= length


@pytest.mark.parametrize(("option", "recorded"), [([], "reference"),
                                                  (["--lceval-context-size", "fill"], "fill")])
def test_lceval_context_size_sizes_the_haystacks_and_results_record_it(
        pytester: pytest.Pytester, option: list[str], recorded: str) -> None:
    rows = _two_recall_cells(pytester, option, "niah_single_2,cwe", "--lengths", "2k",
                             "--depths", "50")
    assert [row["metrics"]["context_size"] for row in rows] == [recorded, recorded]
    niah = next(row for row in rows if "niah" in row["nodeid"])
    short = niah["input_tokens_mean"] + 50 < 0.9 * 2048  # RULER's 1000 words, not the filled cell
    assert short == (recorded == "reference")


# -- item 4: RULER's noise haystack: whole lines, each key item on its own line ----------------


@PROPERTIES
@given(name=st.sampled_from(["niah_single_1", "vt"]), length=st.integers(800, 6000),
       depth=st.floats(0, 100), seed=st.integers(0, 2**31 - 1), template=st.booleans())
def test_noise_haystacks_are_whole_lines_with_items_on_their_own(
        name: str, length: int, depth: float, seed: int, template: bool) -> None:
    """NIAH's noise haystack, and VT's as RULER writes it since 2025 (``--lceval-ruler
    c3f5e3b``)."""
    case = build(name, length, round(depth, 1), mock_context(template, seed),
                 ruler="c3f5e3b")[0]
    items = re.compile(r"One of the special magic numbers for [\w-]+ is: \d+\.$|VAR [A-Z]+ = "
                       r"(VAR [A-Z]+ |\d+)$")  # RULER's chain lines end with a space
    prompt, _ = user_and_answer(case)
    start = "afterwards.\n" if name == "niah_single_1" else "text.\n\n"
    lines = prompt[prompt.rindex(start) + len(start):].split("\n")[:-1]  # less the question
    kinds = ["noise" if line == NOISE else "item" if items.match(line) else "cut"
             for line in lines]
    assert kinds.count("item") == (1 if name == "niah_single_1" else 5)
    assert "cut" not in kinds  # RULER never cuts a noise line
    if name == "vt":  # RULER: statements before distinct noise lines, a noise line last
        runs = {a for a, b in zip(kinds, kinds[1:], strict=False) if a == b}
        assert kinds[-1] != "item" and "item" not in runs


@PROPERTIES
@given(length=st.integers(700, 6000), seed=st.integers(0, 2**31 - 1), template=st.booleans())
def test_vt_haystack_is_rulers_2024_layout(length: int, seed: int, template: bool) -> None:
    """RULER f682453 (HELMET's files): noise lines keep their newline and the items are joined
    with spaces, so each statement opens the line of the noise line after it."""
    case = build("vt", length, None, mock_context(template, seed))[0]
    prompt, _ = user_and_answer(case)
    head = "following text.\n\n"
    lines = prompt[prompt.rindex(head) + len(head):].split("\n")[:-2]  # less "" and question
    statement = re.compile(r"^ ?(VAR [A-Z]+ = \d+ |VAR [A-Z]+ = VAR [A-Z]+  )?" + re.escape(NOISE)
                           + "$")
    assert all(statement.match(line) for line in lines)
    assert not lines[0].startswith(" ") and all(line.startswith(" ") for line in lines[1:])
    assert sum("VAR" in line for line in lines) == 5


# -- item 5: HELMET's six depths -----------------------------------------------------------------


def test_default_depths_are_helmets_six(pytester: pytest.Pytester) -> None:
    assert DEFAULT_DEPTHS == "0,20,40,60,80,100"
    pytester.makepyfile(test_recall=RECALL_SUITE)
    outcome = pytester.runpytest("--model", "mock:grep", "--lceval-grid", "full", "--lengths",
                                 "1k", "--lceval-tasks", "json_kv", "--collect-only", "-q")
    outcome.stdout.fnmatch_lines([f"*test_recall[[]json_kv-1k-{d}[]]" for d in
                                  (0, 20, 40, 60, 80, 100)] + ["6 tests collected*"])


# -- item 6: RULER's vt, cwe and fwe ----------------------------------------------------------


def vt_answer(context: str, value: str) -> set[str]:
    """Variables that end up holding ``value``, by following the assignments."""
    held: dict[str, str] = {}
    for name, source in re.findall(r"VAR ([A-Z]+) = (VAR [A-Z]+|\d+)", context):
        held[name] = held.get(source[4:], "") if source.startswith("VAR ") else source
    return {name for name, got in held.items() if got == value}


def test_vt_prompt_is_pinned() -> None:
    """RULER f682453's layout (statements opening a noise line, lines joined by spaces) and its
    solved example: the template squeezed onto one line without the question's "above.", its
    "assgined", the answer after a double space (RULER's prefix ends with a space, then one
    more before the answer). Noise lines written as ~."""
    case = build("vt", 700)[0]
    assert case.prompt.replace(NOISE, "~") == (
        "Memorize and track the chain(s) of variable assignment hidden in the following text. "
        "~\n ~\n ~\n ~\n ~\n VAR XHL = 52536 ~\n ~\n ~\n ~\n ~\n ~\n ~\n VAR PQY = VAR XHL  ~\n "
        "~\n ~\n ~\n VAR VPH = VAR PQY  ~\n ~\n VAR EYB = VAR VPH  ~\n VAR SNW = VAR EYB  ~\n "
        "Question: Find all variables that are assigned the value 52536 in the text Answer: "
        "According to the chain(s) of variable assignment in the text above, 5 variables are "
        "assgined the value 52536, they are:  XHL PQY VPH EYB SNW\n\n"
        "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
        "~\n VAR LDHPG = 92328 ~\n VAR RPQGH = VAR LDHPG  ~\n VAR WKAEN = VAR RPQGH  ~\n "
        "VAR ONHTB = VAR WKAEN  ~\n VAR FIUBW = VAR ONHTB  ~\n\n"
        "Question: Find all variables that are assigned the value 92328 in the text above.\n"
        "Answer: According to the chain(s) of variable assignment in the text above, 5 variables "
        "are assigned the value 92328, they are:")
    assert case.gold == ("LDHPG", "RPQGH", "WKAEN", "ONHTB", "FIUBW")


def test_vt_prompt_of_rulers_2025_layout_is_pinned() -> None:
    """``--lceval-ruler c3f5e3b``: every line on its own, a hop's statement ending with a space,
    statements before distinct noise lines; the example with RULER's full template, renamed per
    case."""
    case = build("vt", 800, ruler="c3f5e3b")[0]
    assert case.prompt.replace(NOISE, "~") == (
        "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
        "~\n~\n~\nVAR GLN = 40327\n~\n~\n~\n~\n~\nVAR PNC = VAR GLN \n~\n~\n~\n"
        "VAR AQC = VAR PNC \n~\n~\n~\n~\nVAR JGQ = VAR AQC \n~\n~\n~\n~\n~\nVAR KXN = VAR JGQ \n"
        "~\n~\nQuestion: Find all variables that are assigned the value 40327 in the text above. "
        "Answer: According to the chain(s) of variable assignment in the text above, 5 variables "
        "are assigned the value 40327, they are:  GLN PNC AQC JGQ KXN\n\n"
        "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
        "VAR LDHPG = 92328\n~\n~\nVAR RPQGH = VAR LDHPG \n~\nVAR WKAEN = VAR RPQGH \n~\n~\n"
        "VAR ONHTB = VAR WKAEN \n~\nVAR FIUBW = VAR ONHTB \n~\n~\n~\n"
        "Question: Find all variables that are assigned the value 92328 in the text above.\n"
        "Answer: According to the chain(s) of variable assignment in the text above, 5 variables "
        "are assigned the value 92328, they are:")
    assert case.gold == ("LDHPG", "RPQGH", "WKAEN", "ONHTB", "FIUBW")


def test_cwe_prompt_is_pinned() -> None:
    """RULER f682453's example glues its answer to the answer prefix ("are:1.")."""
    case = build("cwe", 450)[0]
    example = ("1. downforce 2. seeker 3. defender 4. deranged 5. funeral 6. desktop 7. seeker "
               "8. seeker 9. funeral 10. deranged 11. yawn 12. back-up 13. cultivar 14. reign "
               "15. reign 16. trigonometry 17. backburn 18. cultivar 19. funeral 20. desktop "
               "21. trigonometry 22. grey 23. stepmother 24. recipe 25. cultivar 26. recipe "
               "27. deranged 28. defender 29. defender 30. programme 31. recipe 32. costume "
               "33. vineyard 34. reign 35. downforce 36. reduce 37. downforce 38. desktop "
               "39. trigonometry 40. spruce")
    words = ("1. reinscription 2. vanadyl 3. advertising 4. eurocentrism 5. lantern "
             "6. eurocentrism 7. advertising 8. family 9. excuse 10. calendar 11. calendar "
             "12. eurocentrism 13. advertising 14. calendar 15. decade 16. fennel 17. forager "
             "18. eurocentrism 19. spine 20. fisting 21. disengagement 22. forager 23. fee "
             "24. vanadyl 25. vanadyl 26. family 27. calendar 28. vanadyl 29. calendar "
             "30. family 31. mine 32. righteous 33. forager 34. picayune 35. fennel 36. forager "
             "37. advertising 38. eurocentrism 39. loading 40. excuse 41. reinscription "
             "42. family 43. loading 44. fennel 45. loading 46. chug 47. advertising 48. loading "
             "49. creativity 50. expression 51. photography 52. association 53. reinscription "
             "54. invincible 55. excuse 56. calendar 57. reinscription 58. forager 59. family "
             "60. family 61. vanadyl 62. reinscription 63. eurocentrism 64. forager 65. slavery "
             "66. fennel 67. excuse 68. nonstop 69. excuse 70. fennel 71. loading 72. excuse "
             "73. vanadyl 74. advertising 75. loading 76. fennel 77. reinscription")
    user, system = HELMET["cwe"]
    shot = (user.format(example="", context=example) + " " + system + "1. funeral 2. desktop "
            "3. cultivar 4. reign 5. downforce 6. defender 7. seeker 8. recipe 9. trigonometry "
            "10. deranged")
    assert case.prompt == user.format(example=shot + "\n\n", context=words) + "\n" + system
    assert case.gold == ("excuse", "eurocentrism", "forager", "calendar", "reinscription",
                         "loading", "family", "vanadyl", "advertising", "fennel")
    assert " are: 1. funeral" in build("cwe", 450, ruler="c3f5e3b")[0].prompt


def test_fwe_prompt_is_pinned() -> None:
    """RULER's Zipf counts floor(n k^-2 / zeta(2)) at a whole n (here 246) over length // 50
    coded words (f682453; c3f5e3b: (length - budget) // 50)."""
    case = build("fwe", 330)[0]
    user, system = HELMET["fwe"]
    head, tail = split_template(user)
    assert case.prompt.startswith(head) and case.prompt.endswith(tail + "\n" + system)
    text = case.prompt[len(head):-len(tail + "\n" + system)]
    assert text.startswith("capmxy ... ... zlvohj ... ... ... ... ... ... capmxy lnbyhl")
    assert text.endswith("naeqch ... capmxy ... ... ... ... ... capmxy ... ... ... naeqch")
    assert sorted(Counter(text.split()).items()) == [
        ("...", 149), ("capmxy", 37), ("lcbnjr", 9), ("lnbyhl", 4), ("naeqch", 16),
        ("zlvohj", 5)]
    assert case.gold == ("capmxy", "naeqch", "lcbnjr")
    assert case.meta["zipf_n"] == 246 and case.meta["vocabulary"] == 330 // 50
    assert build("fwe", 330, ruler="c3f5e3b")[0].meta["vocabulary"] == (330 - 50) // 50


def zipf_words(counts: list[int], size: int) -> tuple[int, int]:
    """The range of m = n / zeta(2) for which counts[k-1] == floor(m k^-2) for every rank k,
    i.e. count k^2 <= m < (count + 1) k^2: whole numbers, so compared exactly (as floats,
    bounds that meet at one n differ in their last bit). A single point when some words whose
    counts step up at that n have and others not yet."""
    ranked = enumerate(counts + [0] * (size - len(counts)), 1)
    bounds = [(count * rank**2, (count + 1) * rank**2) for rank, count in ranked]
    return max(low for low, _ in bounds), min(high for _, high in bounds)


def user_and_answer(case: Case) -> tuple[str, str]:
    """The untemplated user text and answer prefix (a base model's prompt joins them by a
    newline)."""
    if case.chat is not None:  # the prefix a base model reads (a template leaves it out)
        return case.chat.user, case.chat.cue.lstrip("\n")
    user, _, answer = case.prompt.rpartition("\n")
    return user, answer


def check_aggregation(name: str, case: Case, length: int) -> None:
    """Length window, HELMET's template, and golds recomputed from the prompt."""
    low, high = window(length)
    if name == "vt":  # whole noise lines, as RULER: within one line (< 30 tokens) of the length
        low = min(low, high - 30)
    assert low <= case.total_tokens <= high and case.stop == () and case.depth is None
    template, system = HELMET[name]
    prompt, answer = user_and_answer(case)
    if name == "vt":
        value = case.meta["value"]
        assert answer == system.format(num_v="5", query=value)
        head, tail = split_template(template.split("{example}")[1], query=value)
        context = prompt[prompt.rindex(head) + len(head):-len(tail)]
        assert prompt.endswith(tail)
        assert vt_answer(context, value) == set(case.gold) and len(case.gold) == 5
        example = prompt[:prompt.rindex(head)]
        assert example.endswith("\n\n") and example.startswith(head.rstrip("\n"))
    elif name == "cwe":
        assert answer == system
        head, tail = split_template(template.split("{example}")[1])
        context = prompt[prompt.rindex(head) + len(head):-len(tail)]
        assert prompt.endswith(tail) and prompt[:prompt.rindex(head)].startswith(head)
        items = re.findall(r"(\d+)\. (.+?)(?= \d+\. |$)", context)  # 'dump truck' is one
        assert [int(n) for n, _ in items] == list(range(1, len(items) + 1))
        counts = Counter(word for _, word in items).most_common()
        assert {word for word, _ in counts[:10]} == set(case.gold)
        common, other = (6, 1) if length < 4096 else (30, 3)
        assert {n for _, n in counts[:10]} == {common}
        assert {n for _, n in counts[10:]} == {other}
    else:
        assert answer == system
        head, tail = split_template(template)
        assert prompt.startswith(head) and prompt.endswith(tail)
        counts = Counter(prompt[len(head):-len(tail)].split()).most_common()
        assert counts[0][0] == "..." and tuple(w for w, _ in counts[1:4]) == case.gold
        assert counts[0][1] > counts[1][1] > counts[2][1] > counts[3][1] > counts[4][1]
        words = zipf_words([n for _, n in counts], case.meta["vocabulary"])
        assert words[0] <= words[1]  # the counts are RULER's at some n
    task = builtin_task(name)
    assert task.score(" " + "\n".join(case.gold).lower(), case) == 1.0


@PROPERTIES
@given(name=st.sampled_from(AGGREGATION), length=st.integers(1024, 16384),
       seed=st.integers(0, 2**31 - 1), template=st.booleans(), index=st.integers(0, 2))
def test_aggregation_cases_fit_and_their_golds_follow_from_the_prompt(
        name: str, length: int, seed: int, template: bool, index: int) -> None:
    case = build(name, length, None, mock_context(template, seed), samples=index + 1)[index]
    check_aggregation(name, case, length)



@pytest.mark.parametrize("length", [1024, 4096, 32768])
@pytest.mark.parametrize("name", AGGREGATION)
def test_aggregation_cases_fit_a_real_bpe(smollm2: object, name: str, length: int) -> None:
    renderer = Renderer(None, smollm2.renderer.count)  # type: ignore[attr-defined]
    context = BuildContext(smollm2, renderer, DataSource(None), 42)  # type: ignore[arg-type]
    for case in build(name, length, None, context, samples=2):
        check_aggregation(name, case, length)


def test_cwe_beyond_the_word_list_is_skipped_with_the_reason() -> None:
    """Two-token items on the word tokenizer: 64k tokens need more than wonderwords' words."""
    with pytest.raises(CellDoesNotFit, match=r"cwe at 65536 tokens: .* 8166 distinct words"):
        build("cwe", 65536)


@pytest.mark.parametrize(("name", "output", "score"), [
    ("vt", "LDHPG RPQGH WKAEN ONHTB FIUBW", 1.0),
    ("vt", "\nldhpg\nrpqgh\nwkaen", 0.6),
    ("vt", "VAR LDHPG, VAR RPQGH", 0.4),
    ("cwe", " 1. excuse 2. eurocentrism 3. forager 4. calendar 5. reinscription", 0.5),
    ("cwe", "\n1. Excuse\n2. Eurocentrism\n3. Forager", 0.3),
    ("fwe", " capmxy, naeqch, lcbnjr", 1.0),
    ("fwe", "\ncapmxy\nnaeqch", 2 / 3),
    ("fwe", " ...", 0.0),
])
def test_aggregation_scores_are_rulers_string_match_all(name: str, output: str,
                                                        score: float) -> None:
    length = {"vt": 700, "cwe": 450, "fwe": 330}[name]
    case = build(name, length)[0]
    assert builtin_task(name).score(answered(case, output), case) == pytest.approx(score)
