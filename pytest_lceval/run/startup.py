"""Start-up checks, and stopping the run on a failure that concerns every cell.

At session start, on the controller (before collection, before any xdist worker starts), every
problem that would otherwise fail each cell, or fail only after the model has worked, becomes one
usage error naming the option and the fix: unknown task names, a broken essay file, an output
folder that cannot be written (store/repair.py checks the store's), a model named by --model (or
its ini key) that cannot load (missing or empty folder, not a model, no CUDA), a server that
does not answer.
Then the run's own folder is made (``claim_run_dir``), one no other run shares.
``--collect-only`` checks names and data only: it loads nothing and writes nothing.

During the run, a failure that no later cell can escape (the model did not load after all, a
data file is broken, the store's disk is full) fails the first cell with one line and stops the
session, on every worker, instead of being repeated for each cell. A failed request fails its
cell with its one line, and the run goes on.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..fetch.declared import releases_of
from ..foundation.data import DataError
from ..models.options import RequestFailed
from ..models.reference_tokenizer import ReferenceTokenizerError, check_reference
from ..models.registry import LoadOptions, MissingDependencyError, ModelUnavailable, check_model
from ..results.cells import RESULTS_FILE, RUN_DIR
from ..results.sample_log import SAMPLES_DIR
from ..results.whole_file import OutOfSpace
from ..settings import SETTINGS, lookup, serving_options
from ..store.database import StoreFull
from .data_check import check_data_dir
from .model_usage import RUN_STARTED
from .progress import log_seconds
from .selection import check_task_names, known_task_names
from .suite import suites_of
from .writable import REPORT_FILES, check_report_file, check_writable

DATA_LINES = pytest.StashKey[list[str]]()
"""The header's line about an explicit --lceval-data that lacks some suites' folders."""
MADE_FOLDERS = pytest.StashKey[list[Path]]()
"""The run folder and the parents made for it (controller only), removed at the end if empty."""
SESSION_WIDE = (ModelUnavailable, DataError, StoreFull, OutOfSpace)
"""Failures that every later cell would repeat: the first one stops the run."""
ONE_LINE = (RequestFailed, *SESSION_WIDE)
"""Failures whose message says it all: the cell shows that line, not a traceback."""


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """tryfirst: before xdist starts workers in its own pytest_sessionstart."""
    config = session.config
    if hasattr(config, "workerinput") or SETTINGS not in config.stash:
        return
    settings = config.stash[SETTINGS]
    check_task_names(settings, known_task_names(config))
    if settings.data_dir is not None:
        try:
            config.stash[DATA_LINES] = check_data_dir(settings.data_dir, suites_of(config),
                                                     releases_of(config.pluginmanager))
        except DataError as exc:
            raise pytest.UsageError(f"pytest-lceval: --lceval-data: {exc}") from None
    try:
        log_seconds()
    except ValueError as exc:
        raise pytest.UsageError(f"pytest-lceval: {exc}") from None
    try:
        settings.data_source().essays()  # read (and cached) now: every suite uses them
    except DataError as exc:
        raise pytest.UsageError(f"pytest-lceval: --lceval-data: {exc}") from None
    if settings.ref_tokenizer is not None:
        try:
            check_reference(settings.ref_tokenizer)
        except ReferenceTokenizerError as exc:
            raise pytest.UsageError(f"pytest-lceval: {exc}") from None
    if config.option.collectonly:
        return
    # The store checks its own folder; the run folder is made now, before xdist's workers
    # are told where it is, and removed at the end if the run wrote nothing in it.
    config.stash[RUN_DIR], config.stash[MADE_FOLDERS] = claim_run_dir(
        config.stash[RUN_DIR], named=settings.run_name is not None,
        mark=RunMark(os.getpid(), config.stash[RUN_STARTED], settings.model))
    if settings.log_samples:  # a folder named with --lceval-run may hold anything under that name
        check_writable(config.stash[RUN_DIR] / SAMPLES_DIR, "--lceval-log-samples",
                       "move it away or name another run folder with --lceval-run")
    if lookup(config, "lceval_model")[0] is None and not settings.model_args:
        # The default model is checked when a cell first needs it: with the plugin installed,
        # every pytest run on the machine passes here, most of them running no lceval suite.
        return
    options = LoadOptions(settings.chat_template, settings.dtype, settings.device,
                          serving=serving_options(config), model_args=settings.model_args,
                          window=settings.window)
    try:
        check_model(settings.model, options)
    except (ValueError, MissingDependencyError) as exc:
        raise pytest.UsageError(f"pytest-lceval: --model={settings.model}: {exc}") from None


RUN_MARK = ".lceval-run"
"""The file that claims a run folder for one run (made exclusively, kept with its results): a
second run naming the folder, at once or later, is refused rather than mixing its cells in."""


@dataclass(frozen=True)
class RunMark:
    """Which run holds a folder, in the words of the refusal a second run gets."""

    pid: int
    started: float
    model: str

    def text(self) -> str:
        return json.dumps({"pid": self.pid, "started": self.started, "model": self.model})

    @classmethod
    def read(cls, path: Path) -> RunMark | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(int(data["pid"]), float(data["started"]), str(data["model"]))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def said(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"the run of {self.model} started {when} (process {self.pid})"


def claim_run_dir(folder: Path, named: bool, mark: RunMark) -> tuple[Path, list[Path]]:
    """Make this run's folder, one no other run writes in, and mark it as this run's. A timed
    folder that exists already (another run started in the same second) is left to that run,
    and this one takes the next free ``-2``, ``-3``...; a folder named with --lceval-run that
    holds another run (finished, or being written) is refused in one line: its name is where
    the user reads this run's reports, so a suffix would leave them reading the other run's.
    Claimed exclusively, so two runs starting together never get one folder. Returns the folder
    and the folders made for it, outermost first."""
    check_writable(folder, "--lceval-out")
    made = [path for path in reversed(folder.parents) if not path.exists()]
    folder.parent.mkdir(parents=True, exist_ok=True)
    if named:
        if not folder.exists():
            made.append(folder)
        folder.mkdir(exist_ok=True)
        results = (folder / RESULTS_FILE).exists()
        if results or not _claim(folder, mark):
            held = RunMark.read(folder / RUN_MARK)
            said = held.said() if held else "the results of another run" if results else \
                "another run"
            raise pytest.UsageError(
                f"pytest-lceval: --lceval-run {folder.name}: {folder} holds {said}; a run folder "
                f"holds one run: name another with --lceval-run (or remove that folder)")
        return folder, made
    number = 1
    while True:
        candidate = folder if number == 1 else folder.with_name(f"{folder.name}-{number}")
        try:
            candidate.mkdir()
        except FileExistsError:
            number += 1
        else:
            _claim(candidate, mark)
            return candidate, [*made, candidate]


def _claim(folder: Path, mark: RunMark) -> bool:
    """Write the folder's mark unless another run's is there. A disk too full to hold it
    leaves the folder unmarked: the run stops at its first result, saying the disk is full."""
    path = folder / RUN_MARK
    try:
        handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    except OSError:
        return True
    try:
        os.write(handle, mark.text().encode("utf-8"))
    except OSError:
        path.unlink(missing_ok=True)
    finally:
        os.close(handle)
    return True


def release_run_dir(run_dir: Path, made: list[Path]) -> None:
    """A run that wrote no results (a pytest run that ran no lceval cell, or one stopped
    before its first) leaves the folder to the next: its mark is removed, then the folders
    ``claim_run_dir`` made that are left empty, innermost first."""
    if (run_dir / RESULTS_FILE).exists():
        return
    (run_dir / RUN_MARK).unlink(missing_ok=True)
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:  # the run wrote in it (or in a folder below it)
            return


def pytest_report_header(config: pytest.Config) -> list[str]:
    return config.stash.get(DATA_LINES, [])


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """tryfirst: pytest-html makes the folder of ``--html`` in its own configure; each report
    file is checked before, as ``--lceval-out`` is. The run's start is noted (the controller's,
    on a worker)."""
    workerinput = getattr(config, "workerinput", {})
    config.stash[RUN_STARTED] = float(workerinput.get("lceval_run_started", time.time()))
    if hasattr(config, "workerinput"):
        return
    for dest, (option, name) in REPORT_FILES.items():
        path = config.getoption(dest, None)
        if path:
            check_report_file(Path(os.path.expandvars(path)).expanduser().absolute(), option,
                              name)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """An xdist worker counts the run from its controller's start."""
    node.workerinput["lceval_run_started"] = node.config.stash[RUN_STARTED]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo[None],
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failure that says it all is one line for the cell; a session-wide one also stops the
    session (xdist workers pass ``shouldstop`` to the controller, which ends the run with the
    same line)."""
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, ONE_LINE):
        message = f"pytest-lceval: {call.excinfo.value}"
        report.longrepr = message
        if isinstance(call.excinfo.value, SESSION_WIDE):
            item.session.shouldstop = message
    return report


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    """A disk that fills while the run writes its reports: the run says so in one line and
    fails, instead of an INTERNALERROR; what was written before is whole (``whole_file``).
    trylast: the innermost wrapper, so the terminal's summary still follows."""
    try:
        return (yield)
    except OutOfSpace as exc:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"pytest-lceval: {exc}"
        if reporter is not None and session.shouldstop != message:  # not said by the stop
            reporter.write_line(message, red=True)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return None


def pytest_unconfigure(config: pytest.Config) -> None:
    if MADE_FOLDERS in config.stash:  # this process claimed the folder
        release_run_dir(config.stash[RUN_DIR], config.stash[MADE_FOLDERS])
