"""Cross-cell batching: cells measured together (lookahead), requests claimed in the store.

Results must equal those of measuring each cell alone; each request must reach the model once,
across xdist workers too; a killed worker's claims must not hold the others up."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from toy_suite import JUDGED_SUITE, JUDGED_TASK, RECALL_SUITE

from pytest_lceval.foundation.grid import Cell
from pytest_lceval.foundation.measurement import Measurement
from pytest_lceval.models.mock import load_mock
from pytest_lceval.models.options import LoadOptions
from pytest_lceval.models.registry import ModelSpec
from pytest_lceval.models.stored import StoredModel
from pytest_lceval.results.cells import CellResult
from pytest_lceval.results.records import GenerateRequest
from pytest_lceval.results.score_metric import ScoreMetric
from pytest_lceval.run.lookahead import Gather, Lookahead
from pytest_lceval.run.model_usage import read_usage
from pytest_lceval.run.suite import Suite
from pytest_lceval.settings import auto_batch_size, auto_lookahead
from pytest_lceval.store.database import Store, process_owner

pytest_plugins = ["pytester"]


def _request(key: int) -> GenerateRequest:
    filler = "filler " * 20
    return GenerateRequest(f"{filler}for k{key} is: {key}. {filler}\nWhat is k{key}?", 4)


class CountingBackend:
    """A mock backend that records the size of every call it gets."""

    def __init__(self) -> None:
        self.mock = load_mock("grep", LoadOptions())
        self.sizes: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.mock, name)

    def generate(self, requests: list[GenerateRequest]) -> list[object]:
        self.sizes.append(len(requests))
        return self.mock.generate(requests)


def _model(tmp_path: Path, batch_size: int = 64) -> tuple[StoredModel, CountingBackend]:
    backend = CountingBackend()
    return StoredModel(backend, Store(tmp_path / "s.sqlite"), batch_size), backend  # type: ignore[arg-type]


# -- the gather: asks of many measurements in one backend call ----------------------------

def test_gathered_asks_reach_the_backend_as_one_call_in_order(tmp_path: Path) -> None:
    model, backend = _model(tmp_path)
    got: dict[int, list[str]] = {}
    asked_here: dict[int, int] = {}

    def measuring(cell: int) -> object:
        def measure() -> None:
            first = model.generate([_request(cell * 10 + i) for i in range(3)])
            second = model.generate([_request(cell * 10 + 5)])  # a second round of asks
            got[cell] = [g.text for g in first + second]
            asked_here[cell] = model.calls.here
        return measure

    errors = Gather("test").run([measuring(cell) for cell in range(4)])
    assert errors == [None] * 4
    assert backend.sizes == [12, 4]  # each round of the four cells in one call
    alone, _ = _model(tmp_path / "alone")
    for cell in range(4):
        expected = alone.generate([_request(cell * 10 + i) for i in (0, 1, 2, 5)])
        assert got[cell] == [g.text for g in expected]
        assert asked_here[cell] == 4  # each cell is credited its own requests


def test_a_request_two_cells_ask_is_answered_and_credited_once(tmp_path: Path) -> None:
    model, backend = _model(tmp_path)
    credited: list[int] = []

    def measure() -> None:
        model.generate([_request(1), _request(2)])
        credited.append(model.calls.here)

    assert Gather("test").run([measure, measure]) == [None, None]
    assert backend.sizes == [2] and sorted(credited) == [0, 2]


def test_a_failing_backend_call_fails_each_asking_measurement(tmp_path: Path) -> None:
    model, backend = _model(tmp_path)

    def broken(requests: list[GenerateRequest]) -> list[object]:
        raise RuntimeError("engine died")

    backend.generate = broken  # type: ignore[method-assign]
    errors = Gather("test").run([lambda: None, lambda: model.generate([_request(1)])])
    assert errors[0] is None and isinstance(errors[1], RuntimeError)


# -- claims: one answer per request across processes ---------------------------------------

def test_claims_split_misses_between_owners_and_answers_release_them(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    mine, theirs = store.claim("fp", ["a", "b"], "elsewhere:1")
    assert (mine, theirs) == (["a", "b"], [])
    mine, theirs = store.claim("fp", ["a", "b", "c"], process_owner())
    assert (mine, theirs) == (["c"], ["a", "b"])
    store.put_answers("fp", [("a", {"text": "x"})])
    assert store.claim("fp", ["a", "b"], process_owner()) == ([], ["b"])
    store.release_claims("fp", ["b"], "elsewhere:1")
    assert store.claim("fp", ["b"], process_owner()) == (["b"], [])


def test_an_expired_claim_of_another_host_is_taken_over(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.claim("fp", ["a"], "elsewhere:1", seconds=-1.0)
    assert store.claim("fp", ["a"], process_owner()) == (["a"], [])


def test_a_worker_waits_for_another_workers_claimed_answers(tmp_path: Path) -> None:
    model, backend = _model(tmp_path)
    request = _request(7)
    model.store.claim(model.fingerprint, [request.key()], "elsewhere:1")
    other, _ = _model(tmp_path)
    answer = other.backend.generate([request])[0]

    def answer_later() -> None:
        time.sleep(0.5)
        Store(tmp_path / "s.sqlite").put_answers(
            other.fingerprint, [(request.key(), answer.__dict__)])

    thread = threading.Thread(target=answer_later)
    thread.start()
    assert model.generate([request]) == [answer]
    thread.join()
    assert backend.sizes == [] and model.calls.requests == 0


def test_a_request_answered_elsewhere_after_the_store_was_read_is_read_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another worker answers a request between this one's read of the store and its claim:
    the claim passes over it, and the answer is read from the store (it was lost, a
    KeyError, under -n 2)."""
    model, backend = _model(tmp_path)
    early, late = _request(1), _request(2)
    answer = backend.mock.generate([early])[0]
    claim = model.store.claim

    def claim_after_another_answers(fingerprint: str, keys: list[str],
                                    owner: str) -> tuple[list[str], list[str]]:
        Store(tmp_path / "s.sqlite").put_answers(fingerprint, [(early.key(), answer.__dict__)])
        return claim(fingerprint, keys, owner)

    monkeypatch.setattr(model.store, "claim", claim_after_another_answers)
    got = model.generate([early, late])
    assert got[0] == answer and got[1] == backend.mock.generate([late])[0]
    assert backend.sizes == [1] and model.calls.requests == 1


