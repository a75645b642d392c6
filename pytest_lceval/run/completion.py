"""How far the run got, and SIGTERM taken as Ctrl-C: what the verdict needs to call a run
incomplete.

pytest reports an interrupted run's finished tests as if they were the run: Ctrl-C at 12 of 52
cells read "passed (12/12)". The controller (or the single process) counts the tests it
selected (under xdist, those its workers collected) and those that finished (their teardown
was reported), and keeps why the run stopped early: pytest's own reason (``-x``, ``--maxfail``)
or the interruption.

SIGTERM (a CI job cancelled, a container stopped) killed the controller without a word while its
xdist workers ran on and ended in ``OSError: cannot send``. The controller now takes it once as
Ctrl-C does a terminal's process group: one line, SIGINT to each worker (they stop their test
at once instead of when xdist's shutdown gives up on them) and KeyboardInterrupt in itself, so
the run ends on pytest's own interrupted path, its reports written. A second SIGTERM meets the
handler that was there before (by default: the process ends).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from ..foundation.workers import worker_id
from ..results.cells import RUN_DIR

WORKERS_DIR = ".workers"
"""Folder of the run folder where xdist workers leave their process ids; removed at the end."""
PLUGIN_NAME = "lceval-completion"
COMPLETION = pytest.StashKey["Completion"]()


class Completion:
    """The single process or the xdist controller: selected and finished tests, why the run
    stopped, and the SIGTERM handler."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.selected: set[str] = set()
        self.finished: set[str] = set()
        self.signal = ""
        """'SIGTERM' once one was received."""
        self.interrupt = ""
        """What the KeyboardInterrupt said, when the run was interrupted."""
        self.finishing = False
        self._previous: Any = None

    # -- how far the run got ------------------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected.update(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.selected.update(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.finished.add(report.nodeid)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.interrupt = str(excinfo.value)

    @property
    def not_run(self) -> int:
        return len(self.selected - self.finished)

    def stopped(self, session: pytest.Session) -> str:
        """Why the run ended before its end, in a few words; '' when it did not."""
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            said = "SIGTERM" if self.signal else self.interrupt or "Ctrl-C (SIGINT)"
            return f"interrupted: {said}"
        return str(session.shouldfail or session.shouldstop or "")

    # -- SIGTERM ------------------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """From here the reports are written: a SIGTERM is still said, but interrupts nothing."""
        self.finishing = True

    def pytest_unconfigure(self) -> None:
        if self._previous is not None and self.signal == "":
            signal.signal(signal.SIGTERM, self._previous)
        self._previous = None
        shutil.rmtree(self.config.stash[RUN_DIR] / WORKERS_DIR, ignore_errors=True)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, self._previous if self._previous is not None
                      else signal.SIG_DFL)
        self.signal = "SIGTERM"
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        line = ("lceval: SIGTERM received: stopping as on Ctrl-C; the cells not run are "
                "counted and the verdict is incomplete" if not self.finishing else
                "lceval: SIGTERM received while the reports are written: finishing them")
        if reporter is not None:
            reporter.write_line(line)
        if self.finishing:
            return
        _interrupt_workers(self.config.stash[RUN_DIR] / WORKERS_DIR)
        raise KeyboardInterrupt


def _interrupt_workers(folder: Path) -> None:
    """Send SIGINT to the run's xdist workers."""
    for path in sorted(folder.glob("*.pid")) if folder.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):  # a worker that already ended
            os.kill(int(path.read_text()), signal.SIGINT)


class WorkerPid:
    """An xdist worker: leaves its process id where the controller's SIGTERM handler finds it
    (xdist tells the controller no worker's pid)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(str(os.getpid()), encoding="utf-8")

    def pytest_unconfigure(self) -> None:
        self.path.unlink(missing_ok=True)


@pytest.hookimpl
def pytest_lceval_configure(config: pytest.Config) -> None:
    """After the core's configure: the run folder is known."""
    if hasattr(config, "workerinput"):
        path = config.stash[RUN_DIR] / WORKERS_DIR / f"{worker_id()}.pid"
        config.pluginmanager.register(WorkerPid(path), PLUGIN_NAME)
        return
    completion = config.stash[COMPLETION] = Completion(config)
    config.pluginmanager.register(completion, PLUGIN_NAME)


def completion_of(config: pytest.Config) -> Completion | None:
    return config.stash.get(COMPLETION, None)
