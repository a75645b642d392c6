"""What a plugin's own verdict adds to ``summary.md`` and ``summary.json``: the record plugins
return from ``pytest_lceval_summary_section``. A PR comment has to carry what decided the run
(LongScore's Table-7 row and the cells it failed, Task Haystack's FAIL list with its t-tests),
and only the plugin that gives that verdict can read it. It imports no plugin, so a benchmark's
plugin can import it wherever it stands in the plugin list."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LISTED = 10
"""Failed cells a section names in summary.md; summary.json lists every one."""


@dataclass(frozen=True)
class SummarySection:
    """A titled block of markdown for summary.md and its numbers for summary.json."""

    key: str
    """Its name in summary.json's ``sections`` (e.g. 'longscore')."""
    title: str
    lines: tuple[str, ...]
    """Markdown, without the title."""
    data: dict[str, Any] = field(default_factory=dict)
    """Every number behind the lines, every failed cell included."""


def listed(names: list[str], key: str) -> str:
    """The first LISTED of ``names`` joined, and where the rest are: '..., and 3 more in
    summary.json (sections.longscore)'."""
    more = len(names) - LISTED
    return "; ".join(names[:LISTED]) + (
        f"; and {more} more in summary.json (`sections.{key}`)" if more > 0 else "")
