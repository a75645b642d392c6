"""Progress on the terminal while cells run, without breaking pytest's output, capture or xdist.

A cell's progress is reported from inside the test, where pytest captures file descriptors 1
and 2: a plain write, even to ``sys.__stderr__``, lands in the test's captured output and is
shown only if the test fails. So every write here suspends capture around itself (the capture
manager's ``global_and_fixture_disabled``, as pytest's live logging does).

One board per session decides where progress goes; the run's progress plugin
(report/run_progress.py) makes it and keeps it in the config's stash (``BOARD``), and the session's
evaluator hands it to every cell's :class:`CellProgress`:

- :class:`TerminalBoard` (single process, or the xdist controller) writes through pytest's
  terminal reporter. On a terminal it keeps one status line just below pytest's current line
  (the whole run, then the running cell), redrawn in place and erased before pytest writes, so
  the ``.``/``F`` and ``-v`` output stay intact. Elsewhere (CI logs) it prints full lines.
- :class:`WorkerBoard` (xdist worker) prints a slow cell's full lines to the real stderr when
  it is a log, and nothing on a terminal, where the controller's line owns the screen.
- :class:`StreamBoard` (outside a pytest session, or a session without a terminal) writes to
  a stream.

:class:`CellProgress` is the per-cell reporter the model calls after each batch; it throttles
and hands lines to the process's board.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

import pytest

from ..foundation.measuring import current

Bypass = Callable[[], contextlib.AbstractContextManager[Any]]


class Board(Protocol):
    interactive: bool
    """Whether lines are rewritten in place (a terminal) rather than printed (a log)."""

    def cell(self, label: str, status: str) -> None:
        """Show the running cell's progress: rewrite it, or print it as a line."""

    def cell_done(self) -> None:
        """The cell has finished: remove its progress where it was rewritten in place."""

    def note(self, text: str) -> None:
        """A line that stays, printed once (what the model learnt as it loaded)."""


