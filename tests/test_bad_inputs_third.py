"""The bad-input sweep's third round (issue #35): inputs a new user tried that gave a traceback,
fell back without a word, or printed a wrong line. Each test reproduces the input and checks the
one line it now gets, the exit status, and that the store and any finished report stay as they
were. Inputs that only need the start-up checks are rows of test_bad_inputs.CASES instead.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from test_bad_inputs import _message, store_rows
from toy_suite import SUITE, TOY_TASK

GRID = ["--model", "mock:grep", "--lengths", "256", "--depths", "50", "--samples", "2",
        "-p", "no:randomly"]


def one_line(outcome: pytest.RunResult, *fragments: str) -> str:
    """The one pytest-lceval message of the run (said at most three times: the error, the
    summary, the stop), holding every fragment; no traceback."""
    text = "\n".join([*outcome.outlines, *outcome.errlines])
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    messages = [_message(line) for line in text.splitlines() if "pytest-lceval:" in line]
    assert messages, text
    full = max(messages, key=len)
    assert all(full.startswith(message) for message in messages), messages
    assert len(messages) <= 3, messages
    for fragment in fragments:
        assert fragment in full, (fragment, full)
    return full


def finished(run_dir: Path) -> dict[str, bytes]:
    """A finished run's report files, to check they stay whole."""
    return {path.name: path.read_bytes() for path in sorted(run_dir.iterdir()) if path.is_file()}


@pytest.fixture
def toy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


# -- item 1: a file where the samples folder goes ---------------------------------------------


@pytest.mark.bad_input("log-samples-over-a-file")
def test_a_file_named_samples_in_the_run_folder_is_refused_at_start(toy: pytest.Pytester) -> None:
    store = ["--lceval-store", "s.sqlite", "--lceval-run", "r"]
    toy.runpytest(*GRID, *store).assert_outcomes(passed=1)
    run_dir = toy.path / "reports" / "r"
    (run_dir / "samples").write_text("my notes\n")
    before, rows = finished(run_dir), store_rows(toy.path / "s.sqlite")
    assert "results.jsonl" in before and "summary.md" in before

    outcome = toy.runpytest(*GRID, *store, "--lceval-log-samples")

    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    one_line(outcome, "--lceval-log-samples", f"{run_dir / 'samples'} cannot be written",
             "is a file, not a folder", "move it away or name another run folder with "
             "--lceval-run")
    assert finished(run_dir) == before
    assert store_rows(toy.path / "s.sqlite") == rows


# -- item 9: '~' in a path option -------------------------------------------------------------


@pytest.mark.bad_input("out-with-a-tilde", "store-with-a-tilde")
def test_every_path_option_expands_the_home_folder(toy: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``--lceval-out=~/x`` (one word, so no shell expands it) goes to the home folder, as
    ``--lceval-compare`` and ``--lceval-data`` do; no folder named '~' appears."""
    home = toy.path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    outcome = toy.runpytest(*GRID, "--lceval-out=~/x", "--lceval-store=~/s.sqlite",
                            "--lceval-run", "r")
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines([f"lceval: data=* run={home}/x/r store={home}/s.sqlite"])
    assert not (toy.path / "~").exists()
    assert [row["task"] for row in map(json.loads, (home / "x" / "r" / "results.jsonl")
                                       .read_text().splitlines())] == ["toy"]
    with sqlite3.connect(home / "s.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 2
