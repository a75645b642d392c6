"""Crash safety of the store under load: kill -9 mid-cell (the whole run, or one xdist worker)
and rerun, two writers at once, corrupted rows, and fingerprints that keep stale answers out."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from run_outputs import read_results
from toy_suite import SUITE, TOY_TASK

from pytest_lceval.models.mock import load_mock
from pytest_lceval.models.registry import LoadOptions
from pytest_lceval.models.stored import StoredModel
from pytest_lceval.results.records import GenerateRequest
from pytest_lceval.store.database import Store, StoreCorruptionWarning

SLOW_BACKEND = """
import os, time
from pytest_lceval.models.mock import MockBackend


class SlowGrep(MockBackend):
    '''mock:grep that takes DELAY s per batch and logs every request that reaches it.'''

    def generate(self, requests):
        time.sleep(float(os.environ.get("SLOW_DELAY", "0.3")))
        with open("calls.log", "a") as log:
            log.writelines(f"{request.key()}\\n" for request in requests)
        return super().generate(requests)


def load_slow(rest, options):
    with open(f"pid-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "w") as out:
        out.write(str(os.getpid()))
    return SlowGrep("grep", {}, options)
"""
REGISTER = """

def pytest_lceval_make_backend(spec, options):
    if spec.startswith("slow:"):
        from slowmock import load_slow

        return load_slow(spec[len("slow:"):], options)
    return None
"""
GRID = ["--lengths", "256,512", "--depths", "0,25,50", "--samples", "2",
        "--lceval-batch-size", "1", "-p", "no:randomly", "-p", "no:cacheprovider"]
TOTAL = 12
"""Requests in GRID: 6 cells x 2 samples."""


@pytest.fixture
def slow_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK + REGISTER)
    pytester.makepyfile(test_suite=SUITE, slowmock=SLOW_BACKEND)
    return pytester


def results(pytester: pytest.Pytester, run: str) -> dict[str, dict]:
    rows = read_results(pytester, run)
    keep = ("score", "scores", "case_keys", "n", "fingerprint", "samples", "outcome")
    return {row["nodeid"]: {k: row[k] for k in keep} for row in rows}


def calls(pytester: pytest.Pytester) -> list[str]:
    log = pytester.path / "calls.log"
    return log.read_text().split() if log.exists() else []


def run_args(run: str, store: str, *extra: str) -> list[str]:
    return ["--model", "slow:", *GRID, "--lceval-run", run, "--lceval-store", store, *extra]


def wait_for(condition: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:g} s waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("victim", ["run", "worker"])
def test_kill_9_mid_cell_then_rerun_recomputes_nothing_stored(
        slow_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, victim: str) -> None:
    monkeypatch.setenv("SLOW_DELAY", "0")  # in-process runs: the reference and the rerun
    slow_suite.runpytest(*run_args("reference", "ref.sqlite")).assert_outcomes(passed=6)
    (slow_suite.path / "calls.log").unlink()

    store = Store(slow_suite.path / "crash.sqlite")
    workers = ["-n", "2", "--max-worker-restart", "0"] if victim == "worker" else []
    command = [sys.executable, "-m", "pytest", *run_args("crashed", "crash.sqlite", *workers)]
    with open(slow_suite.path / "crashed.out", "w") as out:
        process = subprocess.Popen(command, cwd=slow_suite.path, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, "SLOW_DELAY": "0.3"})
    try:
        wait_for(lambda: store.count_answers() >= 5, 240, "5 stored answers")
        if victim == "run":  # the whole run (its process group), as a killed CI job
            os.killpg(process.pid, signal.SIGKILL)
        else:  # one worker: xdist reports its cell as crashed and goes on with a new worker
            pid_file = slow_suite.path / "pid-gw0"
            wait_for(pid_file.exists, 60, "worker gw0 to load its model")
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        process.wait(timeout=240)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode != 0
    stored = {row[0] for row in store._connect().execute("SELECT request FROM answers")}
    assert len(stored) < TOTAL
    before = calls(slow_suite)

    slow_suite.runpytest(*run_args("rerun", "crash.sqlite")).assert_outcomes(passed=6)
    recomputed = calls(slow_suite)[len(before):]
    assert not set(recomputed) & stored  # nothing stored reached the model again...
    assert len(recomputed) == TOTAL - len(stored)  # ...and only the missing answers did
    assert results(slow_suite, "rerun") == results(slow_suite, "reference")
    store.close()


WRITER = """
import sys
from pathlib import Path
from pytest_lceval.store.database import Store

store = Store(Path(sys.argv[1]))
name = sys.argv[2]
for i in range(1000):
    store.put_answers("fp", [(f"{name}-{i}", {"text": name, "i": i})])
    if i % 50 == 0:
        assert len(store.get_answers("fp", [f"{name}-{j}" for j in range(i + 1)])) == i + 1
print("done", name)
"""


def test_two_writers_store_1000_answers_each_without_locking_errors(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in ("a", "b")]
    outputs = [writer.communicate(timeout=300) for writer in writers]
    for writer, (out, err) in zip(writers, outputs, strict=True):
        assert writer.returncode == 0, err
        assert "database is locked" not in err and out.startswith("done")
    assert Store(path).count_answers("fp") == 2000


def stored_model(path: Path, spec: str = "grep", chat: str = "auto") -> StoredModel:
    return StoredModel(load_mock(spec, LoadOptions(chat_template=chat)), Store(path),
                       batch_size=2)


REQUESTS = [GenerateRequest(f"One of the special magic numbers for k{i} is: {i}{i}{i}. "
                            f"What is the number for k{i}?", 8) for i in range(4)]


def test_corrupted_and_truncated_rows_are_detected_warned_and_recomputed(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    first = stored_model(path).generate(REQUESTS)
    db = sqlite3.connect(path)
    keys = [request.key() for request in REQUESTS]
    db.execute("UPDATE answers SET payload = substr(payload, 1, 7) WHERE request = ?", (keys[0],))
    db.execute("UPDATE answers SET payload = replace(payload, '1', '7') WHERE request = ?",
               (keys[1],))
    db.commit()
    db.close()
    model = stored_model(path)
    with pytest.warns(StoreCorruptionWarning, match="corrupted; it will be recomputed"):
        again = model.generate(REQUESTS)
    assert again == first and model.calls.requests == 2 and model.calls.reused == 2
    clean = stored_model(path)
    assert clean.generate(REQUESTS) == first and clean.calls.requests == 0


def test_corruption_in_a_pytest_run_is_shown_and_the_cell_still_passes(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    args = ["--model", "mock:grep", "--lengths", "256", "--depths", "50", "--samples", "2",
            "--lceval-store", "s.sqlite", "-p", "no:randomly"]
    pytester.runpytest(*args, "--lceval-run", "a").assert_outcomes(passed=1)
    db = sqlite3.connect(pytester.path / "s.sqlite")
    db.execute("UPDATE answers SET payload = substr(payload, 2) WHERE rowid = 1")
    db.commit()
    db.close()
    rerun = pytester.runpytest(*args, "--lceval-run", "b")
    rerun.assert_outcomes(passed=1)
    rerun.stdout.fnmatch_lines(["*StoreCorruptionWarning*corrupted*recomputed*"])
    rows = [json.loads(line) for line in
            (pytester.path / "reports" / "b" / "results.jsonl").read_text().splitlines()]
    assert rows[0]["model_requests"] == 1 and rows[0]["score"] == 1.0


def test_a_changed_fingerprint_never_gets_stale_answers(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    base = stored_model(path)
    base.generate(REQUESTS)
    for changed in (stored_model(path, chat="on"), stored_model(path, "grep?window=4096"),
                    stored_model(path, "constant")):
        assert changed.fingerprint != base.fingerprint
        changed.generate(REQUESTS)
        assert changed.calls.reused == 0 and changed.calls.requests == len(REQUESTS)
    assert stored_model(path).generate(REQUESTS) == base.generate(REQUESTS)
    assert Store(path).count_answers(base.fingerprint) == len(REQUESTS)


def test_a_killed_writer_leaves_a_readable_store(tmp_path: Path) -> None:
    """kill -9 in the middle of a stream of commits: every committed row reads back sound."""
    path = tmp_path / "store.sqlite"
    endless = textwrap.dedent("""
        import sys
        from pathlib import Path
        from pytest_lceval.store.database import Store
        store = Store(Path(sys.argv[1]))
        for i in range(10**6):
            store.put_answers("fp", [(f"k{i}", {"text": "x" * 2000, "i": i})])
    """)
    writer = subprocess.Popen([sys.executable, "-c", endless, str(path)])
    store = Store(path)
    try:
        wait_for(lambda: store.count_answers() >= 300, 120, "300 rows")
    finally:
        writer.kill()
        writer.wait()
    count = store.count_answers()
    with_warnings = store.get_answers("fp", [f"k{i}" for i in range(count)])
    assert len(with_warnings) == count and all(v["i"] == int(k[1:])
                                               for k, v in with_warnings.items())
