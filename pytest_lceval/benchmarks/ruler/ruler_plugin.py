"""RULER's pytest wiring: the options that choose which RULER the recall suite follows, and the
release it reads, declared to the fetch."""

from __future__ import annotations

import pytest

from ...fetch.catalog import Release
from .common import RULER_CODES
from .releases import ESSAYS
from .tasks import PLACEMENTS


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-niah-placement", dest="lceval_niah_placement", default=None,
                    choices=PLACEMENTS,
                    help="where the NIAH tasks put the queried needle: at each --depths "
                         "(default), or at a depth sampled per case as RULER does (no depth "
                         "axis)")
    group.addoption("--lceval-ruler", dest="lceval_ruler", default=None, choices=RULER_CODES,
                    help="the NVIDIA/RULER commit whose generators vt, cwe and fwe follow: "
                         "f682453 (July 2024, which generated HELMET's recall files; default) "
                         "or c3f5e3b (RULER's generators as rewritten in 2025)")


@pytest.hookimpl
def pytest_lceval_releases() -> list[Release]:
    return [ESSAYS]
