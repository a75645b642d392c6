"""pytest wiring of LongScore: options, the criterion, the suite-level mean gate, the summary."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ....foundation.grid import format_length
from ....report.finding import Finding, percent
from ....report.section import SummarySection
from ....results.cells import CellResult, Judgement
from ....run.suite import suites_of
from ....settings import SETTINGS, Settings
from .config import LongScoreSettings, add_options, resolve
from .criterion import CRITERION, LongScoreCriterion
from .summary import verdict_section, write_summaries

LONGSCORE = pytest.StashKey[LongScoreSettings]()
MEAN_GATE = "longscore_mean"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl
def pytest_lceval_configure(config: pytest.Config, settings: Settings) -> None:
    config.stash[LONGSCORE] = resolve(config, settings.grid.reduced)


@pytest.hookimpl
def pytest_lceval_criteria(config: pytest.Config) -> list[LongScoreCriterion]:
    if LONGSCORE not in config.stash:
        return []
    core = config.stash[SETTINGS]
    suites = suites_of(config)
    return [LongScoreCriterion(config.stash[LONGSCORE], core.lengths, core.seed,
                               lambda suite, task: suites[suite].task(task))]


def pytest_report_header(config: pytest.Config) -> list[str]:
    if LONGSCORE not in config.stash:
        return []
    return [f"lceval: longscore {config.stash[LONGSCORE].describe()}"]


@pytest.hookimpl
def pytest_lceval_suite_verdict(config: pytest.Config, suite: str,
                                results: list[CellResult]) -> list[Judgement] | None:
    """--longscore-mean-min: the mean LongScore of the suite's long cells, where defined."""
    settings = config.stash.get(LONGSCORE, None)
    if settings is None or settings.mean_minimum is None:
        return None
    values = [r.metrics["longscore"] for r in results
              if isinstance(r.metrics.get("longscore"), (int, float))
              and math.isfinite(r.metrics["longscore"])]
    long_cells = sum(r.metrics.get("longscore_role") == "long" for r in results)
    rule = (f"the mean LongScore of the suite's long cells is at least "
            f"{settings.mean_minimum:+g}% (--longscore-mean-min)")
    if not long_cells:  # LongScore does not apply to the suite (or it had no cells)
        return [Judgement(MEAN_GATE, True, f"{suite}: not applied: the suite has no long "
                          f"cells LongScore judges", {"criterion": CRITERION}, rule=rule,
                          applied=False)] if results else None
    mean = sum(values) / len(values) if values else math.nan
    passed = bool(values) and mean >= settings.mean_minimum
    shown = f"{mean:+.1f}%" if values else "undefined"
    message = (f"{suite}: mean LongScore {shown} over {len(values)} of {long_cells} long cells "
               f"{'>=' if passed else '<'} --longscore-mean-min {settings.mean_minimum:+g}%")
    return [Judgement(MEAN_GATE, passed, message,
                      {"longscore_mean": None if not values else round(mean, 3),
                       "longscore_mean_min": settings.mean_minimum, "criterion": CRITERION},
                      rule=rule)]


@pytest.hookimpl
def pytest_lceval_session_finish(config: pytest.Config, run_dir: Path,
                                 results: list[CellResult]) -> None:
    settings = config.stash.get(LONGSCORE, None)
    if settings is None:
        return
    lengths = ",".join(format_length(n) for n in settings.base_lengths)
    written = write_summaries(run_dir, results, lengths, settings.minimum, settings.base)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for path in written:
            reporter.write_line(f"lceval: LongScore summary {path.name}")
            for line in path.read_text(encoding="utf-8").splitlines()[4:7]:
                reporter.write_line("  " + line)


@pytest.hookimpl
def pytest_lceval_summary_section(config: pytest.Config,
                                  results: list[CellResult]) -> SummarySection | None:
    """summary.md's LongScore block (Table-7 row per suite, the cells it failed)."""
    settings = config.stash.get(LONGSCORE, None)
    if settings is None:
        return None
    return verdict_section(results, settings.minimum, settings.base)


@pytest.hookimpl
def pytest_lceval_finding(result: CellResult) -> Finding | None:
    """A long cell whose LongScore fell: failed ones after the failed cells of a suite's own
    test, passed ones after every failed cell, the biggest drop first."""
    lc = result.metrics.get("longscore")
    if (math.isnan(result.score) or result.metrics.get("longscore_role") != "long"
            or lc is None or lc >= 0):
        return None
    failed = result.outcome == "failed"
    return Finding(result, ("FAIL, " if failed else "") + f"LongScore {lc:+.1f}%, score "
                           f"{percent(result.score)}", True, (3 if failed else 5, 0, float(lc)))


@pytest.hookimpl
def pytest_lceval_undefined(result: CellResult) -> str | None:
    """'LC' where the cell's LongScore is undefined (its base below the floor)."""
    return "LC" if result.metrics.get("longscore_undefined") else None


@pytest.hookimpl
def pytest_lceval_report_artifacts() -> list[tuple[str, str, str | None]]:
    return [("longscore", "LongScore", "longbench100")]
