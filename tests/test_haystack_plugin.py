"""The Task Haystack suite through pytester on the mock backends: options, grid, verdicts,
refusals, skips, xdist sharing, controlled settings, fetching and reports."""

from __future__ import annotations

import csv
import json
import shutil
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_hub import FakeHub, Served, serving
from run_outputs import read_results
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.task_haystack.config import OFFLINE_PACK
from pytest_lceval.benchmarks.task_haystack.releases import LLICL
from pytest_lceval.benchmarks.task_haystack.verdict import paired_verdict
from pytest_lceval.run.model_usage import read_usage
from pytest_lceval.store.database import Store

SUITE = (Path(__file__).parent.parent / "suites" / "test_task_haystack.py").read_text()
FAST = ["-p", "no:randomly", "-p", "no:cacheprovider"]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_task_haystack=SUITE)
    return pytester


def run_dir(pytester: pytest.Pytester, run: str) -> Path:
    return pytester.path / "reports" / run


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--haystack-resamples", "1"], "--haystack-resamples*between 2 and 5"),
        (["--haystack-setting", "recal"], "--haystack-setting*unknown setting(s) recal"),
        (["--haystack-tasks", "main16"], "--haystack-tasks*lacks task(s) covid_fake_news"),
        (["--haystack-shots", "0"], "--haystack-shots*between 1 and 64"),
        (["--haystack-ntasks", "11"], "--haystack-ntasks*between 1 and 10"),
        (["--haystack-test-size", "x"], "--haystack-test-size*"),
    ],
)
def test_bad_options_are_usage_errors(suite: pytest.Pytester, args: list[str],
                                      expected: str) -> None:
    outcome = suite.runpytest("--model", "mock:icl", *args, *FAST)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines([f"*{expected}*"])


def test_axes_ids_and_markers(suite: pytest.Pytester) -> None:
    args = ["--model", "mock:icl", "--haystack-ntasks", "4,10", "--haystack-shots", "1,2",
            "--collect-only", "-q", *FAST]
    outcome = suite.runpytest(*args)
    outcome.stdout.re_match_lines([r".*::test_task_haystack\[\w+-4t1s-p0-recall\]$",
                                   r".*::test_task_haystack\[\w+-10t2s-p0-recall\]$",
                                   "28 tests collected"])
    outcome = suite.runpytest(*args, "-m", "task_haystack and len_4t2s")
    outcome.stdout.fnmatch_lines(["4/28 tests collected*"])


def test_offline_run_records_verdicts_and_writes_reports(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:icl", "--haystack-shots", "1,4",
                              "--haystack-ntasks", "4", "--lceval-run", "r1", *FAST)
    outcome.stdout.fnmatch_lines(["*haystack: fixtures:llicl_offline*",
                                  "*self-made offline pack with reduced defaults*",
                                  "*haystack recall 4t1s: pass rate*S-acc*L-acc*"])
    outcome.assert_outcomes(passed=8)
    rows = read_results(suite, "r1")
    first = rows[0]["metrics"]
    assert set(first["l_acc_by_resample"]) == {"0", "1", "2"} and first["test_size"] == 4
    assert first["offline_pack"] is True and "test_size=4" in first["reduced_defaults"]
    assert first["seam_exact"] is True and 0 <= first["ood_rate"] <= 1
    # The length axis is a setting (4 tasks x 1 shot): the tokens are measured, not budgeted.
    assert rows[0]["length"] == 0
    assert rows[0]["input_tokens_max"] > first["single_tokens_mean"]
    folder = run_dir(suite, "r1")
    for name in ("haystack-niah-recall.png", "haystack-diagnostic-recall-4t1s.png",
                 "haystack-diagnostic-recall-4t4s.png", "haystack-summary.md"):
        assert (folder / name).stat().st_size > 500, name
    summary = json.loads((folder / "haystack-summary.json").read_text())
    assert set(summary["icl_effective"]) == {row["task"] for row in rows}
    assert [r["length_setting"] for r in summary["rows"]] == ["4t1s", "4t4s"]
    assert "icl_effective" in summary["rows"][0]
    assert "Offline self-made task pack" in (folder / "haystack-summary.md").read_text()


