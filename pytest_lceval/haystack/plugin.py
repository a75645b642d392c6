"""Task Haystack's pytest wiring: options, and the suite and criterion it registers (its data is
fetched by --lceval-fetch llicl, or --haystack-fetch)."""

from __future__ import annotations

import pytest

from ..settings import SETTINGS
from . import config as haystack_config
from .suite import HaystackSuite, TTestCriterion

HAYSTACK = pytest.StashKey[haystack_config.HaystackSettings]()


def pytest_addoption(parser: pytest.Parser) -> None:
    haystack_config.add_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Resolve after the core plugin (trylast): its settings are in the stash by then."""
    core = config.stash[SETTINGS]
    settings = haystack_config.resolve(config, core)
    config.stash[HAYSTACK] = settings
    for length in settings.lengths:
        config.addinivalue_line(
            "markers", f"len_{length.label}: Task Haystack cells with {length.n_task} tasks x "
                       f"{length.n_shot} shots per class")


@pytest.hookimpl
def pytest_lceval_suites(config: pytest.Config) -> list[HaystackSuite]:
    return [HaystackSuite(config.stash[HAYSTACK])] if HAYSTACK in config.stash else []


@pytest.hookimpl
def pytest_lceval_criteria(config: pytest.Config) -> list[TTestCriterion]:
    return [TTestCriterion()]

