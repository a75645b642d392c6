"""The bad-input sweep's fourth round (issue #50): inputs caught only after every cell ran, or
never (a report path below a file, a run folder shared by two runs, a data folder without the
essays, overrides and spec values that cannot be meant, Ctrl-C during the data fetch, the
conformance tally, the public API's cells). Each test gives the input and checks the one line it
now gets at start-up, the exit status, and that what earlier runs stored stays as it was.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_hub import FakeHub, Served, serving
from shared_data import SHARED_DATA
from test_bad_inputs import store_rows
from test_bad_inputs_third import finished, one_line
from toy_suite import RECALL_SUITE, SUITE, TOY_TASK

from pytest_lceval import api
from pytest_lceval.benchmarks.ruler.releases import ESSAYS

TESTS = Path(__file__).resolve().parent
GRID = ["--model", "mock:grep", "--lengths", "256", "--depths", "50", "--samples", "2",
        "-p", "no:randomly"]
STORE = ["--lceval-store", "s.sqlite"]


@pytest.fixture
def toy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def run_folders(pytester: pytest.Pytester) -> list[str]:
    return sorted(path.name for path in (pytester.path / "reports").iterdir()
                  if path.name not in ("latest", "baselines"))


# -- item 13: a report path below a file --------------------------------------------------------


@pytest.mark.parametrize(("option", "path"), [
    pytest.param("--junitxml", "notes.txt/junit.xml",
                 marks=pytest.mark.bad_input("junitxml-below-a-file")),
    pytest.param("--lceval-save", "notes.txt/base.json",
                 marks=pytest.mark.bad_input("save-below-a-file")),
    pytest.param("--lceval-fetch-dir", "notes.txt/data",
                 marks=pytest.mark.bad_input("fetch-dir-below-a-file")),
])
def test_a_report_path_below_a_file_is_refused_at_start(toy: pytest.Pytester, option: str,
                                                        path: str) -> None:
    """--junitxml below a file ran every cell, then ended on a 40-line FileExistsError from
    pytest's junitxml, the verdict unsaid; it is refused before the first cell, as --html is."""
    toy.runpytest(*GRID, *STORE, "--lceval-run", "first").assert_outcomes(passed=1)
    (toy.path / "notes.txt").write_text("my notes\n")
    rows = store_rows(toy.path / "s.sqlite")
    fetch = ["--lceval-fetch", "recall"] if option == "--lceval-fetch-dir" else []

    outcome = toy.runpytest(*GRID, *STORE, f"{option}={path}", *fetch)

    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    one_line(outcome, f"{option}: ", " cannot be written: ", "notes.txt is a file, not a folder",
             f"point {option} at a")
    assert (toy.path / "notes.txt").read_text() == "my notes\n"
    assert run_folders(toy) == ["first"]  # no cell ran
    assert store_rows(toy.path / "s.sqlite") == rows


# -- item 4: a run folder holds one run ---------------------------------------------------------

SECOND_RUN_DURING_THE_CELL = '''
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """While this run's cell is measured, a second run of another model names its folder."""
    if "SECOND_RUN" not in os.environ:
        second = subprocess.run(
            [sys.executable, "-m", "pytest", "--model", "mock:grep?miss=40-60", "--lengths",
             "256", "--depths", "50", "--samples", "2", "-p", "no:randomly", "--lceval-store",
             "s.sqlite", "--lceval-run", "shared"],
            env={**os.environ, "SECOND_RUN": "1"}, capture_output=True, text=True, timeout=300)
        Path("second.txt").write_text(f"{second.returncode}\\n{second.stdout}{second.stderr}")
    return (yield)
'''


@pytest.mark.bad_input("run-folder-named-again")
def test_a_run_folder_that_holds_a_finished_run_is_refused(toy: pytest.Pytester) -> None:
    """The second run's summary counted the first's cells as its own, without a word."""
    toy.runpytest(*GRID, *STORE, "--lceval-run", "r").assert_outcomes(passed=1)
    run_dir = toy.path / "reports" / "r"
    before, rows = finished(run_dir), store_rows(toy.path / "s.sqlite")

    outcome = toy.runpytest("--model", "mock:grep?miss=40-60", *GRID[2:], *STORE,
                            "--lceval-run", "r", "--lengths", "512")

    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    one_line(outcome, f"--lceval-run r: {run_dir} holds the run of mock:grep started ",
             "a run folder holds one run: name another with --lceval-run")
    assert finished(run_dir) == before
    assert store_rows(toy.path / "s.sqlite") == rows
    again = toy.runpytest(*GRID, *STORE, "--lceval-run", "r2")  # another name runs
    again.assert_outcomes(passed=1)


