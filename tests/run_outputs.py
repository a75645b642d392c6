"""What an inner (pytester) run left in its run folder, for the plugin's own tests."""

from __future__ import annotations

import json
from typing import Any

import pytest


def read_results(pytester: pytest.Pytester, run: str) -> list[dict[str, Any]]:
    """The rows of ``reports/<run>/results.jsonl``, one per cell."""
    path = pytester.path / "reports" / run / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]
