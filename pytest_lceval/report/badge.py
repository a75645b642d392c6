"""SVG badges, per run (``badge.svg``) and per suite (``badge-<suite>.svg``): the pass rate of
the judged cells, in the colour of the run's verdict (``verdicts/verdict.py``): green only when
it passed, red when a cell or a suite gate failed ('1 gate failed, 100% (2/2)'), orange when
the run is incomplete ('incomplete, 100% (12/12)': cells never ran). In a run compared with a
saved one the badge leads with the regressions ('3 regressed, 56% (87/156)', labelled 'lceval
vs base'), as the headline does.

Drawn by ``anybadge`` (pure Python, no network, no font files to measure with); a run without it
installed gets no badge and one line saying which package to install.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ..results.cells import CellResult
from ..results.whole_file import write_whole
from ..verdicts.verdict import INCOMPLETE, RunVerdict
from .summary import RunSummary, Tally, gate_regressions, percent, regressed_count, summarize

BADGE = "badge"
PASS_COLOUR = "#4c1"
FAIL_COLOUR = "#e05d44"
INCOMPLETE_COLOUR = "#fe7d37"
NONE_COLOUR = "#9f9f9f"


def badge_text(tally: Tally, regressed: int | None = None, failed_gates: int = 0,
               incomplete: bool = False) -> tuple[str, str]:
    """(value, colour) of a badge: '93% (42/45)' in red when any cell or ``failed_gates``
    failed ('1 gate failed, 100% (2/2)'); with a comparison, '2 regressed, 93% (42/45)'; an
    ``incomplete`` run's in orange, 'incomplete, 100% (12/12)'."""
    value = f"{percent(tally.pass_rate)} ({tally.passed}/{tally.judged})" if tally.judged \
        else "no cells judged"
    if regressed is not None:
        value = f"{regressed} regressed, {value}"
    if failed_gates:
        value = f"{failed_gates} {'gate' if failed_gates == 1 else 'gates'} failed, {value}"
    if incomplete:
        return f"incomplete, {value}", INCOMPLETE_COLOUR
    if tally.failed or regressed or failed_gates:
        return value, FAIL_COLOUR
    return value, PASS_COLOUR if tally.judged else NONE_COLOUR


def badge_svg(label: str, tally: Tally, regressed: int | None = None, failed_gates: int = 0,
              incomplete: bool = False) -> str:
    import anybadge

    value, colour = badge_text(tally, regressed, failed_gates, incomplete)
    # anybadge writes text into the SVG unescaped; labels are suite and baseline names, kept
    # to safe chars.
    label = re.sub(r"[^A-Za-z0-9_. -]", "_", label)
    badge = anybadge.Badge(label, value, default_color=colour)
    return str(badge.badge_svg_text)


def _regressed(summary: RunSummary, suite: str | None) -> int | None:
    """What the comparison's gates found regressed (the headline's count), not the cells' own
    rows: the badge's colour is the verdict's."""
    if not summary.baseline:
        return None
    return regressed_count(gate_regressions(summary, suite))


def badge_path(run_dir: Path, suite: str | None = None) -> Path:
    return run_dir / (f"{BADGE}-{suite}.svg" if suite else f"{BADGE}.svg")


def write_badges(run_dir: Path, results: list[CellResult],
                 verdict: RunVerdict | None = None) -> list[Path]:
    """The run's badge and each suite's, in the colours of ``verdict`` (the run's; without one,
    of the cells alone)."""
    summary = summarize(run_dir.name, results, verdict=verdict)
    versus = f" vs {summary.baseline}" if summary.baseline else ""
    incomplete = summary.verdict.outcome == INCOMPLETE
    written = []
    for suite, tally in [(None, summary.total), *((t.name, t) for t in summary.suites)]:
        path = badge_path(run_dir, suite)
        label = (f"lceval {suite}" if suite else "lceval") + versus
        gates = summary.verdict.failed_gates
        failed_gates = sum(suite is None or gate.suite == suite for gate in gates)
        write_whole(path, badge_svg(label, tally, _regressed(summary, suite), failed_gates,
                                    incomplete))
        written.append(path)
    return written


@pytest.hookimpl
def pytest_lceval_verdict_reports(config: pytest.Config, run_dir: Path,
                                  results: list[CellResult], verdict: RunVerdict) -> None:
    try:
        write_badges(run_dir, results, verdict)
    except ImportError:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("lceval: no badge drawn: pip install anybadge "
                                "(or pytest-lceval[report])")
