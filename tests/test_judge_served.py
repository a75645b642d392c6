"""The judge end to end over the OpenAI protocol: a real `transformers serve` SmolLM2 judging a
toy judged suite (the protocol, not the quality: a 135M judge's verdicts may be anything), a
scripted server whose replies are refusals, garbage and half-readable JSON (one retry with the
reason, then counted and scored as each rubric says), and judge options that fail at start-up.

The toy suite is test_judge.py's (suite "judged"; mock:grep answers its questions), with a
100-LongBench-rubric twin for the rubrics that score an unreadable reply 0.
"""

from __future__ import annotations

import html
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeServer, Reply, Seen, completion, default_answer, filtered
from run_outputs import read_results
from served import Served
from toy_suite import JUDGED_SUITE, JUDGED_TASK

from pytest_lceval.models.presets import preset_directory
from pytest_lceval.models.registry import MissingDependencyError

FAST = ["-p", "no:randomly", "-p", "no:cacheprovider"]
LONGBENCH_TWIN = '''

@dataclass(frozen=True)
class ToyJudgedLongBench(ToyJudged):
    name: str = "toyjudged_longbench"
    rubric = RUBRICS["longbench_qa"]


TASKS = [*TASKS, ToyJudgedLongBench()]
'''
GRID = ["--model", "mock:grep", "--lengths", "256", "--samples", "4",
        "--lceval-threshold", "0", "--lceval-store", "store.sqlite", *FAST]