def test_a_forgetful_model_fails_and_exports_recompute_every_verdict(
        suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:icl?reach=200", "--haystack-test-size", "12",
                              "--haystack-resamples", "5", "--haystack-ntasks", "4",
                              "--haystack-shots", "4", "--lceval-run", "r1", *FAST)
    outcome.stdout.fnmatch_lines([
        "*FAIL: recall Lifelong ICL accuracy * at stream index * of 4 is significantly worse "
        "than Single-task ICL * (paired t-test over 5 resamples, t=-*, p=*"])
    assert outcome.parseoutcomes()["failed"] >= 1
    pairs: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    recorded = {}
    with (run_dir(suite, "r1") / "haystack-resamples.csv").open() as handle:
        for row in csv.DictReader(handle):
            pairs[row["nodeid"]]["l"][int(row["resample"])] = float(row["l_acc"])
            pairs[row["nodeid"]]["s"][int(row["resample"])] = float(row["s_acc"])
            recorded[row["nodeid"]] = row["verdict"]
    assert len(recorded) == 4
    for nodeid, pair in pairs.items():
        assert paired_verdict(pair["l"], pair["s"]).verdict == recorded[nodeid]


def _pack_with(tmp: Path, task: str, options: list[str]) -> Path:
    """A data dir whose llicl/ is the offline pack plus ``task`` (number_parity relabelled)."""
    data = tmp / "data"
    shutil.copytree(OFFLINE_PACK, data / "llicl")
    folder = data / "llicl" / task
    shutil.copytree(OFFLINE_PACK / "number_parity", folder)
    rename = dict(zip(("even", "odd"), options, strict=True))
    config = json.loads((folder / "config.json").read_text())
    config["options"] = options
    (folder / "config.json").write_text(json.dumps(config))
    for path in folder.glob("*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**row, "label": rename[row["label"]]}) + "\n"
                                for row in rows))
    return data


@pytest.mark.parametrize("selected", [[], ["-k", "number_parity"]], ids=["all", "another-task"])
def test_colliding_first_tokens_stop_the_run_naming_the_task_and_its_file(
        suite: pytest.Pytester, selected: list[str]) -> None:
    """Every task's queries share the stream, so a task whose options share a first token would
    fail the cells of every other task (-k number_parity failed for clash's options): the first
    cell checks every task before any model call and stops the run, naming the task, its
    options, the token and the config.json to fix."""
    data = _pack_with(suite.path, "clash", ["very good", "very bad"])
    outcome = suite.runpytest("--model", "mock:icl", "--lceval-data", str(data),
                              "--haystack-tasks", "clash,number_parity,chat_topic",
                              "--haystack-test-size", "3", "--haystack-permutations", "1",
                              "--haystack-resamples", "2", "--lceval-run", "r1", *selected,
                              *FAST)
    assert outcome.ret == pytest.ExitCode.INTERRUPTED
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "! Interrupted: pytest-lceval: task clash is refused: options share a first token*"
        "'very good' -> ' very', 'very bad' -> ' very'. Rename an option in "
        f"{data / 'llicl' / 'clash' / 'config.json'} so that each starts with a distinct "
        "token, or leave the task out with --haystack-tasks. !"])
    assert "Traceback" not in outcome.stdout.str()