@pytest.mark.bad_input("run-folder-shared-at-once")
def test_a_run_folder_being_written_is_refused_to_a_second_run(toy: pytest.Pytester) -> None:
    """Two runs of two models at once in one folder: one results.jsonl held both models' rows
    and one summary named both. The second starts while the first's cell is measured."""
    toy.makeconftest(TOY_TASK + SECOND_RUN_DURING_THE_CELL)

    first = toy.runpytest(*GRID, *STORE, "--lceval-run", "shared")

    first.assert_outcomes(passed=1)
    code, said = (toy.path / "second.txt").read_text().split("\n", 1)
    assert int(code) == pytest.ExitCode.USAGE_ERROR, said
    assert re.search(r"ERROR: pytest-lceval: --lceval-run shared: \S+ holds the run of mock:grep "
                     r"started \S+ \S+ \(process \d+\); a run folder holds one run", said), said
    assert "Traceback" not in said
    rows = [json.loads(line) for line in
            (toy.path / "reports" / "shared" / "results.jsonl").read_text().splitlines()]
    assert [row["model"] for row in rows] == ["mock:grep"]


# -- item 5: the fixture essays stand in for a data folder's ------------------------------------


@pytest.mark.bad_input("data-folder-without-essays")
def test_a_suite_on_the_fixture_essays_says_which_folder_lacks_them(
        pytester: pytest.Pytester) -> None:
    """--lceval-data one level too deep: recall ran its essay haystacks on the self-made
    essays, exit 0, no word."""
    pytester.makepyfile(test_recall=RECALL_SUITE)
    data = pytester.path / "data"
    (data / "trec").mkdir(parents=True)  # the folder of another suite: the directory is taken
    recall = ["--model", "mock:grep", "--lengths", "1k", "--depths", "50", "--samples", "1",
              "-p", "no:randomly", "--lceval-data", str(data)]

    outcome = pytester.runpytest(*recall, "--lceval-tasks", "niah_single_2")

    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines([
        f"lceval: recall runs on offline fixtures: {data} (--lceval-data) has no pg_essays/ "
        f"(its haystacks are the self-made essays); give --lceval-data the folder that holds "
        f"pg_essays/"])
    noise = pytester.runpytest(*recall, "--lceval-tasks", "niah_single_1")  # no essays read
    noise.assert_outcomes(passed=1)
    assert "runs on offline fixtures" not in noise.stdout.str()
    (data / "pg_essays").mkdir()
    (data / "pg_essays" / "a.txt").write_text("An essay of its own. " * 400)
    own = pytester.runpytest(*recall, "--lceval-tasks", "niah_single_2")
    own.assert_outcomes(passed=1)
    assert "runs on offline fixtures" not in own.stdout.str()


# -- item 6: overrides and spec values that cannot be meant -------------------------------------


@pytest.fixture
def fake_llama(pytester: pytest.Pytester) -> Path:
    """A model folder whose config is a small Llama's (8,192 positions, no RoPE scaling); its
    weights are not real, so the start-up checks are all that can pass."""
    transformers = pytest.importorskip("transformers")
    folder = pytester.path / "llama"
    transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=8192).save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"not really weights")
    (folder / "tokenizer_config.json").write_text("{}")
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return folder


@pytest.mark.parametrize(("override", "said"), [
    pytest.param("rope_theta=-5", "rope_theta=-5.0 is not positive: give a value above 0 (the "
                 "model's own is 10000.0)", marks=pytest.mark.bad_input("rope-theta-negative")),
    pytest.param("num_hidden_layers=0", "LlamaConfig.num_hidden_layers is 2 as the weights have "
                 "it, not 0", marks=pytest.mark.bad_input("no-layers")),
])
def test_an_override_that_cannot_be_meant_is_refused(pytester: pytest.Pytester,
                                                     fake_llama: Path, override: str,
                                                     said: str) -> None:
    """rope_theta=-5 ran 43 s and answered nothing; num_hidden_layers=0 loaded no layer."""
    outcome = pytester.runpytest(f"--model=hf:{fake_llama}", "--chat-template", "off", *GRID[2:],
                                 "--lceval-model-args", override)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    one_line(outcome, f"--model=hf:{fake_llama}: --lceval-model-args: {said}")


