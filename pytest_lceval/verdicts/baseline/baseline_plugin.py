"""The pytest side of saved runs: options, the criterion and the coverage gate registered, what
the plan tells before the first cell (scores outside their metric's range, a save that would
replace a baseline of more cells), saving at session end, only from a complete run (the
criterion itself is ``criterion.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ...results.cells import CellResult, Judgement
from ...run.plan import PlannedCell
from ...run.suite import suites_of
from ...run.writable import check_writable
from ...settings import SETTINGS, Settings, convert, lookup, option_value
from ..verdict import INCOMPLETE, RunVerdict
from .criterion import (
    DEFAULT_MIN_COVERAGE,
    DEFAULT_MIN_DROP,
    OPTIONS,
    BaselineCriterion,
    BaselineOptions,
    cell_status,
)
from .saved import (
    SaveRefused,
    baseline_path,
    check_ranges,
    check_replacing,
    load_run,
    save_run,
)

COVERAGE = "baseline_coverage"
CELLS_NAMED = 5
"""Cells the coverage line names before "and N more"."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-save", dest="lceval_save", action="append", default=None,
                    metavar="NAME",
                    help="save this run's per-case scores as baseline NAME "
                         "(<--lceval-out>/baselines/NAME.json) or to a .json PATH; once per run, "
                         "only from a complete run, and never over the baseline it is compared "
                         "with nor over one of more measured cells")
    group.addoption("--lceval-compare", dest="lceval_compare", default=None,
                    metavar="NAME|PATH",
                    help="fail cells that got significantly worse than a saved run")
    group.addoption("--lceval-min-drop", dest="lceval_min_drop", default=None,
                    help=f"smallest score drop (0..1) that fails a cell under --lceval-compare "
                         f"(default {DEFAULT_MIN_DROP})")
    group.addoption("--lceval-compare-any-judge", dest="lceval_compare_any_judge",
                    action="store_true", default=False,
                    help="compare judged cells with a baseline scored by another judge")
    group.addoption("--lceval-compare-min-coverage", dest="lceval_compare_min_coverage",
                    default=None, metavar="SHARE",
                    help=f"under --lceval-compare, the share 0..1 of each suite's measured "
                         f"cells the baseline must hold, or the run fails (default "
                         f"{DEFAULT_MIN_COVERAGE:g}: every cell compared)")
    parser.addini("lceval_min_drop", "default --lceval-min-drop", type="string")
    parser.addini("lceval_compare_min_coverage", "default --lceval-compare-min-coverage",
                  type="string")


def _min_drop(text: Any) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("drops are fractions 0..1 of the score (write 0.05, not 5)")
    return value


def _share(text: Any) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("a share is a fraction 0..1 of the cells (write 0.8, not 80)")
    return value


