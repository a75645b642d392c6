"""--lceval-log-samples: every case of a cell, read back from its gzipped JSONL file, is the
prompt the backend received (a mock backend that logs what it is sent is the witness) and the
whole output it returned; with two xdist workers every file is whole; the summary and the HTML
report point at the files; without the option nothing is written."""

from __future__ import annotations

import gzip
import html
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from run_outputs import read_results
from toy_suite import RECALL_SUITE

from pytest_lceval.results.sample_log import cell_file, read_cell

LOGGING_BACKEND = '''
import json
import os
from urllib.parse import parse_qsl

from pytest_lceval.models.mock import MockBackend


class Logged(MockBackend):
    """mock:NAME that writes every request it receives and its answer, one file per process."""

    def _log(self, rows):
        path = os.path.join(os.environ["LOGGED_REQUESTS"], f"{os.getpid()}.jsonl")
        with open(path, "a", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\\n")

    def generate(self, requests):
        answers = super().generate(requests)
        self._log({"prompt": r.prompt, "output": a.text} for r, a in zip(requests, answers))
        return answers

    def rank(self, requests):
        answers = super().rank(requests)
        self._log({"prompt": r.prefix + r.suffix, "logprobs": list(a.logprobs)}
                  for r, a in zip(requests, answers))
        return answers


def pytest_lceval_make_backend(spec, options):
    if spec.startswith("logged:"):
        name, _, query = spec.removeprefix("logged:").partition("?")
        return Logged(name, dict(parse_qsl(query)), options)
    return None
'''
HAYSTACK_SUITE = RECALL_SUITE.replace('suite="recall"', 'suite="task_haystack"').replace(
    "test_recall", "test_haystack")
RECALL = ["--lceval-tasks", "niah_single_2,json_kv", "--lengths", "512,1k", "--depths",
          "0,100", "--samples", "3", "-p", "no:cacheprovider",
          "--lceval-context-size", "fill"]  # RULER's steps leave a 512 cell too small


def backend_log(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def logged(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makeconftest(LOGGING_BACKEND)
    folder = pytester.path / "backend-log"
    folder.mkdir()
    monkeypatch.setenv("LOGGED_REQUESTS", str(folder))
    return folder


def test_each_case_is_the_prompt_the_backend_received_and_its_whole_output(
        pytester: pytest.Pytester, logged: Path) -> None:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    report = pytester.path / "html" / "report.html"
    outcome = pytester.runpytest("--model", "logged:grep?miss=40-60", *RECALL,
                                 "--chat-template", "on", "--lceval-log-samples",
                                 "--lceval-run", "r", "-n", "2", f"--html={report}")
    outcome.assert_outcomes(passed=8)
    run = pytester.path / "reports" / "r"
    sent = backend_log(logged)
    answers: dict[str, set[str]] = defaultdict(set)
    for row in sent:
        answers[row["prompt"]].add(row["output"])
    rows = read_results(pytester, "r")
    assert len(rows) == 8
    for row in rows:  # every cell's file is whole: two workers wrote side by side
        assert row["samples_file"] == cell_file(row["nodeid"])
        cases = read_cell(run, row["samples_file"])
        assert [case["index"] for case in cases] == [0, 1, 2]
        assert [case["request_key"] for case in cases] == row["case_keys"]
        assert [case["score"] for case in cases] == row["scores"]
        for case in cases:
            assert case["nodeid"] == row["nodeid"] and case["metric"] == row["metric"]
            assert case["prompt"] in answers, "a prompt the backend never received"
            assert answers[case["prompt"]] == {case["output"]}
            assert case["prompt"].startswith("<user>\n")  # after the chat template
    # One cell read back in full: exactly the three prompts the backend got for it.
    [cell] = [row for row in rows if row["nodeid"].endswith("[niah_single_2-1k-100]")]
    cases = read_cell(run, cell["samples_file"])
    assert sum(row["prompt"] in {c["prompt"] for c in cases} for row in sent) == 3
    assert [case["gold"] for case in cases] == [s["gold"] for s in cell["samples"]]
    assert all(len(case["prompt"]) > 2000 for case in cases)  # whole, not the clipped sample
    with gzip.open(run / cell["samples_file"], "rt", encoding="utf-8") as handle:
        assert len(handle.read().splitlines()) == 3

    summary = (run / "summary.md").read_text(encoding="utf-8")
    assert f"Every case (prompt as sent, whole output, gold, score, request key) is in " \
           f"`{run / 'samples'}`: 8 gzipped JSONL files, one per cell" in summary
    page = report.read_text(encoding="utf-8")
    blob = re.search(r'data-jsonblob="([^"]*)"', page)
    assert blob is not None
    tests = json.loads(html.unescape(blob.group(1)))["tests"]
    for nodeid, [entry] in tests.items():
        [extra] = [e for e in entry["extras"] if e["format_type"] == "html"]
        [href] = re.findall(r'<a href="([^"]+)">Every case of this cell</a>', extra["content"])
        linked = (report.parent / unquote(html.unescape(href))).resolve()
        assert linked == (run / cell_file(nodeid)).resolve() and linked.is_file(), nodeid


def test_task_haystack_logs_every_resample_of_its_lifelong_cases(
        pytester: pytest.Pytester, logged: Path) -> None:
    pytester.makepyfile(test_haystack=HAYSTACK_SUITE)
    pytester.runpytest("--model", "logged:icl?reach=300", "--haystack-tasks",
                       "sum_check,number_parity", "--lceval-log-samples", "--lceval-run", "h",
                       "-p", "no:cacheprovider")
    ranked = {row["prompt"] for row in backend_log(logged)}
    [row] = [r for r in read_results(pytester, "h") if r["outcome"] != "skipped"][:1]
    cases = read_cell(pytester.path / "reports" / "h", row["samples_file"])
    resamples, test_size = row["metrics"]["resamples"], row["metrics"]["test_size"]
    assert len(cases) == resamples * test_size == row["n"]
    assert [case["request_key"] for case in cases] == row["case_keys"]
    assert [case["score"] for case in cases] == row["scores"]
    assert all(case["prompt"] in ranked for case in cases)


def test_off_by_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    pytester.runpytest("--model", "mock:grep", *RECALL, "--lceval-run", "r")
    run = pytester.path / "reports" / "r"
    assert not (run / "samples").exists()
    assert all(row["samples_file"] == "" for row in read_results(pytester, "r"))
    assert "Every case" not in (run / "summary.md").read_text(encoding="utf-8")


def test_cell_files_are_safe_names_that_never_collide() -> None:
    one = cell_file("suites/test_recall.py::test_recall[json_kv-8k-50]")
    two = cell_file("other/test_recall.py::test_recall[json_kv-8k-50]")
    assert one.startswith("samples/test_recall_json_kv-8k-50-") and one.endswith(".jsonl.gz")
    assert one != two and "/" not in one.removeprefix("samples/")