def test_a_killed_workers_claims_do_not_hold_up_the_others(tmp_path: Path) -> None:
    """A process that claimed requests is killed (SIGKILL: no clean-up runs): another process
    answers them at once, without waiting for the claims to expire."""
    model, backend = _model(tmp_path)
    keys = [_request(i).key() for i in range(3)]
    worker = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from pathlib import Path\n"
         "from pytest_lceval.store.database import Store, process_owner\n"
         f"Store(Path({str(tmp_path / 's.sqlite')!r})).claim({model.fingerprint!r}, "
         f"{keys!r}, process_owner())\n"
         "print('claimed', flush=True)\n"
         "time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None and worker.stdout.readline().strip() == "claimed"
    assert model.store.claim(model.fingerprint, keys, "elsewhere:2") == ([], keys)  # it holds
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    # Its claims are void at once (not after CLAIM_SECONDS): this process answers them.
    assert model.store.claim(model.fingerprint, keys, model.owner) == (keys, [])
    answers = model.generate([_request(i) for i in range(3)])
    assert len(answers) == 3 and backend.sizes == [3]


class AskingSuite(Suite):
    """A suite whose cells each ask the model for ``samples`` requests of their own."""

    name = "asking"
    measures_ahead = True
    metric = ScoreMetric("answered", "1 when the model answered at all")

    def __init__(self) -> None:
        self.measured: list[str] = []

    def grid(self, settings: object) -> list[Cell]:  # type: ignore[override]
        return []

    def measure(self, cell: Cell, evaluator: object) -> Measurement:  # type: ignore[override]
        model: StoredModel = evaluator.model  # type: ignore[attr-defined]
        answers = model.generate([_request(cell.length * 100 + i) for i in range(cell.samples)])
        self.measured.append(f"t[{cell.length - 1}]")
        return Measurement(scores=[float(bool(a.text)) for a in answers])


def _worker(tmp_path: Path, cells: list[tuple[str, Cell]], owner: str
            ) -> tuple[Lookahead, AskingSuite]:
    model, _ = _model(tmp_path)
    evaluator = SimpleNamespace(model=model, run_dir=tmp_path / "run", board=None,
                                new_result=lambda nodeid, cell, source: CellResult(
                                    nodeid, cell.suite, cell.task, cell.length, cell.depth, {},
                                    "m", model.fingerprint, 0, source))
    suite = AskingSuite()
    suite.source = lambda evaluator: "fixtures"  # type: ignore[method-assign]
    return Lookahead(evaluator, {"asking": suite}, cells, 6, owner=owner), suite  # type: ignore[arg-type]


