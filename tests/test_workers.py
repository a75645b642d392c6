"""The one reader of which xdist process this is."""

from __future__ import annotations

import pytest

from pytest_lceval.foundation.workers import worker_count, worker_id, worker_label


def test_outside_xdist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert (worker_id(), worker_label(), worker_count()) == (None, "main", 1)


def test_in_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    assert (worker_id(), worker_label(), worker_count()) == ("gw3", "gw3", 4)
