"""The built-in registry's answer to ``pytest_lceval_make_backend``: a plugin module of its own,
so that pytest imports it as a plugin before anything else does (its asserts get rewritten)."""

from __future__ import annotations

import pytest

from .base import Backend
from .options import LoadOptions
from .registry import ModelSpec, load_backend


@pytest.hookimpl(trylast=True)
def pytest_lceval_make_backend(spec: ModelSpec, options: LoadOptions) -> Backend | None:
    """The built-in answer, asked after every other plugin's; None for a spec it does not know,
    which the caller reports as unknown."""
    return load_backend(spec, options) if spec.builtin else None