def test_two_workers_look_ahead_over_different_cells(tmp_path: Path) -> None:
    """Worker A's window claims cells 0-2; worker B, whose first test is cell 1, leaves A's
    cells out of its window and takes the next ones; a test whose cell A measured reads A's
    answers."""
    cells = [(f"t[{i}]", Cell("asking", "t", i + 1, None, 2)) for i in range(8)]
    first, first_suite = _worker(tmp_path, cells, "elsewhere:1")
    second, second_suite = _worker(tmp_path, cells, process_owner())
    first.measure(*cells[0])
    assert first_suite.measured == ["t[0]", "t[1]", "t[2]"]
    # Cell 1 is A's: B measures the next unclaimed cells meanwhile, then cell 1 from A's
    # stored answers.
    second.measure(*cells[1])
    assert second_suite.measured == ["t[3]", "t[4]", "t[5]", "t[1]"]
    assert second.evaluator.model.calls.requests == 6
    second.measure(*cells[3])  # measured ahead
    assert second_suite.measured == ["t[3]", "t[4]", "t[5]", "t[1]"]


@pytest.mark.parametrize(("model", "device", "cuda", "expected"), [
    ("smollm2", "auto", "", 0),             # the embedded model on this CPU
    ("hf:/models/x", "cpu", "0", 0),
    ("hf:/models/x", "auto", "0,1", 64),    # a GPU: more rows a call are nearly free
    ("hf:/models/x", "cuda:1", "", 64),
    ("openai:m", "auto", "", 64),           # a server
    ("mock:grep", "auto", "", 64),
])
def test_auto_lookahead_is_off_and_batches_small_only_for_a_model_on_this_cpu(
        monkeypatch: pytest.MonkeyPatch, model: str, device: str, cuda: str,
        expected: int) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cuda)
    spec = ModelSpec(model)
    assert auto_lookahead(16, spec, device) == expected
    assert auto_batch_size(spec, device) == (8 if expected == 0 else 32)


# -- whole runs: identical results, each request once ------------------------------------

