"""The pytest side of saved runs: options, the paired-regression judge, saving at session end."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ...foundation.criterion import Assessment, Evidence, Need
from ...results.cells import CellResult, Judgement
from ...settings import SETTINGS, Settings, convert, lookup, option_value
from ..stats import PairedComparison, fewest_decisive, paired_comparison
from .saved import (
    CasesDiffer,
    SavedCell,
    SavedRun,
    baseline_path,
    load_run,
    pair_scores,
    save_run,
)

DEFAULT_MIN_DROP = 0.05
DEFAULT_MIN_COVERAGE = 1.0
"""Every measured cell must be in the baseline: a comparison that compares less fails."""
CRITERION = "baseline"
COVERAGE = "baseline_coverage"
CELLS_NAMED = 5
"""Cells the coverage line names before "and N more"."""


@dataclass(frozen=True)
class BaselineOptions:
    save: Path | None
    compare: SavedRun | None
    min_drop: float
    any_judge: bool = False
    """--lceval-compare-any-judge: pair judged cells even when another judge scored them."""
    min_coverage: float = DEFAULT_MIN_COVERAGE
    """--lceval-compare-min-coverage: the share of a suite's measured cells the baseline must
    hold, or the suite gate fails."""


OPTIONS = pytest.StashKey[BaselineOptions]()


# -- the verdict ----------------------------------------------------------------------------


def describe(comparison: PairedComparison, name: str) -> str:
    """The judgement message: what was measured, and why it passed or failed."""
    c = comparison
    level = round(100 * (1 - c.alpha))
    if c.test == "mcnemar-exact":
        evidence = (f"exact McNemar p={c.p_value:.3g} on {c.worse + c.better} discordant cases "
                    f"({c.worse} worse, {c.better} better)")
    else:
        evidence = f"sign-flip test p={c.p_value:.3g} ({c.worse} worse, {c.better} better)"
    head = (f"vs baseline {name!r}: {c.current:.3f} vs {c.baseline:.3f}, difference "
            f"{c.difference:+.3f} ({level}% CI {c.ci_low:+.3f} to {c.ci_high:+.3f}), {evidence}, "
            f"N={c.n}")
    if c.regressed:
        return f"{head}: significant drop of at least --lceval-min-drop {c.min_drop:.3f}"
    if c.status == "small-drop":
        return f"{head}: significant but smaller than --lceval-min-drop {c.min_drop:.3f}"
    return f"{head}: {c.status} ({detectable(c)})"


def detectable(comparison: PairedComparison) -> str:
    """The minimum detectable drop in words; when it is infinite, why."""
    c = comparison
    if math.isinf(c.mde):
        return (f"no drop is detectable at N={c.n}: the exact test needs at least "
                f"{fewest_decisive(c.alpha)} cases moving the same way")
    return f"smallest detectable drop {c.mde:.3f} at this N"


def properties(comparison: PairedComparison, name: str, saved: SavedCell) -> dict[str, Any]:
    """What reaches JUnit XML and the reports; prefixed so it never clashes with a metric.
    An infinite detectable drop is written with its reason (strict JSON has no infinity)."""
    c = comparison
    found = {
        "baseline": name, "baseline_status": c.status, "baseline_test": c.test,
        "baseline_score": round(c.baseline, 6), "baseline_diff": round(c.difference, 6),
        "baseline_ci_low": round(c.ci_low, 6), "baseline_ci_high": round(c.ci_high, 6),
        "baseline_p": c.p_value, "baseline_mde": round(c.mde, 6), "baseline_n": c.n,
        "baseline_worse": c.worse, "baseline_better": c.better,
        "baseline_min_drop": c.min_drop, "baseline_outcome": saved.outcome,
    }
    if math.isinf(c.mde):
        found["baseline_mde_why"] = "infinite: " + detectable(c)
    return found


class BaselineCriterion:
    """Compares each measured cell with the saved run (active only with --lceval-compare): the
    cell's paired test is recorded as evidence and never fails the cell (the suite and task
    gates over the pooled cases decide, ``pooled.py``); a cell that cannot be compared (other
    prompts, another judge) fails."""

    name = CRITERION

    def __init__(self, saved: SavedRun, min_drop: float, settings: Settings,
                 any_judge: bool = False) -> None:
        self.saved = saved
        self.min_drop = min_drop
        self.settings = settings
        self.any_judge = any_judge

    def needs(self, result: CellResult) -> Sequence[Need]:
        return ()

    def judge(self, result: CellResult, evidence: Evidence) -> Assessment | None:
        judgement = self._judgement(result)
        return None if judgement is None else Assessment(judgement)

    def _judgement(self, result: CellResult) -> Judgement | None:
        if not result.scores:
            return None
        name = self.saved.name
        cell = self.saved.cells.get(result.nodeid)
        if cell is None or not cell.scores or not result.case_keys:
            why = "the baseline has no scores for this cell" if result.case_keys else \
                "this cell records no case keys"
            return Judgement(CRITERION, True, f"not compared with baseline {name!r}: {why}",
                             {"baseline": name, "baseline_status": "not-compared"})
        if cell.judge != result.judge and not self.any_judge:
            return Judgement(CRITERION, False, (
                f"cannot compare with baseline {name!r}: its cell was judged by "
                f"{cell.judge or 'no judge'} and this one by {result.judge or 'no judge'}; "
                f"scores of different judges do not pair. Rerun with the baseline's judge, or "
                f"pass --lceval-compare-any-judge to compare anyway"),
                {"baseline": name, "baseline_status": "other-judge"})
        try:
            base, current = pair_scores(self.saved, cell, result, self.settings)
        except CasesDiffer as exc:
            return Judgement(CRITERION, False, str(exc),
                             {"baseline": name, "baseline_status": "unpaired"})
        comparison = paired_comparison(base, current, self.min_drop)
        message = describe(comparison, name)
        if comparison.n < len(result.scores):
            message += (f" (paired {comparison.n} of this cell's {len(result.scores)} cases; "
                        f"the others are not in the baseline)")
        # Evidence, not the verdict: each cell tests its own cases at alpha, so failing every
        # cell that regressed would fail an unchanged model's run of 48 cells of 50 sampled
        # cases half of the time; the pooled suite and task gates decide (pooled.py).
        return Judgement(CRITERION, True, message, properties(comparison, name, cell))


# -- pytest wiring --------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-save", dest="lceval_save", action="append", default=None,
                    metavar="NAME",
                    help="save this run's per-case scores as baseline NAME "
                         "(<--lceval-out>/baselines/NAME.json) or to a .json PATH; once per run, "
                         "and never over the baseline it is compared with")
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
    left_out = [r for r in measured if _status(r) in (None, "not-compared")]
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


def _status(result: CellResult) -> str | None:
    """The cell's baseline status; None when the criterion did not judge it."""
    for judgement in result.judgements:
        if judgement.criterion == CRITERION:
            return str(judgement.properties.get("baseline_status", ""))
    return None


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
def pytest_lceval_session_finish(config: pytest.Config, run_dir: Path,
                                 results: list[CellResult]) -> None:
    options = config.stash.get(OPTIONS, None)
    if options is None or options.save is None:
        return
    ran = config.stash[RAN_HERE].nodeids
    mine = [result for result in results if result.nodeid in ran]
    replaced = save_run(options.save, mine, config.stash[SETTINGS], run_dir)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        path = options.save
        reporter.write_line(f"lceval: saved baseline {path.stem!r} ({len(mine)} cells) to {path}"
                            + (f", replacing {replaced}" if replaced else ""))
