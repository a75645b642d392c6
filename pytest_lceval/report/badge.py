"""SVG badges, per run (``badge.svg``) and per suite (``badge-<suite>.svg``): the pass rate of
the judged cells, green when none failed and red when any did (the CI gate's own colours). In a
run compared with a saved one the badge leads with the regressions ('3 regressed, 56%
(87/156)', labelled 'lceval vs base'), as the headline does.

Drawn by ``anybadge`` (pure Python, no network, no font files to measure with); a run without it
installed gets no badge and one line saying which package to install.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ..results.cells import CellResult
from .summary import RunSummary, Tally, percent, summarize

BADGE = "badge"
PASS_COLOUR = "#4c1"
FAIL_COLOUR = "#e05d44"
NONE_COLOUR = "#9f9f9f"


def badge_text(tally: Tally, regressed: int | None = None) -> tuple[str, str]:
    """(value, colour) of a badge: '93% (42/45)' in red when any cell failed; with a
    comparison, '2 regressed, 93% (42/45)'."""
    if tally.judged == 0:
        return "no cells judged", NONE_COLOUR
    colour = PASS_COLOUR if tally.failed == 0 and not regressed else FAIL_COLOUR
    value = f"{percent(tally.pass_rate)} ({tally.passed}/{tally.judged})"
    return (value if regressed is None else f"{regressed} regressed, {value}"), colour


def badge_svg(label: str, tally: Tally, regressed: int | None = None) -> str:
    import anybadge

    value, colour = badge_text(tally, regressed)
    # anybadge writes text into the SVG unescaped; labels are suite and baseline names, kept
    # to safe chars.
    label = re.sub(r"[^A-Za-z0-9_. -]", "_", label)
    badge = anybadge.Badge(label, value, default_color=colour)
    return str(badge.badge_svg_text)


def _regressed(summary: RunSummary, suite: str | None) -> int | None:
    if not summary.baseline:
        return None
    return sum(d.status == "regressed" for d in summary.deltas
               if suite is None or d.suite == suite)


def badge_path(run_dir: Path, suite: str | None = None) -> Path:
    return run_dir / (f"{BADGE}-{suite}.svg" if suite else f"{BADGE}.svg")


def write_badges(run_dir: Path, results: list[CellResult]) -> list[Path]:
    summary = summarize(run_dir.name, results)
    versus = f" vs {summary.baseline}" if summary.baseline else ""
    written = []
    for suite, tally in [(None, summary.total), *((t.name, t) for t in summary.suites)]:
        path = badge_path(run_dir, suite)
        label = (f"lceval {suite}" if suite else "lceval") + versus
        path.write_text(badge_svg(label, tally, _regressed(summary, suite)), encoding="utf-8")
        written.append(path)
    return written


@pytest.hookimpl
def pytest_lceval_session_finish(config: pytest.Config, run_dir: Path,
                                 results: list[CellResult]) -> None:
    try:
        write_badges(run_dir, results)
    except ImportError:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("lceval: no badge drawn: pip install anybadge "
                                "(or pytest-lceval[report])")
