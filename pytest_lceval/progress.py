"""Progress of slow cells on the terminal, without breaking pytest's output or xdist.

Lines go to the real stderr (outside pytest's capture). On a terminal one line is rewritten in
place and erased at the end; elsewhere (CI logs, xdist workers) a full line is printed at most
every ``log_every`` seconds. Nothing is printed for cells that finish within ``after`` seconds.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class CellProgress:
    def __init__(self, label: str, stream: TextIO | None = None, after: float = 3.0,
                 log_every: float = 15.0) -> None:
        self.label = label
        self.stream = stream or sys.__stderr__ or sys.stderr
        self.after = after
        self.log_every = log_every
        self.started = time.perf_counter()
        self._last = -float("inf")
        self._live = False
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, done: int, total: int, tokens: int, seconds: float) -> None:
        now = time.perf_counter()
        if now - self.started < self.after:
            return
        every = 0.5 if self.interactive else self.log_every
        if now - self._last < every and done < total:
            return
        self._last = now
        rate = tokens / seconds if seconds > 0 else 0.0
        text = f"{self.label}: {done}/{total} cases, {rate:,.0f} tok/s"
        if self.interactive:
            self.stream.write("\r\x1b[2K" + text)
            self._live = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._live = False