@pytest.mark.bad_input("window-above-positions")
def test_a_window_above_the_positions_without_scaling_is_warned_of(pytester: pytest.Pytester,
                                                                   fake_llama: Path) -> None:
    """A choice one may mean (to see a model fail past its positions): a warning, not an
    error; with RoPE scaling, nothing to warn of."""
    model = [f"--model=hf:{fake_llama}", "--chat-template", "off", *GRID[2:], "-x"]
    warning = (f"lceval: warning: --lceval-window 32768 is above the 8,192 positions of "
               f"hf:{fake_llama}, whose RoPE is not scaled: cells past 8,192 tokens measure "
               f"positions it was not trained on; scale it (e.g. --lceval-model-args "
               """'rope_scaling={"rope_type":"yarn","factor":4.0}') or lower --lceval-window""")

    outcome = pytester.runpytest(*model, "--lceval-window", "32768")

    assert outcome.ret != pytest.ExitCode.USAGE_ERROR  # the cell fails on the weights
    assert warning in outcome.stdout.lines
    scaled = pytester.runpytest(*model, "--lceval-window", "32768", "--lceval-model-args",
                                'rope_scaling={"rope_type":"yarn","factor":4.0}')
    assert scaled.ret != pytest.ExitCode.USAGE_ERROR
    assert "lceval: warning: --lceval-window" not in scaled.stdout.str()


@pytest.mark.parametrize("miss", [
    pytest.param("abc", marks=pytest.mark.bad_input("mock-miss-word")),
    pytest.param("50", marks=pytest.mark.bad_input("mock-miss-one-number")),
    pytest.param("60-40", marks=pytest.mark.bad_input("mock-miss-reversed")),
])
def test_a_mock_miss_that_is_no_range_is_refused(toy: pytest.Pytester, miss: str) -> None:
    """Each was ignored: the mock forgot nothing, and a test of a lost-in-the-middle model
    passed."""
    outcome = toy.runpytest("--model", f"mock:grep?miss={miss}", *GRID[2:])
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    one_line(outcome, f"--model=mock:grep?miss={miss}: miss={miss!r} is not a range of the "
             f"prompt in percent: write miss=LOW-HIGH with 0 <= LOW <= HIGH <= 100, e.g. "
             f"miss=25-75")


# -- item 7: Ctrl-C during the data fetch -------------------------------------------------------

needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(),
                                  reason=f"the verified copies are not at {SHARED_DATA}")


@pytest.fixture
def slow_essays(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """A mirror serving the essays, the largest one slowly (a Ctrl-C lands in it), and a
    user's environment reading from it; yields the environment and the slow essay's .part."""
    hub = FakeHub()
    for spec in ESSAYS.files:
        hub.plain_file(spec.source, Served((SHARED_DATA / spec.target).read_bytes()))
    slow = max(ESSAYS.files, key=lambda spec: spec.size)
    hub.files["/mirror/" + slow.source.split("://")[1]].slow = 0.2
    with serving(hub):
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "hf"),
               "HF_HUB_DISABLE_TELEMETRY": "1", "LCEVAL_FETCH_MIRROR": hub.mirror,
               "LCEVAL_CACHE": str(tmp_path / "lceval")}
        yield env, tmp_path / "dest" / (slow.target + ".part")


