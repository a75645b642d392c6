"""--lceval-fetch: the controller fetches what the named suites read before any worker starts
or any grid is built, and the run reads it after --lceval-data's folders
(``Settings.fetched_data``); xdist workers only point at the folder. The releases, and the
families' own fetch flags, come from the plugins that declare them (``pytest_lceval_releases``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ..run.writable import check_writable
from ..settings import FETCHED_DATA, lookup
from .catalog import Release, default_dest, select
from .declared import releases_of
from .download import MIRROR_ENV, FetchError, FetchInterrupted, fetch, plan


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-fetch", dest="lceval_fetch", action="append", default=None,
                    metavar="NAMES",
                    help="first download what these suites (or data sets, which python -m "
                         "pytest_lceval.fetch --help lists; or all) read into "
                         "--lceval-fetch-dir, with a plan and progress, and read it after "
                         "--lceval-data; comma list")
    group.addoption("--lceval-fetch-dir", dest="lceval_fetch_dir", default=None,
                    help=f"data directory the fetch fills (default {default_dest()})")
    group.addoption("--lceval-fetch-mirror", dest="lceval_fetch_mirror", default=None,
                    help=f"read plain URLs from MIRROR/<host>/<path> (env {MIRROR_ENV}); hub "
                         f"files follow HF_ENDPOINT")
    parser.addini("lceval_fetch", "default --lceval-fetch", type="string")
    parser.addini("lceval_fetch_dir", "default --lceval-fetch-dir", type="string")


def _names(config: pytest.Config, releases: tuple[Release, ...]) -> list[str]:
    """--lceval-fetch's names (or its ini default), then each release whose family's own flag
    is set."""
    value, _ = lookup(config, "lceval_fetch")
    items = value if isinstance(value, list) else [value] if value else []
    names = [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    return names + [release.name for release in releases
                    if release.flag and config.getoption(release.flag)]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """First (tryfirst): the core's settings and Task Haystack's options read the fetched
    folder, so it must be complete before they resolve."""
    releases = releases_of(config.pluginmanager)
    names = _names(config, releases)
    if not names:
        return
    dest_value, _ = lookup(config, "lceval_fetch_dir")
    dest = Path(dest_value).expanduser() if dest_value else default_dest()
    if not hasattr(config, "workerinput"):
        check_writable(dest, "--lceval-fetch-dir")
        mirror = config.getoption("lceval_fetch_mirror") or os.environ.get(MIRROR_ENV)
        try:
            the_plan = plan(select(releases, names), dest)
            for line in the_plan.lines():
                _say(line)
            fetch(the_plan, _say, mirror)
        except (ValueError, FetchError) as exc:
            raise pytest.UsageError(f"pytest-lceval: --lceval-fetch: {exc}") from None
        except FetchInterrupted as exc:  # the run ends as on any Ctrl-C, the fetch said in a line
            _say(f"pytest-lceval: --lceval-fetch interrupted: {exc}; run again to resume")
            raise
    config.stash[FETCHED_DATA] = dest.resolve()


def _say(line: str) -> None:
    """Before pytest's terminal reporter exists: straight to stderr."""
    print(line, file=sys.stderr, flush=True)