def _cells(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    lines = [json.loads(line) for line in
             (pytester.path / "reports" / "latest" / "results.jsonl").read_text().splitlines()]
    return {line["nodeid"]: line for line in lines}


def _calls(pytester: pytest.Pytester, role: str = "model") -> tuple[int, int]:
    """(requests, backend calls) of the last run, over all its processes."""
    usage = read_usage(pytester.path / "reports" / "latest")[role]
    return usage.requests, usage.batches


RUNS = itertools.count()
SAME = ("score", "scores", "case_keys", "samples", "n", "outcome", "depths_achieved",
        "input_tokens_mean")


def _run(pytester: pytest.Pytester, store: str, *args: str) -> pytest.RunResult:
    """A run into a folder of its own (two runs within a second would share a timestamped one)."""
    return pytester.runpytest(f"--lceval-run=run-{next(RUNS)}",
        "--model=mock:grep?miss=40-60", "--lengths=1k,2k", "--depths=0,50,100",
        "--samples=5", "--lceval-tasks=niah_single_1,niah_multikey_1", "--lceval-batch-size=64",
        f"--lceval-store={store}", "-p", "no:randomly", *args)


def test_lookahead_gives_each_cell_the_result_it_gets_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    _run(pytester, "alone.sqlite", "--lceval-lookahead=0").assert_outcomes(passed=8, failed=4)
    alone = _cells(pytester)
    assert _calls(pytester) == (60, 12)  # one call per cell

    _run(pytester, "ahead.sqlite", "--lceval-lookahead=30").assert_outcomes(passed=8, failed=4)
    ahead = _cells(pytester)
    assert _calls(pytester) == (60, 2)  # six cells per call
    assert list(alone) == list(ahead)  # results.jsonl in the same order
    for nodeid, cell in alone.items():
        assert {k: cell[k] for k in SAME} == {k: ahead[nodeid][k] for k in SAME}, nodeid
        assert ahead[nodeid]["model_requests"] == 5
    # Each cell's share of the shared calls' seconds: they add up to the calls' own.
    spent = read_usage(pytester.path / "reports" / "latest")["model"].seconds
    assert sum(cell["seconds_model"] for cell in ahead.values()) == pytest.approx(spent, abs=0.01)

    _run(pytester, "ahead.sqlite", "--lceval-lookahead=30").assert_outcomes(passed=8, failed=4)
    assert _calls(pytester) == (0, 0)  # a rerun asks nothing
    assert all(cell["model_requests"] == 0 for cell in _cells(pytester).values())


def test_lookahead_follows_the_selection(pytester: pytest.Pytester) -> None:
    """Only selected cells are measured ahead: -k leaves the others unasked."""
    pytester.makepyfile(test_recall=RECALL_SUITE)
    _run(pytester, "s.sqlite", "--lceval-lookahead=1000", "-k", "1k").assert_outcomes(
        passed=4, failed=2)
    assert _calls(pytester) == (30, 1)


def test_two_workers_answer_each_request_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    _run(pytester, "alone.sqlite", "--lceval-lookahead=0").assert_outcomes(passed=8, failed=4)
    alone = _cells(pytester)
    _run(pytester, "two.sqlite", "--lceval-lookahead=30", "-n", "2").assert_outcomes(
        passed=8, failed=4)
    assert _calls(pytester)[0] == 60
    assert len(list((pytester.path / "reports" / "latest" / "model-usage").glob("*"))) == 2
    two = _cells(pytester)
    for nodeid, cell in alone.items():
        assert {k: cell[k] for k in SAME} == {k: two[nodeid][k] for k in SAME}, nodeid


def test_judge_requests_of_many_cells_share_the_judges_calls(
        pytester: pytest.Pytester) -> None:
    per_length = JUDGED_TASK.replace('number for {what.replace(\' \', \'-\')}?"',
                                     'number for {what.replace(\' \', \'-\')} ({cell.length})?"')
    assert per_length != JUDGED_TASK  # each cell's questions, so each cell's judge prompts
    pytester.makeconftest(per_length)
    pytester.makepyfile(test_judged=JUDGED_SUITE)
    args = ("--model=mock:grep", "--lceval-judge=mock:judge", "--lengths=1k,2k",
            "--samples=4", "--lceval-batch-size=64", "-p", "no:randomly")
    pytester.runpytest(*args, "--lceval-store=alone.sqlite", "--lceval-lookahead=0",
                       f"--lceval-run=run-{next(RUNS)}").assert_outcomes(passed=2)
    alone = _cells(pytester)
    assert _calls(pytester, "judge") == (8, 2)
    pytester.runpytest(*args, "--lceval-store=ahead.sqlite", "--lceval-lookahead=8",
                       f"--lceval-run=run-{next(RUNS)}").assert_outcomes(passed=2)
    assert _calls(pytester, "judge") == (8, 1)  # both cells in one call
    ahead = _cells(pytester)
    for nodeid, cell in alone.items():
        assert {k: cell[k] for k in SAME} == {k: ahead[nodeid][k] for k in SAME}, nodeid
        assert cell["metrics"]["judge_requests"] == ahead[nodeid]["metrics"]["judge_requests"]


HAYSTACK = (Path(__file__).parent.parent / "suites" / "test_task_haystack.py").read_text()


def test_task_haystack_rank_requests_of_many_cells_share_calls(
        pytester: pytest.Pytester) -> None:
    """Task Haystack's cells measured together: their rank requests share backend calls and
    every verdict, accuracy and per-case result equals the one-cell-at-a-time run's."""
    pytester.makepyfile(test_task_haystack=HAYSTACK)
    args = ("--model=mock:icl", "--haystack-ntasks=4", "-p", "no:randomly")
    pytester.runpytest(*args, "--lceval-store=alone.sqlite", "--lceval-lookahead=0",
                       f"--lceval-run=run-{next(RUNS)}").assert_outcomes(passed=4)
    alone, alone_calls = _cells(pytester), _calls(pytester)
    pytester.runpytest(*args, "--lceval-store=ahead.sqlite", "--lceval-lookahead=1000",
                       f"--lceval-run=run-{next(RUNS)}").assert_outcomes(passed=4)
    ahead, ahead_calls = _cells(pytester), _calls(pytester)
    assert ahead_calls[0] == alone_calls[0] and ahead_calls[1] < alone_calls[1]
    for nodeid, cell in alone.items():
        assert cell["metrics"]["verdict"] == ahead[nodeid]["metrics"]["verdict"]
        assert cell["metrics"]["l_correct"] == ahead[nodeid]["metrics"]["l_correct"]
        assert cell["metrics"]["s_correct"] == ahead[nodeid]["metrics"]["s_correct"]
        assert cell["case_keys"] == ahead[nodeid]["case_keys"]
