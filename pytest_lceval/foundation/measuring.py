"""The cell the current thread measures, for the code below a suite that must tell cells apart:
the cell's label on progress lines (``run/progress.py``), where the thread's model asks go
(lookahead's shared batches, ``models/stored.py``) and whether the store may make the thread wait
for another process's computation (``store/database.py``).

Why a thread-local (the package's one for the run loop): lookahead (``run/lookahead.py``)
measures the cells of a window each in a thread of its own, through the public
``Suite.measure(cell, evaluator)``. What differs per cell is read deep inside suite, task, judge
and backend code, out-of-tree suites' included, that is handed only the cell and the session's
evaluator; there the thread is what tells the cells apart. So the cell's context rides on its
thread: set in one place (``measuring``, by the run loop), read only through ``current``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol


class Gatherer(Protocol):
    """Takes a thread's model asks instead of having them answered at once (lookahead's
    ``Gather``); ``model`` is the ``models.stored.StoredModel`` asked."""

    def ask(self, model: Any, kind: str, requests: Sequence[Any],
            progress: Any) -> list[Any]: ...


@dataclass(frozen=True)
class Measuring:
    """What the thread that measures a cell carries."""

    label: str = "cell"
    """The cell on progress lines: '[gw0] suites/test_recall.py::test_recall[json_kv-4k-50]'."""
    gatherer: Gatherer | None = None
    """Where the thread's stored-model asks go; None: each is answered at once."""
    waits: bool = True
    """False: the store's ``compute_once`` raises ``filelock.Timeout`` instead of waiting for a
    value another holder of its lock computes (a lookahead thread runs while the others are
    paused, and must never block on one of them)."""


NOT_MEASURING = Measuring()
_thread = threading.local()


def current() -> Measuring:
    """What this thread carries (``NOT_MEASURING`` outside a cell)."""
    found: Measuring = getattr(_thread, "measuring", NOT_MEASURING)
    return found


@contextmanager
def measuring(*, label: str | None = None, gatherer: Gatherer | None = None,
              waits: bool | None = None) -> Iterator[Measuring]:
    """Within the block, this thread carries what is given here and what it carried before."""
    previous = current()
    now = Measuring(previous.label if label is None else label,
                    previous.gatherer if gatherer is None else gatherer,
                    previous.waits if waits is None else waits)
    _thread.measuring = now
    try:
        yield now
    finally:
        _thread.measuring = previous
