"""HELMET's data wiring: the releases its suites read, declared to the fetch, and
``--helmet-fetch``, the flag that fetches HELMET's archive alone."""

from __future__ import annotations

import pytest

from ...fetch.catalog import Release
from .releases import ARCHIVE, RELEASES


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("lceval").addoption(
        "--helmet-fetch", dest=ARCHIVE.flag, action="store_true", default=None,
        help=f"the same as --lceval-fetch {ARCHIVE.name} (HELMET's data.tar.gz from the hub, "
             f"several GB, and its ALCE prompt files)")


@pytest.hookimpl
def pytest_lceval_releases() -> list[Release]:
    return list(RELEASES)
