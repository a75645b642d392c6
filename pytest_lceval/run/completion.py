"""How far the run got, and the signals that stop it: what the verdict needs to call a run
incomplete.

pytest reports an interrupted run's finished tests as if they were the run: Ctrl-C at 12 of 52
cells read "passed (12/12)". The controller (or the single process) counts the tests it
selected (under xdist, those its workers collected) and those that finished (their teardown
was reported), the tests whose xdist worker crashed under them (named in the verdict; each gets
its test case closed, so that the JUnit XML and the HTML report show it), and keeps why the run
stopped early: pytest's own reason (``-x``, ``--maxfail``) or the signal.

SIGTERM (a CI job cancelled, a container stopped) killed the controller without a word while its
xdist workers ran on and ended in ``OSError: cannot send``. The controller now takes it once as
Ctrl-C does a terminal's process group: one line, SIGINT to each worker (they stop their test
at once instead of when xdist's shutdown gives up on them) and KeyboardInterrupt in itself, so
the run ends on pytest's own interrupted path, its reports written.

Once the session finishes, the reports are being written: a KeyboardInterrupt there came out of
whatever drew a figure as a hundred-line traceback, after ``summary.md`` had said "failed" and
before the JUnit XML and the HTML report were written at all. From then until pytest ends, Ctrl-C
and SIGTERM are held: one line, every report finished, exit status 2. A signal that comes before
the verdict is decided makes it incomplete (``seal``), so every report tells that one; after it,
the reports tell the verdict as decided. A second signal meets what was there before (SIGTERM's
earlier handler; for Ctrl-C, the default: the process ends at once).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Generator
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


SIGNAL_NAMES: dict[int, str] = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


class Completion:
    """The single process or the xdist controller: selected, finished and lost tests, why the
    run stopped, and the signal handlers."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session: pytest.Session | None = None
        self.selected: set[str] = set()
        self.finished: set[str] = set()
        self.lost: list[str] = []
        """Tests whose xdist worker crashed while running them."""
        self.has_cells = False
        """Whether a test of cells is being collected: a run interrupted before it selected
        any still tells its verdict."""
        self.signal = ""
        """'Ctrl-C (SIGINT)' or 'SIGTERM' once one reached the run before its verdict was
        decided."""
        self.late = False
        """Whether that signal came while the reports were written (the cells had all run)."""
        self.interrupt = ""
        """What pytest's own interruption said (a session-wide failure stops the session)."""
        self.finishing = False
        self.sealed = False
        """Whether the verdict is decided: a signal from then on changes no report."""
        self._before: dict[int, Any] = {}
        """The handlers found, by signal, restored when pytest ends."""
        self._crashed: pytest.TestReport | None = None

    # -- how far the run got ------------------------------------------------------------------

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Called before the core's (plugins registered later come first), which makes the
        grid: an interrupt while the grid's data is read finds this said."""
        self.has_cells = self.has_cells or "lc_cell" in metafunc.fixturenames

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected.update(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.selected.update(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport) -> None:
        self.lost.append(crashitem)
        self._crashed = report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        """A wrapper: the crash report of a lost test reaches every other plugin first, then the
        test case it opened is closed."""
        result = yield
        if report.when == "teardown" and report.nodeid not in self.lost:
            self.finished.add(report.nodeid)
        if report is self._crashed:
            self._crashed = None
            closing = pytest.TestReport(report.nodeid, report.location, {}, "passed", None,
                                        "teardown", user_properties=[("lceval_outcome", "lost")])
            closing.node = getattr(report, "node", None)  # type: ignore[attr-defined]
            self.config.hook.pytest_runtest_logreport(report=closing)  # (JUnit pairs by it)
        return result

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if type(excinfo.value) is KeyboardInterrupt:  # Ctrl-C, or SIGTERM made into one
            self.signal = self.signal or SIGNAL_NAMES[signal.SIGINT]
        else:  # pytest's own stop (a session-wide failure), pytest.exit
            self.interrupt = str(excinfo.value)

    @property
    def not_run(self) -> int:
        return len(self.selected - self.finished)

    def stopped(self, session: pytest.Session) -> str:
        """Why the run ended before its end, in a few words; '' when it did not."""
        if self.signal:
            return f"interrupted: {self.signal}" + (" while the reports were written"
                                                    if self.late else "")
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            return f"interrupted: {self.interrupt}" if self.interrupt else "interrupted"
        return str(session.shouldfail or session.shouldstop or "")

    def seal(self) -> None:
        """The verdict is being decided: a signal from now on is said, and changes no report."""
        self.sealed = True

    # -- signals ------------------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        self._hold(signal.SIGTERM)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """From here the reports are written: Ctrl-C is held too, until pytest ends."""
        self.finishing = True
        self._hold(signal.SIGINT)
        return (yield)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        self._before = {}
        shutil.rmtree(self.config.stash[RUN_DIR] / WORKERS_DIR, ignore_errors=True)

    def _hold(self, signum: int) -> None:
        if threading.current_thread() is threading.main_thread():
            self._before.setdefault(signum, signal.getsignal(signum))
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        before = self._before.get(signum)
        signal.signal(signum, signal.SIG_DFL if signum == signal.SIGINT or before is None
                      else before)
        name = SIGNAL_NAMES[signum]
        again = "Ctrl-C again" if signum == signal.SIGINT else "a second SIGTERM"
        if not self.finishing:  # SIGTERM while the cells run
            self.signal = name
            self._say("lceval: SIGTERM received: stopping as on Ctrl-C; the cells not run are "
                      "counted and the verdict is incomplete")
            _interrupt_workers(self.config.stash[RUN_DIR] / WORKERS_DIR)
            raise KeyboardInterrupt
        if self.sealed:
            if self.session is not None and int(self.session.exitstatus) < 2:
                self.session.exitstatus = pytest.ExitCode.INTERRUPTED
            self._say(f"lceval: {name} received after the verdict was decided: finishing its "
                      f"reports as decided, exit status 2 ({again} ends the process at once)")
            return
        if not self.signal:
            self.signal, self.late = name, True
        self._say(f"lceval: {name} received while the reports are written: finishing them, "
                  f"with the verdict incomplete ({again} ends the process at once)")

    def _say(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)


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