@pytest.fixture
def judged(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(JUDGED_TASK + LONGBENCH_TWIN)
    pytester.makepyfile(test_judged=JUDGED_SUITE)
    return pytester


@pytest.fixture(scope="module")
def smollm2() -> Path:
    """The preset's folder: served by the real judge, the scripted judge's tokenizer."""
    try:
        return preset_directory("smollm2")
    except MissingDependencyError as exc:
        pytest.skip(str(exc))


def junit_properties(path: Path) -> list[dict[str, str]]:
    """Each test case's recorded properties, as a CI reads them from the JUnit XML."""
    return [{p.get("name", ""): p.get("value", "") for p in case.iter("property")}
            for case in ET.parse(path).getroot().iter("testcase")]


# -- a real judge -------------------------------------------------------------------------------


@pytest.mark.real_model
def test_a_served_smollm2_judges_a_suite_and_the_rerun_asks_it_nothing(
        judged: pytest.Pytester, smollm2: Path, tmp_path: Path) -> None:
    served = Served(smollm2, tmp_path)
    served.start()
    try:
        judge = ["--lceval-judge", f"openai:{smollm2}", "--lceval-judge-base-url", served.url,
                 "--lceval-judge-max-tokens", "64", "--lceval-tasks", "toyjudged", *GRID,
                 "--samples", "2"]
        first = judged.runpytest(*judge, "--lceval-run", "one", "--junitxml", "one.xml",
                                 "-o", "junit_family=xunit1")
        first.stdout.fnmatch_lines([f"lceval: judge --lceval-judge=openai:{smollm2} at "
                                    f"{served.url} (max 64 tokens a reply*"])
        (row,) = read_results(judged, "one")
        metrics = row["metrics"]
        assert row["judge"] == metrics["judge"] and row["judge"].startswith(f"openai:{smollm2}@")
        assert metrics["judge_requests"] == 2 + metrics["judge_retried"] == served.answered()
        assert 0 <= metrics["judge_unparsed"] <= metrics["judge_retried"] <= 2
        assert row["n"] == 2 - metrics["judge_unparsed"]  # helmet_qa: unreadable cases left out
        # A weak judge may leave every reply unreadable: the cell then fails with the count.
        first.assert_outcomes(**{"passed" if row["n"] else "failed": 1})
        (properties,) = junit_properties(judged.path / "one.xml")
        assert {name: properties[name] for name in ("judge", "judge_unparsed",
                                                    "judge_requests")} == {
            "judge": row["judge"], "judge_unparsed": str(metrics["judge_unparsed"]),
            "judge_requests": str(metrics["judge_requests"])}

        asked = served.answered()
        again = judged.runpytest(*judge, "--lceval-run", "two")
        again.assert_outcomes(**first.parseoutcomes())
        (rerun,) = read_results(judged, "two")
        assert rerun["metrics"]["judge_requests"] == 0 and served.answered() == asked
        assert [rerun[k] for k in ("score", "n", "judge")] == [row[k] for k in ("score", "n",
                                                                                 "judge")]
    finally:
        served.kill()


# -- a scripted judge ---------------------------------------------------------------------------

QUESTION = re.compile(r"Question: What is the special magic number for ([\w-]+)\?")
RETRY = "Your earlier reply was:"
FIRST: dict[str, Reply] = {
    "the-island": filtered(),
    "the-city": completion('Fluent.\n{"fluency": 1}'),
    "the-capital": completion('{"fluency": 1, "correctness": 7}'),
    "the-town": completion('{"fluency": 1, "correctness": 2}\nI hope this grading helps!'),
}
"""Each case's first reply: a refusal, a field missing, a value out of range, JSON then
prose (readable: the last object holding every field is read)."""
SECOND: dict[str, Reply] = {
    "the-island": completion("Sorry, I cannot grade this text."),
    "the-city": completion('{"fluency": 1, "correctness": 3}'),
    "the-capital": completion("The answer is correct, I think."),
}
"""The replies to the retries: garbage, a valid reply, garbage."""
PROBLEMS = {"the-island": "the reply has no JSON object",
            "the-city": 'the JSON object has no field "correctness"',
            "the-capital": '"correctness" is 7, outside 0..3'}


def scripted(request: Seen) -> Reply:
    if not request.path.endswith("/completions"):
        return default_answer(request)
    prompt = request.body["prompt"]
    (key,) = set(QUESTION.findall(prompt))
    return SECOND[key] if RETRY in prompt else FIRST[key]


@pytest.fixture
def scripted_judge() -> Iterator[FakeServer]:
    with FakeServer(scripted).running() as server:
        yield server


def judged_table(summary: str) -> dict[str, dict[str, str]]:
    """The rows of summary.md's judged-tasks table by task, each by column name."""
    table = summary.split("**Judged tasks**")[1].split("\n\n")[1]  # after the title line
    header, *rows = [[cell.strip() for cell in line.strip("|").split("|")]
                     for line in table.splitlines()]
    return {row[0]: dict(zip(header, row, strict=True)) for row in rows if set(row[0]) != {"-"}}


def asked(server: FakeServer) -> dict[str, list[str]]:
    """The prompts the server was asked, by the case they judge."""
    prompts: dict[str, list[str]] = {}
    for seen in server.requests("/completions"):
        (key,) = set(QUESTION.findall(seen.body["prompt"]))
        prompts.setdefault(key, []).append(seen.body["prompt"])
    return prompts


def test_unreadable_replies_are_retried_once_with_the_reason_then_counted_per_rubric(
        judged: pytest.Pytester, scripted_judge: FakeServer, smollm2: Path) -> None:
    judge = ["--lceval-judge", f"openai:{smollm2}", "--lceval-judge-base-url",
             scripted_judge.url, "--lceval-judge-concurrency", "2"]
    outcome = judged.runpytest(*judge, *GRID, "--lceval-run", "scripted", "--junitxml",
                               "scripted.xml", "-o", "junit_family=xunit1", "--html",
                               "report.html")
    outcome.assert_outcomes(passed=2)

    prompts = asked(scripted_judge)
    assert {key: len(found) for key, found in prompts.items()} == {  # per rubric: x2
        "the-island": 4, "the-city": 4, "the-capital": 4, "the-town": 2}
    for key, problem in PROBLEMS.items():
        retries = [prompt for prompt in prompts[key] if RETRY in prompt]
        assert len(retries) == 2 and all(f"It could not be used: {problem}." in prompt
                                         for prompt in retries), retries
    assert not any(RETRY in prompt for prompt in prompts["the-town"])

    rows = {row["task"]: row for row in read_results(judged, "scripted")}
    for row in rows.values():
        assert {name: row["metrics"][name] for name in (
            "judge_unparsed", "judge_retried", "judge_requests")} == {
            "judge_unparsed": 2, "judge_retried": 3, "judge_requests": 7}
    helmet, longbench = rows["toyjudged"], rows["toyjudged_longbench"]
    # HELMET leaves the two unreadable cases out: the mean of the city (1 x 3/3) and the town
    # (1 x 2/3). 100-LongBench scores them 0: the city 1 x 3/6, the town 1 x 2/6, 0, 0.
    assert helmet["n"] == 2 and helmet["score"] == pytest.approx((1 + 2 / 3) / 2)
    assert longbench["n"] == 4 and longbench["score"] == pytest.approx((3 / 6 + 2 / 6) / 4)
    assert sorted(longbench["scores"]) == pytest.approx([0, 0, 2 / 6, 3 / 6])

    properties = {p["task"]: p for p in junit_properties(judged.path / "scripted.xml")}
    assert {task: p["judge_unparsed"] for task, p in properties.items()} == {
        "toyjudged": "2", "toyjudged_longbench": "2"}
    page = html.unescape((judged.path / "report.html").read_text())
    assert page.count("<td>judge_unparsed</td><td>2</td>") == 2  # each cell's table
    table = judged_table((judged.path / "reports" / "scripted" / "summary.md").read_text())
    assert {task: (row["scored"], row["unparsed"], row["retried"])
            for task, row in table.items()} == {
        "judged · toyjudged": ("2", "2", "3"), "judged · toyjudged_longbench": ("4", "2", "3")}

    # The rerun reads every verdict, the unreadable ones too, from the store: nothing is asked.
    before = len(scripted_judge.requests("/completions"))
    judged.runpytest(*judge, *GRID, "--lceval-run", "again").assert_outcomes(passed=2)
    assert len(scripted_judge.requests("/completions")) == before
    again = {row["task"]: row for row in read_results(judged, "again")}
    assert {task: (row["metrics"]["judge_requests"], row["metrics"]["judge_unparsed"],
                   row["score"]) for task, row in again.items()} == {
        task: (0, 2, row["score"]) for task, row in rows.items()}


# -- bad options --------------------------------------------------------------------------------


def closed_port() -> int:
    """A loopback port that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("options, line", [
    (["--lceval-judge", "hf:/no/such/judge"],
     "ERROR: pytest-lceval: --lceval-judge=hf:/no/such/judge: no model folder /no/such/judge: "
     "check the path*"),
    (["--lceval-judge", "openai:judge", "--lceval-judge-base-url",
      f"http://127.0.0.1:{closed_port()}/v1"],
     "ERROR: pytest-lceval: --lceval-judge=openai:judge: cannot reach the server at "
     "http://127.0.0.1:*/v1*"),
    (["--lceval-judge", "mock:judge", "--lceval-judge-max-tokens", "lots"],
     "ERROR: pytest-lceval: bad value 'lots' for --lceval-judge-max-tokens*Give a whole number "
     "of tokens such as 1024."),
    (["--lceval-judge", "mock:judge", "-o", "lceval_judge_max_tokens=-5"],
     "ERROR: pytest-lceval: bad value '-5' for --lceval-judge-max-tokens (from ini key "
     "lceval_judge_max_tokens): must be at least 1*"),
])
def test_a_judge_that_cannot_work_fails_at_start_up_in_one_line(
        judged: pytest.Pytester, options: list[str], line: str) -> None:
    outcome = judged.runpytest(*options, *GRID)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    assert len([text for text in outcome.stderr.lines if text.strip()]) == 1
    outcome.stderr.fnmatch_lines([line])
