"""The toy task and its one-test suite, as source text for inner (pytester) runs."""

from __future__ import annotations

from pathlib import Path

TOY_TASK = (Path(__file__).parent / "toy_task.py").read_text()
"""A conftest registering the toy task (suite 'toy')."""
SUITE = """
import pytest

pytestmark = pytest.mark.lceval(suite="toy")


def test_cell(lc_cell, lc_eval):
    lc_eval.check(lc_eval.run(lc_cell))
"""
