"""A task's stop at the first newline, and the run's choice to honour it.

HELMET's configs say ``stop_new_line: true`` for RAG, re-ranking and ICL, but its released
``arguments.py`` never reads the key, so its published numbers come from answers that do not stop
there (``--lceval-stop-newline=released``, the default); ``config`` gives the configs' intent. A
task of any benchmark says what its config would with a boolean ``stop_new_line`` attribute;
tasks without one are never touched.
"""

from __future__ import annotations

from dataclasses import replace

from ..results.records import Case

STOP_CHOICES = ("released", "config")
"""``--lceval-stop-newline``: HELMET's released code (never), or its configs' intent."""
NEWLINE = "\n"

def config_stops_at_newline(task: object) -> bool | None:
    """The task's ``stop_new_line`` (as HELMET's configs have it), None where it has none."""
    value = getattr(task, "stop_new_line", None)
    return value if isinstance(value, bool) else None


def with_stops(cases: list[Case], task: object, choice: str) -> list[Case]:
    """``cases`` with the newline stop that ``choice`` gives ``task``: none under
    ``released``; under ``config`` a stop at the first newline where HELMET's config asks it."""
    if choice not in STOP_CHOICES:
        raise ValueError(f"stop choice must be one of {STOP_CHOICES}, not {choice!r}")
    if choice == "released" or not config_stops_at_newline(task):
        return cases
    return [case if NEWLINE in case.stop else replace(case, stop=(*case.stop, NEWLINE))
            for case in cases]
