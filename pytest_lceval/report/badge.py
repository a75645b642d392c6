"""SVG badges, per run (``badge.svg``) and per suite (``badge-<suite>.svg``): the pass rate of
the judged cells, green when none failed and red when any did (the CI gate's own colours).

Drawn by ``anybadge`` (pure Python, no network, no font files to measure with); a run without it
installed gets no badge and one line saying which package to install.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ..results import CellResult
from .summary import Tally, percent, summarize

BADGE = "badge"
PASS_COLOUR = "#4c1"
FAIL_COLOUR = "#e05d44"
NONE_COLOUR = "#9f9f9f"


def badge_text(tally: Tally) -> tuple[str, str]:
    """(value, colour) of a badge: '93% (42/45)' in red when any cell failed."""
    if tally.judged == 0:
        return "no cells judged", NONE_COLOUR
    colour = PASS_COLOUR if tally.failed == 0 else FAIL_COLOUR
    return f"{percent(tally.pass_rate)} ({tally.passed}/{tally.judged})", colour


def badge_svg(label: str, tally: Tally) -> str:
    import anybadge

    value, colour = badge_text(tally)
    # anybadge writes text into the SVG unescaped; labels are suite names, kept to safe chars.
    label = re.sub(r"[^A-Za-z0-9_. -]", "_", label)
    badge = anybadge.Badge(label, value, default_color=colour)
    return str(badge.badge_svg_text)


def badge_path(run_dir: Path, suite: str | None = None) -> Path:
    return run_dir / (f"{BADGE}-{suite}.svg" if suite else f"{BADGE}.svg")


def write_badges(run_dir: Path, results: list[CellResult]) -> list[Path]:
    summary = summarize(run_dir.name, results)
    written = []
    for suite, tally in [(None, summary.total), *((t.name, t) for t in summary.suites)]:
        path = badge_path(run_dir, suite)
        path.write_text(badge_svg(f"lceval {suite}" if suite else "lceval", tally),
                        encoding="utf-8")
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
