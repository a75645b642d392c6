"""Which cells a run selects: task names must exist, and a run that selects no cell fails.

A typo in ``--lceval-tasks`` used to leave every grid empty, which pytest reports as skipped
("got empty parameter set"), exit 0: a CI gate turned green. Here every task named by
``--lceval-tasks`` or a per-task threshold must be known to some suite (usage error with close
matches otherwise), and when the grids of every collected suite are empty, the run fails with
the reason. A suite whose grid is empty while another's is not (``--lceval-tasks`` naming recall
tasks only, say) just has no cells: its placeholder test is dropped and reported as deselected.
``-k``/``-m`` deselection is untouched: it comes after the grids.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import pytest

from ..foundation.grid import Cell
from ..settings import Settings
from .generation_suite import NEEDS_JUDGE
from .suite import Suite, suites_of

NO_CELLS_MARK = "lceval_no_cells"
"""Marks the placeholder test that stands for a suite whose grid is empty."""
GRIDS = pytest.StashKey[list["Grid"]]()
_FAILURE = pytest.StashKey[str]()
"""The reason the kept placeholder fails with."""


@dataclass(frozen=True)
class Grid:
    """One suite test's grid as collected: how many cells, and why none if so."""

    suite: str
    cells: int
    reason: str
    left_out: tuple[tuple[str, str], ...] = ()
    """Tasks of the suite that have no cells, and the data each needs."""


def known_task_names(config: pytest.Config) -> set[str]:
    """The tasks every suite of the session knows."""
    names: set[str] = set()
    for suite in suites_of(config).values():
        names.update(suite.task_names())
    return names


def check_task_names(settings: Settings, known: set[str]) -> None:
    """Every task named by --lceval-tasks or a per-task threshold must exist."""
    for option, names in (("--lceval-tasks", settings.tasks),
                          ("--lceval-threshold", tuple(settings.task_thresholds))):
        unknown = [name for name in names if name not in known]
        if unknown:
            raise pytest.UsageError(
                f"pytest-lceval: {option}: unknown task(s) {_with_hints(unknown, known)}. "
                f"A task of your own is declared by its suite, returned from a "
                f"pytest_lceval_suites hook in a conftest.py or plugin")


def _with_hints(unknown: list[str], known: set[str]) -> str:
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=3)
        parts.append(repr(name) + (f" (did you mean {' or '.join(close)}?)" if close else ""))
    return ", ".join(parts)


def parametrize(metafunc: pytest.Metafunc, suite: Suite, cells: list[Cell],
                settings: Settings) -> None:
    """Parametrize ``lc_cell`` over ``cells``; an empty grid gets one placeholder instead of
    pytest's 'empty parameter set' skip, so that collection can judge the run as a whole."""
    metafunc.config.stash.setdefault(GRIDS, []).append(
        Grid(suite.name, len(cells), suite.why_empty(settings),
             tuple(suite.left_out(settings).items())))
    if cells:
        metafunc.parametrize("lc_cell", [
            pytest.param(cell, id=cell.id, marks=[
                getattr(pytest.mark, cell.suite), getattr(pytest.mark, cell.length_mark)])
            for cell in cells])
    else:
        marker = getattr(pytest.mark, NO_CELLS_MARK)(suite=suite.name)
        metafunc.parametrize("lc_cell", [pytest.param(None, id="no-cells", marks=[marker])])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{NO_CELLS_MARK}(suite): stands for an empty grid")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the placeholders when some grid has cells; otherwise keep one, which fails."""
    placeholders = [item for item in items if item.get_closest_marker(NO_CELLS_MARK)]
    if not placeholders:
        return
    grids = config.stash.get(GRIDS, [])
    selected = any(grid.cells for grid in grids)
    dropped = placeholders if selected else placeholders[1:]
    if not selected:
        reasons = dict.fromkeys(grid.reason for grid in grids)
        placeholders[0].stash[_FAILURE] = (
            f"pytest-lceval: no cells to run: {'; '.join(reasons)}. Name tasks of the "
            f"collected suites, or collect the suite that has them")
    if dropped:
        gone = set(dropped)
        items[:] = [item for item in items if item not in gone]
        config.hook.pytest_deselected(items=dropped)


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    """Say which tasks have no cells for want of data before the first cell: one line per
    suite, and with -v one per task with the files it needs."""
    left_out = {grid.suite: dict(grid.left_out) for grid in config.stash.get(GRIDS, [])
                if grid.left_out}
    if config.get_verbosity() > 0:
        return [f"lceval: {suite}: no cells for {task}: it needs {need}"
                for suite, tasks in left_out.items() for task, need in tasks.items()]
    lines = []
    for suite, tasks in left_out.items():
        unjudged = [task for task, need in tasks.items() if need == NEEDS_JUDGE]
        if unjudged:
            lines.append(f"lceval: {suite}: no cells for {', '.join(unjudged)}: a judge model "
                         f"scores them; name one with --lceval-judge=SPEC")
        if len(unjudged) < len(tasks):
            lines.append(f"lceval: {suite}: no cells for "
                         f"{', '.join(t for t in tasks if t not in unjudged)}: their data is not "
                         f"in --lceval-data (-v says what each needs)")
    return lines


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _FAILURE in item.stash:
        pytest.fail(item.stash[_FAILURE], pytrace=False)