def resolve_options(config: pytest.Config, settings: Settings) -> BaselineOptions:
    """Resolve and check the baseline options; any problem is a UsageError before any model
    is loaded (a missing baseline, or one saved with another seed, cannot give a verdict)."""
    raw, where = lookup(config, "lceval_min_drop")
    min_drop = DEFAULT_MIN_DROP if raw is None else convert(
        raw, where, "--lceval-min-drop", _min_drop, "Write e.g. --lceval-min-drop 0.05.")
    min_coverage = option_value(config, "lceval_compare_min_coverage", _share,
                                DEFAULT_MIN_COVERAGE,
                                "Write e.g. --lceval-compare-min-coverage 0.8.")
    saves: list[str] = config.getoption("lceval_save") or []
    if len(saves) > 1:
        raise pytest.UsageError(
            f"pytest-lceval: --lceval-save is given {len(saves)} times "
            f"({', '.join(saves)}); a run saves one baseline: give --lceval-save once")
    save_path = None if not saves else convert(
        saves[0], "--lceval-save", "--lceval-save",
        lambda v: baseline_path(v, settings.out_root), "Give a name such as --lceval-save=base.")
    compare = config.getoption("lceval_compare")
    any_judge = bool(config.getoption("lceval_compare_any_judge"))
    saved = None
    if compare is not None:
        saved = convert(compare, "--lceval-compare", "--lceval-compare",
                        lambda v: load_run(baseline_path(v, settings.out_root)),
                        "Give a name saved with --lceval-save or a path to its .json file.")
        if saved.seed != settings.seed:
            raise pytest.UsageError(
                f"pytest-lceval: baseline {saved.name!r} was saved with seed {saved.seed} and "
                f"this run uses {settings.seed}: the cases would not pair. Rerun with "
                f"--lceval-seed={saved.seed}.")
        saved_judge = saved.settings.get("judge")
        if saved_judge != settings.judge and not any_judge \
                and any(cell.judge for cell in saved.cells.values()):
            raise pytest.UsageError(
                f"pytest-lceval: baseline {saved.name!r} was judged by --lceval-judge="
                f"{saved_judge} and this run names {settings.judge}: judged scores of different "
                f"judges do not pair. Use the baseline's judge, or pass "
                f"--lceval-compare-any-judge to compare anyway.")
    if saved is not None and save_path is not None \
            and save_path.resolve() == saved.path.resolve():
        raise pytest.UsageError(
            f"pytest-lceval: --lceval-save {saves[0]} would replace the baseline this run is "
            f"compared with ({saved.path}); a failing run would become the baseline. Save "
            f"under another name (e.g. --lceval-save {saved.path.stem}-next), and replace the "
            f"baseline once the run passed")
    return BaselineOptions(save_path, saved, min_drop, any_judge, min_coverage)


@pytest.hookimpl
def pytest_lceval_configure(config: pytest.Config, settings: Settings) -> None:
    options = resolve_options(config, settings)
    config.stash[OPTIONS] = options
    if options.save is not None:
        check_writable(options.save.parent, "--lceval-save")  # written at the end, after the cells
        config.stash[RAN_HERE] = _RanHere()
        config.pluginmanager.register(config.stash[RAN_HERE], "lceval-baseline-ran-here")


@pytest.hookimpl
def pytest_lceval_criteria(config: pytest.Config) -> list[BaselineCriterion]:
    options = config.stash[OPTIONS]
    if options.compare is None:
        return []
    return [BaselineCriterion(options.compare, options.min_drop, config.stash[SETTINGS],
                              options.any_judge)]


def pytest_report_header(config: pytest.Config) -> list[str]:
    options = config.stash.get(OPTIONS, None)
    if options is None or options.compare is None:
        return []
    saved = options.compare
    return [f"lceval: comparing with baseline {saved.name!r} ({saved.model}, "
            f"{len(saved.cells)} cells, saved {saved.created}); min drop {options.min_drop}, "
            f"it must hold {options.min_coverage:.0%} of each suite's measured cells "
            f"(--lceval-compare-min-coverage)"]


@pytest.hookimpl
def pytest_lceval_suite_verdict(config: pytest.Config, suite: str,
                                results: list[CellResult]) -> list[Judgement] | None:
    """How much of the suite the baseline covered: a comparison of almost nothing must not
    pass as a comparison (27 cells against a 1-cell baseline were 27 passes)."""
    options = config.stash.get(OPTIONS, None)
    if options is None or options.compare is None or not results:
        return None
    return [coverage(options.compare.name, suite, results, options.min_coverage)]


def coverage(name: str, suite: str, results: list[CellResult], minimum: float) -> Judgement:
    """The suite gate on the share of measured cells (those with scores) the baseline held."""
    measured = [r for r in results if r.scores]
    left_out = [r for r in measured if cell_status(r) in (None, "not-compared")]
    compared = len(measured) - len(left_out)
    share = compared / len(measured) if measured else 0.0
    ok = bool(measured) and share >= minimum
    message = (f"{suite}: baseline {name!r} covers {compared} of {len(measured)} measured "
               f"cells ({share:.0%} {'>=' if ok else '<'} --lceval-compare-min-coverage "
               f"{minimum:.0%})")
    if left_out:
        ids = [r.nodeid.partition("[")[2].rstrip("]") or r.nodeid for r in left_out]
        more = f" and {len(ids) - CELLS_NAMED} more" if len(ids) > CELLS_NAMED else ""
        message += (f"; {len(left_out)} not compared: {', '.join(ids[:CELLS_NAMED])}{more}"
                    + ("" if ok else ". Save the baseline again over the cells this run "
                       "selects, or lower --lceval-compare-min-coverage"))
    skipped = len(results) - len(measured)
    if skipped:
        message += f"; {skipped} cells without scores left out"
    return Judgement(COVERAGE, ok, message, {"baseline": name, "compared": compared,
                                             "measured": len(measured),
                                             "min_coverage": minimum},
                     rule=f"baseline {name!r} holds at least {minimum:.0%} of the measured "
                          f"cells (--lceval-compare-min-coverage)")