def test_a_window_too_small_skips_with_the_numbers(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:icl?window=120", "-rs", *FAST)
    outcome.stdout.fnmatch_lines(["*the Lifelong prompt of * (10 tasks x 1 shots per class, "
                                  "resample *) is * tokens + 1 to predict > the 120-token "
                                  "window of mock:icl*"])
    outcome.assert_outcomes(skipped=10)


def test_two_workers_compute_each_shared_prefix_once(suite: pytest.Pytester) -> None:
    args = ["--model", "mock:icl", "--haystack-permutations", "2", "--haystack-ntasks", "4",
            *FAST]
    serial = suite.runpytest(*args, "--lceval-run", "serial",
                             "--lceval-store", str(suite.path / "serial.sqlite"))
    serial.assert_outcomes(passed=8)
    parallel = suite.runpytest(*args, "-n", "2", "--lceval-run", "xdist",
                               "--lceval-store", str(suite.path / "xdist.sqlite"))
    parallel.assert_outcomes(passed=8)
    one, two = read_results(suite, "serial"), read_results(suite, "xdist")
    assert [(r["nodeid"], r["metrics"]["l_acc_by_resample"], r["metrics"]["verdict"])
            for r in one] == [(r["nodeid"], r["metrics"]["l_acc_by_resample"],
                               r["metrics"]["verdict"]) for r in two]
    # Every answer reached the model exactly once, whichever worker asked first.
    store = Store(suite.path / "xdist.sqlite")
    assert read_usage(run_dir(suite, "xdist"))["model"].requests == store.count_answers()
    rerun = suite.runpytest(*args, "--lceval-run", "again",
                            "--lceval-store", str(suite.path / "xdist.sqlite"))
    rerun.assert_outcomes(passed=8)
    assert sum(r["model_requests"] for r in read_results(suite, "again")) == 0


def test_every_controlled_setting_runs(suite: pytest.Pytester) -> None:
    settings = "recall,replay,remove,paraphrase,random,repeat,repeat-shuffle"
    outcome = suite.runpytest("--model", "mock:icl", "--haystack-setting", settings,
                              "--haystack-test-size", "2", "--haystack-ntasks", "3",
                              "--lceval-run", "r1", *FAST)
    rows = read_results(suite, "r1")
    assert len(rows) == 21 and outcome.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    by_setting = {r["metrics"]["setting"]: r for r in rows}
    assert set(by_setting) == set(settings.split(","))
    assert by_setting["random"]["depth"] is None and by_setting["remove"]["depth"] is not None
    # Random prose is about as long as the recall stream.
    recall_tokens = by_setting["recall"]["input_tokens_mean"]
    assert 0.7 * recall_tokens < by_setting["random"]["input_tokens_mean"] < 1.3 * recall_tokens
    folder = run_dir(suite, "r1")
    assert (folder / "haystack-niah-replay.png").exists()
    assert not (folder / "haystack-niah-repeat.png").exists()


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A mirror of GitHub raw serving the verified copy of INK-USC/llicl-data."""
    fake = FakeHub()
    for spec in LLICL.files:
        fake.plain_file(spec.source, Served((SHARED_DATA / spec.target).read_bytes()))
    with serving(fake):
        monkeypatch.setenv("LCEVAL_FETCH_MIRROR", fake.mirror)
        yield fake


@pytest.mark.skipif(not (SHARED_DATA / "llicl").is_dir(),
                    reason=f"the verified copy of llicl-data is not at {SHARED_DATA}")
def test_fetch_option_downloads_into_the_cache_and_runs_on_it(suite: pytest.Pytester,
                                                              mirror: FakeHub) -> None:
    cache = suite.path / "cache"
    outcome = suite.runpytest("--model", "mock:icl", "--haystack-fetch", "--lceval-fetch-dir",
                              str(cache), "--haystack-tasks", "emo,boolq,wic",
                              "--haystack-test-size", "2", "--haystack-permutations", "1",
                              "--haystack-resamples", "2", *FAST)
    outcome.stderr.fnmatch_lines(["fetch:   llicl: 560 of 560 files (*) from "
                                  "raw.githubusercontent.com", "fetch: * to download"])
    outcome.stdout.fnmatch_lines(["*haystack: cache:llicl (3 tasks from *cache/llicl)*"])
    counts = outcome.parseoutcomes()  # a verdict, either way: this test is about the data
    assert counts.get("passed", 0) + counts.get("failed", 0) == 3 and "errors" not in counts


def test_shared_work_held_elsewhere_can_be_put_off(tmp_path: Path) -> None:
    """compute_once(timeout=0) raises instead of waiting while another holder computes, which
    lets a test work on other resamples first; once done, the value is returned at once."""
    import filelock

    store = Store(tmp_path / "store.sqlite")
    started, release = threading.Event(), threading.Event()

    def slow() -> int:
        started.set()
        release.wait(10)
        return 7

    holder = threading.Thread(target=lambda: Store(tmp_path / "store.sqlite").compute_once(
        "group", slow))
    holder.start()
    started.wait(10)
    with pytest.raises(filelock.Timeout):
        store.compute_once("group", lambda: 0, timeout=0)
    release.set()
    holder.join(10)
    assert store.compute_once("group", lambda: 0, timeout=0) == 7