def _isatty(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


def bypass_capture(capman: Any | None) -> Bypass:
    """A context-manager factory that suspends pytest's capture (a no-op without one)."""
    if capman is None:
        return contextlib.nullcontext
    return capman.global_and_fixture_disabled


class StreamBoard:
    """Outside a pytest session: a line rewritten on a terminal, full lines elsewhere."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.interactive = _isatty(stream)
        self._live = False

    def cell(self, label: str, status: str) -> None:
        text = f"{label}: {status}"
        if self.interactive:
            self.stream.write("\r\x1b[2K" + text)
            self._live = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def cell_done(self) -> None:
        if self._live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._live = False

    def note(self, text: str) -> None:
        self.cell_done()
        self.stream.write(text + "\n")
        self.stream.flush()


class WorkerBoard:
    """An xdist worker: full lines to the real stderr in a log, silence on a terminal."""

    interactive = False

    def __init__(self, bypass: Bypass, stream: TextIO | None = None) -> None:
        self.bypass = bypass
        self.stream = stream or sys.__stderr__ or sys.stderr
        self.silent = _isatty(self.stream)

    def cell(self, label: str, status: str) -> None:
        if self.silent:
            return
        with self.bypass():
            self.stream.write(f"{label}: {status}\n")
            self.stream.flush()

    def cell_done(self) -> None:
        pass

    def note(self, text: str) -> None:
        """On a terminal too: a line once per worker, where a cell's lines would be many."""
        with self.bypass():
            self.stream.write(text + "\n")
            self.stream.flush()


class TerminalBoard:
    """pytest's terminal in a single process or on the xdist controller (see the module doc).

    The status line is drawn on the row below the cursor: newline, clear, text, one row up,
    back to pytest's column. Going down one row first scrolls the screen when the cursor is on
    its last row, so the way back up lands on pytest's line either way.
    """

    def __init__(self, reporter: Any, writer: Any, bypass: Bypass) -> None:
        self.reporter = reporter
        self.writer = writer
        """The reporter's TerminalWriter (``config.get_terminal_writer()``): column, width."""
        self.bypass = bypass
        self.interactive = _isatty(reporter)
        self.run_status: Callable[[], str] | None = None
        """The whole run's status, recomputed at each redraw (elapsed time moves on)."""
        self.cell_text = ""
        self._shown = False

    def note(self, text: str) -> None:
        self.log(text)

    def log(self, text: str) -> None:
        """A line that stays, on its own line."""
        with self.bypass():
            self.hide()
            self.reporter.ensure_newline()
            if self.writer.width_of_current_line:
                self.reporter.write("\n")
            self.reporter.write_line(text)
            self.show()

    def set_run(self, status: Callable[[], str] | None) -> None:
        """The whole run's status line on a terminal (logs get :meth:`log` lines instead)."""
        self.run_status = status
        self.show()

    def cell(self, label: str, status: str) -> None:
        if not self.interactive:
            self.log(f"{label}: {status}")
            return
        self.cell_text = f"{short_label(label)}: {status}"
        self.show()

    def cell_done(self) -> None:
        self.cell_text = ""
        self.show()

    def show(self) -> None:
        if not self.interactive:
            return
        run = self.run_status() if self.run_status is not None else ""
        text = " | ".join(part for part in (run, self.cell_text) if part)
        column = self._column()
        if not text or column is None:
            self.hide()
            return
        width = max(self.writer.fullwidth - 1, 20)
        with self.bypass():
            self.reporter.write_raw(f"\n\r\x1b[2K{text[:width]}\x1b[1A{column}", flush=True)
        self._shown = True

    def hide(self) -> None:
        if not self._shown:
            return
        column = self._column()
        # With a wrap pending, save and restore the cursor instead (the status row exists
        # already, so going down does not scroll and the saved position stays right).
        erase = f"\n\r\x1b[2K\x1b[1A{column}" if column else "\x1b7\n\r\x1b[2K\x1b8"
        with self.bypass():
            self.reporter.write_raw(erase, flush=True)
        self._shown = False

    def _column(self) -> str | None:
        """The escape that puts the cursor back at pytest's column; None when pytest's line
        exactly fills the screen's width, where the terminal holds a wrap pending that moving
        the cursor would lose (the status line then waits for the next redraw)."""
        used, width = self.writer.width_of_current_line, max(self.writer.fullwidth, 1)
        if used and used % width == 0:
            return None
        return f"\x1b[{used % width + 1}G"


def short_label(label: str) -> str:
    """A cell's label for the one status line: '[main] suites/test_recall.py::test_recall[
    json_kv-4k-50]' -> 'json_kv-4k-50' (the run's line already says the rest)."""
    name = label.split("] ", 1)[-1] if label.startswith("[") else label
    if "::" in name and name.endswith("]") and "[" in name:
        return name[name.index("[") + 1 : -1]
    return name


BOARD = pytest.StashKey[Board]()
"""The session's board (report/run_progress.py sets it at configure); the evaluator reads it."""


WAITING_SECONDS = 1.0
"""Counts that stood still this long: the line says the cell waits for the model."""
LOG_EVERY_ENV = "LCEVAL_PROGRESS_EVERY"
"""Seconds between a running cell's lines in a log (default 30)."""


def log_seconds() -> float:
    """The variable's seconds; ValueError naming it for a value that is not a number of seconds
    >= 0 (start-up checks it, so a typo is said once instead of ignored)."""
    text = os.environ.get(LOG_EVERY_ENV, "30")
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise ValueError(f"${LOG_EVERY_ENV}={text!r} is not a number of seconds >= 0: set it "
                         f"to e.g. 30 (the default), 0 for a line at every step, or unset it")
    return seconds


class CellProgress:
    """The running cell's progress, called by the model after each batch.

    On a terminal nothing is shown for cells that finish within ``after`` seconds, then the
    line is refreshed at most every half second. A log gets a line only for a cell still running
    after ``log_every`` seconds, then at most one every ``log_every`` seconds, and none at its
    end: the whole-run line reports finished cells, and a line per cell would bury it.
    Lines go to ``board``, the session's (``Evaluator.progress`` hands it over), else to
    ``stream`` or stderr.
    """

    def __init__(self, label: str | None = None, stream: TextIO | None = None,
                 after: float = 3.0, log_every: float | None = None,
                 board: Board | None = None) -> None:
        self.label = current().label if label is None else label  # the cell this thread measures
        self.board: Board = StreamBoard(stream) if stream is not None else (
            board or StreamBoard(sys.__stderr__ or sys.stderr))
        self.after = after
        self.log_every = log_seconds() if log_every is None else log_every
        self.started = time.perf_counter()
        self._last = -float("inf")
        self._live = False
        self._counts = (0, 0)
        self._moved = self.started
        """When the counts (cases done, tokens) last changed."""

    def __call__(self, done: int, total: int, tokens: int, seconds: float) -> None:
        """After each batch, and every second while the model works on one (the counts then
        stand still, and the line says how long the cell has waited)."""
        now = time.perf_counter()
        if (done, tokens) != self._counts:
            self._counts, self._moved = (done, tokens), now
        interactive = self.board.interactive
        if now - self.started < (self.after if interactive else self.log_every):
            return
        if not interactive and done == total:
            return
        if now - self._last < (0.5 if interactive else self.log_every) and done < total:
            return
        self._last = now
        waited = now - self._moved
        rate = tokens / seconds if seconds > 0 else 0.0
        waiting = f", waiting {waited:.0f} s for the model" if waited >= WAITING_SECONDS else ""
        self.board.cell(self.label, f"{done}/{total} cases, {rate:,.0f} tok/s{waiting}")
        self._live = True

    def close(self) -> None:
        if self._live:
            self.board.cell_done()
            self._live = False