class _RanHere:
    """The tests this session ran (on the xdist controller, those its workers reported): a
    baseline holds only cells this run measured, not what an earlier run left in a reused
    run folder."""

    def __init__(self) -> None:
        self.nodeids: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.nodeids.add(report.nodeid)


RAN_HERE = pytest.StashKey[_RanHere]()


@pytest.hookimpl
def pytest_lceval_plan(config: pytest.Config, plan: dict[str, PlannedCell]) -> list[str] | None:
    """What the plan already tells about the saved runs, before any model answers: scores of
    the compared baseline outside their metric's range, and a save that would replace a
    baseline of more measured cells than this run selects."""
    options = config.stash.get(OPTIONS, None)
    if options is None:
        return None
    if options.compare is not None:
        suites = suites_of(config)
        metrics = {nodeid: suites[cell.suite].metric_for(cell.task)
                   for nodeid, cell in plan.items()
                   if nodeid in options.compare.cells and cell.suite in suites}
        try:
            check_ranges(options.compare, metrics)
        except ValueError as exc:
            raise pytest.UsageError(f"pytest-lceval: --lceval-compare: {exc}") from None
    if options.save is not None:
        try:
            check_replacing(options.save, len(plan), counted="this run can measure")
        except SaveRefused as exc:
            raise pytest.UsageError(f"pytest-lceval: --lceval-save {options.save.stem}: "
                                    f"{exc}; {_another_name(options.save)}") from None
    return None


def _another_name(path: Path) -> str:
    return (f"save under another name (e.g. --lceval-save {path.stem}-2), or remove {path} "
            f"to replace it")


@pytest.hookimpl
def pytest_lceval_session_finish(config: pytest.Config, run_dir: Path,
                                 results: list[CellResult], verdict: RunVerdict) -> None:
    options = config.stash.get(OPTIONS, None)
    if options is None or options.save is None:
        return
    ran = config.stash[RAN_HERE].nodeids
    mine = [result for result in results if result.nodeid in ran]
    line = _save(options.save, mine, config.stash[SETTINGS], run_dir, verdict)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"lceval: {line}")


def _save(path: Path, mine: list[CellResult], settings: Settings, run_dir: Path,
          verdict: RunVerdict) -> str:
    """Save the cells this run measured, only from a complete run and never over a baseline
    of more; the line that says what was saved, or why nothing was."""
    measured = [result for result in mine if result.scores]
    left_out = len(mine) - len(measured)
    kept = f" ({path} is kept as it was)" if path.exists() else ""
    refused = f"baseline {path.stem!r} not saved: "
    if verdict.outcome == INCOMPLETE:
        return (f"{refused}this run is {verdict.reasons()[0]}; a baseline is saved only from "
                f"a complete run: run it to its end{kept}")
    if not measured:
        return (f"{refused}none of this run's {len(mine)} cells was measured ({mine[0].reason}"
                f"){kept}" if mine else f"{refused}this run measured no cell{kept}")
    try:
        replaced = save_run(path, measured, settings, run_dir, left_out)
    except SaveRefused as exc:
        return f"{refused}{exc}; {_another_name(path)}"
    unmeasured = f"; {left_out} not measured, left out" if left_out else ""
    return (f"saved baseline {path.stem!r} ({len(measured)} cells{unmeasured}) to {path}"
            + (f", replacing {replaced}" if replaced else ""))
