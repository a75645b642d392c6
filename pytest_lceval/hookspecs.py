"""The plugin's hooks: suites, criteria, backends and gates come from plugins (the built-in ones
too), so adding any of them never touches the core."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .fetch.catalog import Release
    from .foundation.criterion import Criterion
    from .models.base import Backend
    from .models.registry import LoadOptions, ModelSpec
    from .models.scoring import ScoringModel
    from .report.finding import Finding
    from .report.section import SummarySection
    from .results.cells import CellResult, Judgement
    from .run.plan import PlannedCell
    from .run.suite import MoreTasks, Suite
    from .settings import Settings
    from .verdicts.verdict import RunVerdict


@pytest.hookspec
def pytest_lceval_configure(config: pytest.Config, settings: Settings) -> None:
    """The run's settings, resolved once (frozen) and in ``config.stash[SETTINGS]``: a plugin
    resolves its own options from them here, in every process, instead of ordering its
    ``pytest_configure`` after the core's."""


@pytest.hookspec
def pytest_lceval_suites(config: pytest.Config) -> list[Suite | MoreTasks] | None:
    """The suites a plugin provides, each declaring its tasks, and the tasks it adds to other
    plugins' suites (``MoreTasks``). Called once per session, after ``pytest_configure``:
    return new objects, so nothing outlives the session."""


@pytest.hookspec
def pytest_lceval_releases() -> list[Release] | None:
    """The public releases a plugin's suites read, each with its files, licence and the suites
    that read it: what ``--lceval-fetch`` and ``python -m pytest_lceval.fetch`` fetch, and which
    data folder feeds which suite (``run/data_check.py``). A release several families read is
    declared once, by one of them, listing every suite that reads it. No arguments: the command
    line asks it without a session (``fetch/declared.py``); the fetch order is the plugins'
    registration order."""


@pytest.hookspec
def pytest_lceval_criteria(config: pytest.Config) -> list[Criterion] | None:
    """The cell-level criteria a plugin provides; a suite's verdict policy names those that
    judge its cells. Called once per process, after ``pytest_configure``."""


@pytest.hookspec
def pytest_lceval_judge(result: CellResult) -> Judgement | None:
    """A cell-level verdict on any measured cell, beside its suite's criteria; None when it does
    not apply. Pure: it sees the measured result only. The cell fails if any judgement fails."""


@pytest.hookspec
def pytest_lceval_suite_verdict(config: pytest.Config, suite: str,
                                results: list[CellResult]) -> list[Judgement] | None:
    """Suite-level verdicts (a release gate on a suite's pass rate or mean LongScore), on the
    controller after every cell ran, for every suite the session knows: ``results`` is empty
    for a suite without cells in this run. Each judgement is one gate of the run's verdict
    (``verdicts/verdict.py``): give it a ``rule`` in words, and ``applied=False`` when the gate
    was asked for but had nothing to judge (it then fails only if the option named the
    suite); return None for a gate not asked for. A failed one fails the run (exit status 1),
    its JUnit test case and its badge."""


@pytest.hookspec
def pytest_lceval_plan(config: pytest.Config, plan: dict[str, PlannedCell]) -> list[str] | None:
    """Lines printed after the plan line, before the first cell, by the process that prints it
    (a comparison's detectable drops at this plan's N); a ``pytest.UsageError`` raised here
    stops the run before any cell (exit 4). ``plan``: the cells that will run, by nodeid."""


@pytest.hookspec(firstresult=True)
def pytest_lceval_make_backend(spec: ModelSpec, options: LoadOptions) -> Backend | None:
    """The model under test for ``--model=spec`` (a ``str`` of the text given, parsed into
    ``kind`` and ``target`` for the built-in registry); None when the spec is not this plugin's.
    The built-in registry answers last (trylast), so a plugin may add or override a backend."""


@pytest.hookspec
def pytest_lceval_scoring_models(config: pytest.Config) -> dict[str, ScoringModel] | None:
    """Models that rate a task's outputs beside the judge (the citation NLI classifier), by
    the name the task looks them up by; the core puts each behind the store
    (``models/scoring.py``) and hands them to every task's ``cell_metrics``."""


@pytest.hookspec
def pytest_lceval_judge_texts(config: pytest.Config) -> dict[str, str] | None:
    """Prompt texts by name that the judge asks every rubric in (``Rubric.worded``), replacing
    this project's words where a rubric has a use for them: a family's own judge prompts, read
    from its paper's code at the user's request (HELMET's, ``--lceval-helmet-judge-prompts``).
    Called once per process, in ``pytest_lceval_configure``; a ``pytest.UsageError`` raised
    here stops the run. None or empty: the project's words."""


@pytest.hookspec(firstresult=True)
def pytest_lceval_finding(result: CellResult) -> Finding | None:
    """How a measured cell reads in a suite's "look first" line when a plugin's own verdict
    decides it (Task Haystack's t-test, a LongScore drop), on the scale report/findings.py
    gives; None leaves the cell to its score."""


@pytest.hookspec(firstresult=True)
def pytest_lceval_undefined(result: CellResult) -> str | None:
    """The short name of a plugin's own value (LongScore's 'LC') that it could not compute for
    a measured cell, so the cell's verdict was skipped; the report writes '<name> undefined'
    beside the score. None when the plugin computed it or it does not apply."""


@pytest.hookspec
def pytest_lceval_summary_section(config: pytest.Config,
                                  results: list[CellResult]) -> SummarySection | None:
    """What a plugin's own verdict adds to summary.md and summary.json (LongScore's Table-7
    row and the cells it failed, Task Haystack's FAILs with their t-tests), on the controller
    at session end; None when it does not apply to the run."""


@pytest.hookspec
def pytest_lceval_report_artifacts() -> list[tuple[str, str, str | None]] | None:
    """Files a plugin writes into the run folder for the HTML report to show: (file-name prefix,
    title, the suite whose section shows them when the file name names none)."""


@pytest.hookspec
def pytest_lceval_session_finish(config: pytest.Config, run_dir: Path,
                                 results: list[CellResult],
                                 suite_verdicts: dict[str, list[Judgement]],
                                 verdict: RunVerdict) -> None:
    """Write session-end reports. Called once, on the controller, after results are merged and
    the run's verdict decided: a report renders ``verdict``, never judges the run itself. A
    report that tells the verdict (its outcome or reasons) answers
    ``pytest_lceval_verdict_reports`` instead."""


@pytest.hookspec
def pytest_lceval_verdict_reports(config: pytest.Config, run_dir: Path,
                                  results: list[CellResult],
                                  suite_verdicts: dict[str, list[Judgement]],
                                  verdict: RunVerdict) -> None:
    """Write the reports that tell the run's verdict (summary, badges, JUnit's verdict cases).
    Called once, on the controller, after the ``pytest_lceval_session_finish`` reports, with the
    verdict decided once more: a Ctrl-C or SIGTERM while those were written made it incomplete,
    and every report that tells it tells the same one. ``results`` is empty for a run
    interrupted before any cell finished."""
