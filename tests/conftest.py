"""Shared test configuration for the plugin's own tests."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "real_model: loads a real preset model (slow; converts it on first use)")
