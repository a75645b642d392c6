"""Shared test configuration for the plugin's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import shared_data  # noqa: F401  (reads $LCEVAL_DATA before the fixture below removes it)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "real_model: loads a real preset model (slow; converts it on first use)")


@pytest.fixture(autouse=True)
def _hermetic_data_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Inner pytest runs see no data directory unless a test passes --lceval-data."""
    monkeypatch.delenv("LCEVAL_DATA", raising=False)
    yield
