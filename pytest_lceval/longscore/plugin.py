"""pytest wiring of LongScore: options, the judge hook, the threshold hand-over, the summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..grid import format_length
from ..results import CellResult
from ..verdicts import ThresholdCriterion
from .config import LongScoreSettings, add_options, resolve
from .criterion import LongScoreCriterion
from .summary import write_summaries

LONGSCORE = pytest.StashKey[LongScoreSettings]()
PLUGIN_NAME = "lceval-longscore"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """After the core's configure (trylast): it needs the resolved Settings and the threshold
    criterion, to which it hands the long cells when --longscore-min is set."""
    from ..plugin import SETTINGS

    if SETTINGS not in config.stash:
        return
    settings = resolve(config, config.stash[SETTINGS].grid.reduced)
    config.stash[LONGSCORE] = settings
    criterion = LongScoreCriterion(settings, config.stash[SETTINGS].lengths)
    config.pluginmanager.register(criterion, PLUGIN_NAME)
    threshold = config.pluginmanager.get_plugin("lceval-threshold")
    if isinstance(threshold, ThresholdCriterion):
        threshold.defer_when(criterion.takes_over)


def pytest_report_header(config: pytest.Config) -> list[str]:
    if LONGSCORE not in config.stash:
        return []
    return [f"lceval: longscore {config.stash[LONGSCORE].describe()}"]


@pytest.hookimpl
def pytest_lceval_session_finish(config: pytest.Config, run_dir: Path,
                                 results: list[CellResult]) -> None:
    settings = config.stash.get(LONGSCORE, None)
    if settings is None:
        return
    lengths = ",".join(format_length(n) for n in settings.base_lengths)
    written = write_summaries(run_dir, results, lengths, settings.minimum)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for path in written:
            reporter.write_line(f"lceval: LongScore summary {path.name}")
            for line in path.read_text(encoding="utf-8").splitlines()[4:7]:
                reporter.write_line("  " + line)