def interrupted(command: list[str], env: dict[str, str], part: Path,
                cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` run until the slow essay's download has begun, then Ctrl-C (SIGINT)."""
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (part.is_file() and part.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert part.is_file(), process.kill() or process.communicate()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def kept(part: Path) -> str:
    return (f"pg_essays unfinished (the {part.stat().st_size:,} bytes that arrived are kept in "
            f"{part} and continued by the next fetch); the files already in place are kept")


@needs_shared
@pytest.mark.bad_input("ctrl-c-during-the-fetch")
def test_ctrl_c_during_the_fetch_says_what_was_kept_in_one_line(
        slow_essays: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """A 25-line traceback from download.py; the .part was kept and the rerun resumed."""
    env, part = slow_essays
    done = interrupted([sys.executable, "-m", "pytest_lceval.fetch", "recall", "--dest",
                        str(part.parents[1])], env, part, tmp_path)

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (f"fetch: interrupted: {kept(part)}; run the same "
                                            f"command again to resume")
    assert part.stat().st_size > 0


@needs_shared
@pytest.mark.bad_input("ctrl-c-during-lceval-fetch")
def test_ctrl_c_during_lceval_fetch_is_said_in_one_line(
        slow_essays: tuple[dict[str, str], Path], pytester: pytest.Pytester) -> None:
    """The run ended after "fetch: 1.1 MB to download" without a word of the interruption."""
    pytester.makepyfile(test_recall=RECALL_SUITE)
    env, part = slow_essays
    done = interrupted([sys.executable, "-m", "pytest", "-p", "no:randomly", "--model",
                        "mock:grep", "--lceval-fetch", "recall", "--lceval-fetch-dir",
                        str(part.parents[1])], env, part, pytester.path)

    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stderr
    text = done.stdout + done.stderr
    assert "Traceback" not in text
    said = [line for line in text.splitlines() if "interrupted" in line]
    assert said == [f"pytest-lceval: --lceval-fetch interrupted: {kept(part)}; run again to "
                    f"resume"], text


# -- item 8: the conformance tally counts what failing tests compared ---------------------------

MUTATION = '''
from pytest_lceval.benchmarks.helmet import judge_prompts

read = judge_prompts.read_helmet_prompts
judge_prompts.read_helmet_prompts = lambda checkout: {
    name: text.replace(" ", "  ", 1) for name, text in read(checkout).items()}
'''
"""A word of HELMET's judge prompts set apart by one more space, as --lceval-helmet-judge-prompts
reads them: every prompt of the test below differs from the reference's."""
JUDGE_PROMPTS = "conformance/test_helmet_judge.py::test_qa_judge_prompt_is_helmets[True]"


@pytest.mark.bad_input("conformance-tally-with-failing-tests")
def test_the_conformance_tally_counts_the_prompts_of_failing_tests(
        pytester: pytest.Pytester) -> None:
    """With twelve tests failing on a template word, the tally read "RULER prompts compared 12 /
    identical 12": the failing tests' prompts were not counted."""
    pytester.makepyfile(mutate=MUTATION)
    outcome = pytester.runpytest_subprocess(str(TESTS / JUDGE_PROMPTS), "-p", "mutate",
                                            "-p", "no:randomly", "-p", "no:cacheprovider")
    if outcome.parseoutcomes().get("skipped"):
        pytest.skip("the conformance layer does not run here (no reference configured)")
    outcome.assert_outcomes(failed=1)
    [tally] = [line for line in outcome.outlines if line.startswith("HELMET judge ")]
    found = re.match(r"HELMET judge +prompts compared (\d+) / identical (\d+)", tally)
    assert found, tally
    assert int(found[1]) > 0 and int(found[2]) == 0, tally


# -- item 9: the public API ---------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "said"), [
    pytest.param({"length": -5}, "Cell length -5 is not a token count: give a whole number of "
                 "tokens >= 0", marks=pytest.mark.bad_input("api-cell-negative-length")),
    pytest.param({"length": 1.5}, "Cell length 1.5 is not a token count",
                 marks=pytest.mark.bad_input("api-cell-fractional-length")),
    pytest.param({"depth": 150.0}, "Cell depth 150.0 is not a percent of the context: give "
                 "0..100", marks=pytest.mark.bad_input("api-cell-depth-150")),
    pytest.param({"samples": 0}, "Cell samples 0 is not a case count: give a whole number >= 1",
                 marks=pytest.mark.bad_input("api-cell-no-samples")),
    pytest.param({"task": ""}, "Cell task '' is not a name",
                 marks=pytest.mark.bad_input("api-cell-no-task")),
])
def test_a_cell_with_a_value_it_cannot_have_is_refused_where_it_is_made(
        fields: dict[str, typing.Any], said: str) -> None:
    """A length of -5 was taken; the task's own CellDoesNotFit came cells later."""
    given: dict[str, typing.Any] = {"suite": "mine", "task": "t", "length": 1024,
                                    "depth": 50.0, "samples": 2, **fields}
    with pytest.raises(ValueError) as refused:
        api.Cell(**given)
    assert str(refused.value).startswith(said) and "\n" not in str(refused.value)
    api.Cell("mine", "t", 0, None, 1)  # a length setting, a task without a key position


@pytest.mark.bad_input("api-build-context-without-data-source")
def test_the_api_exports_every_type_its_classes_take() -> None:
    """BuildContext needs a DataSource that api did not export; a criterion's ``needs``
    returns a Need, and a suite's ``measure`` raises CellRefused (its docstring says so)."""
    hints = {"BuildContext.data": typing.get_type_hints(api.BuildContext)["data"],
             "Criterion.needs": typing.get_args(
                 typing.get_type_hints(api.Criterion.needs)["return"])[0]}
    assert {where: kind.__name__ for where, kind in hints.items()
            if getattr(api, kind.__name__, None) is not kind} == {}
    assert issubclass(api.CellRefused, Exception) and "CellRefused" in api.__all__
    context = api.BuildContext(None, None, api.DataSource(None), 7)  # type: ignore[arg-type]
    assert context.data.essays()[1] == "fixtures"
