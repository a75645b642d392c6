"""Task Haystack's pytest wiring: options, the suite and criterion it registers, and its data's
release, declared to the fetch (fetched by --lceval-fetch llicl, or --haystack-fetch)."""

from __future__ import annotations

import math

import pytest

from ...fetch.catalog import Release
from ...report.finding import Finding, fixed, percent
from ...report.section import SummarySection
from ...results.cells import CellResult
from ...settings import Settings
from . import config as haystack_config
from .metrics import HaystackMetrics
from .releases import LLICL
from .report import verdict_section
from .suite import HaystackSuite, TTestCriterion
from .verdict import FAIL

HAYSTACK = pytest.StashKey[haystack_config.HaystackSettings]()


def pytest_addoption(parser: pytest.Parser) -> None:
    haystack_config.add_options(parser)
    parser.getgroup("lceval").addoption(
        "--haystack-fetch", dest=LLICL.flag, action="store_true", default=None,
        help=f"the same as --lceval-fetch {LLICL.name} (Task Haystack's public data)")


@pytest.hookimpl
def pytest_lceval_releases() -> list[Release]:
    return [LLICL]


@pytest.hookimpl
def pytest_lceval_configure(config: pytest.Config, settings: Settings) -> None:
    haystack = haystack_config.resolve(config, settings)
    config.stash[HAYSTACK] = haystack
    for length in haystack.lengths:
        config.addinivalue_line(
            "markers", f"len_{length.label}: Task Haystack cells with {length.n_task} tasks x "
                       f"{length.n_shot} shots per class")


@pytest.hookimpl
def pytest_lceval_suites(config: pytest.Config) -> list[HaystackSuite]:
    return [HaystackSuite(config.stash[HAYSTACK])] if HAYSTACK in config.stash else []


@pytest.hookimpl
def pytest_lceval_criteria(config: pytest.Config) -> list[TTestCriterion]:
    return [TTestCriterion()]



@pytest.hookimpl
def pytest_lceval_finding(result: CellResult) -> Finding | None:
    """The paired t-test decides a Task Haystack cell: FAILs first, the most negative t first."""
    haystack = HaystackMetrics.of(result)
    if haystack is None:
        return None
    fail = haystack.verdict == FAIL
    t = math.inf if math.isnan(haystack.t) else haystack.t  # an undefined t ranks last
    return Finding(result, f"{haystack.verdict}, stream index {haystack.stream_index}, "
                           f"L-acc {percent(haystack.l_acc)} vs S-acc {percent(haystack.s_acc)}, "
                           f"t {fixed(haystack.t, 2)}", fail, (2 if fail else 7, 0, t))


@pytest.hookimpl
def pytest_lceval_summary_section(results: list[CellResult]) -> SummarySection | None:
    """summary.md's Task Haystack block: pass rates and every FAIL with S-acc, L-acc, t, p."""
    return verdict_section(results)


@pytest.hookimpl
def pytest_lceval_report_artifacts() -> list[tuple[str, str, str | None]]:
    return [("haystack", "Task Haystack", "task_haystack")]
