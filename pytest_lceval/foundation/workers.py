"""Which xdist process this is, read in one place.

xdist exports the worker's id and the worker count before the worker's pytest configures, so the
environment answers everywhere, with or without a ``config`` at hand, and the same way in the
worker's ``pytest_configure`` as in a test.
"""

from __future__ import annotations

import os

WORKER_ENV = "PYTEST_XDIST_WORKER"
WORKER_COUNT_ENV = "PYTEST_XDIST_WORKER_COUNT"


def worker_id() -> str | None:
    """'gw0', 'gw1', ... in an xdist worker; None in the controller or a plain run."""
    return os.environ.get(WORKER_ENV) or None


def worker_label() -> str:
    """The id for progress lines: the worker's, or 'main' outside workers."""
    return worker_id() or "main"


def worker_count() -> int:
    """How many workers share this machine (1 without xdist)."""
    return max(1, int(os.environ.get(WORKER_COUNT_ENV, "1")))
