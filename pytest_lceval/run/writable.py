"""Output paths checked at start-up, each in one line naming its option: a folder the run
writes in (``--lceval-out``, the samples folder, ``--lceval-fetch-dir``, the baselines') and the
report files other plugins write at the end (``--html``, ``--junitxml``). A path below a file
otherwise fails only when it is first written, after every cell ran, with a traceback."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

REPORT_FILES = {"htmlpath": ("--html", "report.html"), "xmlpath": ("--junitxml", "junit.xml")}
"""The report files other plugins write (pytest-html's page, pytest's JUnit XML): by option
dest, the option and a file name to suggest. A path below a file fails in those plugins
(pytest-html's at its configure with an INTERNALERROR, junitxml's at the session's end with a
traceback, after every cell ran and before the verdict is said)."""


def check_report_file(path: Path, option: str, name: str) -> None:
    """A file the run writes at its end: not a folder, in a folder that can be written."""
    if path.is_dir():
        raise pytest.UsageError(f"pytest-lceval: {option}: {path} is a folder, not a file; "
                                f"name a file, e.g. {option}={path / name}")
    check_writable(path.parent, option, f"point {option} at a file in a writable folder")


def check_writable(folder: Path, option: str, fix: str | None = None) -> None:
    """The folder exists or can be made, and a file can be written in it: probed in the nearest
    existing ancestor with a temporary file, so that the check creates nothing. ``fix`` says
    what to do (by default: point the option at a writable folder)."""
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    problem = None
    if not existing.is_dir():
        problem = f"{existing} is a file, not a folder"
    else:
        try:
            with tempfile.TemporaryFile(dir=existing):
                pass
        except OSError as exc:
            problem = f"cannot write in {existing} ({exc.strerror or exc})"
    if problem:
        raise pytest.UsageError(f"pytest-lceval: {option}: {folder} cannot be written: {problem}; "
                                f"{fix or f'point {option} at a writable folder'}")
