"""pytest entry point: options, fixtures and hooks. Thin: it wires the parts to pytest."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import hookspecs
from .foundation.cpu_wait import sleep_when_idle
from .foundation.data import DataError
from .foundation.grid import Cell, format_depth, format_length
from .models import grid_profile
from .models.backend import BaseBackend
from .models.base import Backend
from .models.model_args import args_text
from .models.reference_tokenizer import reference_header
from .models.registry import LoadOptions, UnknownModelError, check_spec, make_backend
from .models.scoring import StoredScoring
from .models.serving import ServingOptions
from .models.stored import StoredModel
from .results.cells import (
    RUN_DIR,
    SUITE_VERDICTS,
    CellResult,
    read_results,
    write_merged,
)
from .results.records import stable_hash
from .run.cell_run import CellRun
from .run.evaluation import Evaluator
from .run.lookahead import Lookahead, selected_cells
from .run.model_usage import RUN_STARTED, read_usage, usage_line, write_usage
from .run.progress import BOARD
from .run.suite import get_suite, suites_of
from .settings import SETTINGS, Settings, add_options, resolve, serving_options, window_line
from .store.database import Store
from .store.repair import StoreRepairedWarning, StoreUsageError, check_store
from .verdicts.criteria import CellJudge, criteria_of
from .verdicts.threshold import ThresholdCriterion
from .verdicts.verdict import (
    INCOMPLETE,
    RUN_VERDICT,
    GateResult,
    RunVerdict,
    decide,
    suite_gates,
)

MARKERS = pytest.StashKey[set[str]]()
"""Suite and length markers registered so far (they depend on the suites collected)."""
SUITE_MARKER = "lceval"

#: Feature plugins, loaded with this one: each adds its own options and hooks (grids, judges,
#: session reports), so suites grow without touching this file's logic.
#: A plugin module that builtin_suites imports (a family's options) comes before it: pytest
#: rewrites a plugin's asserts only when it imports the module itself. The families' releases
#: (pytest_lceval_releases) are fetched in this list's order: HELMET's, RULER's, Task Haystack's.
pytest_plugins = [
    "pytest_lceval.models.builtin_backends",
    "pytest_lceval.benchmarks.helmet.data_plugin",
    "pytest_lceval.benchmarks.ruler.ruler_plugin",
    "pytest_lceval.benchmarks.helmet.summ_plugin",
    "pytest_lceval.builtin_suites",
    "pytest_lceval.verdicts.gates",
    "pytest_lceval.report.heatmaps",
    "pytest_lceval.benchmarks.task_haystack.task_haystack_plugin",
    "pytest_lceval.fetch.fetch_plugin",
    "pytest_lceval.run.serving_plugin",
    "pytest_lceval.verdicts.baseline.baseline_plugin",
    "pytest_lceval.verdicts.baseline.pooled_plugin",
    "pytest_lceval.verdicts.effective.effective_plugin",
    "pytest_lceval.report.summary",
    "pytest_lceval.report.badge",
    "pytest_lceval.report.junit_gates",
    "pytest_lceval.report.html",
    "pytest_lceval.benchmarks.longbench100.longscore.longscore_plugin",
    "pytest_lceval.run.selection",
    "pytest_lceval.run.startup",
    "pytest_lceval.run.completion",
    "pytest_lceval.run.errored",
    "pytest_lceval.report.run_progress",
    "pytest_lceval.benchmarks.helmet.cite_plugin",
    "pytest_lceval.benchmarks.helmet.judge_prompts_plugin",
    "pytest_lceval.judge.judge_plugin",
]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    sleep_when_idle()  # before torch is first imported (cpu_wait says why)
    settings = resolve(config, config.rootpath)
    try:
        check_spec(config.pluginmanager, settings.model)
    except UnknownModelError as exc:
        raise pytest.UsageError(f"pytest-lceval: --model: {exc}") from None
    if not hasattr(config, "workerinput"):  # once, before any process opens the store
        try:
            repaired = check_store(settings.store_path)
        except StoreUsageError as exc:
            raise pytest.UsageError(f"pytest-lceval: --lceval-store {exc}") from None
        if repaired:
            config.issue_config_time_warning(StoreRepairedWarning(repaired), stacklevel=2)
    config.stash[SETTINGS] = settings
    config.stash[RUN_DIR] = _run_dir(config, settings)
    config.addinivalue_line(
        "markers", f"{SUITE_MARKER}(suite): expand the test over the suite's cell grid")
    config.stash[MARKERS] = set()
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistRunName(), "lceval-xdist")
    config.hook.pytest_lceval_configure(config=config, settings=settings)


def _run_dir(config: pytest.Config, settings: Settings) -> Path:
    """The run folder; xdist workers take the controller's, so every process writes to one."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput and "lceval_run_dir" in workerinput:
        return Path(workerinput["lceval_run_dir"])
    name = settings.run_name or "-".join([time.strftime("%Y%m%d-%H%M%S"),
                                          _folder_part(settings.model), *_variant(settings)])
    return settings.out_root / name


def _folder_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def _variant(settings: Settings) -> list[str]:
    """The model variant's parts of a run folder's name (as HELMET names its output folder
    ``-override-rope<theta>``): the config overrides, cut to a readable length with a hash of
    the whole, and the window."""
    parts = []
    if settings.model_args:
        text = args_text(settings.model_args)
        label = _folder_part(text)
        parts.append(label if len(label) <= 60 else f"{label[:51]}-{stable_hash(text)[:8]}")
    if settings.window is not None:
        parts.append(f"window{settings.window}")
    return parts


class _XdistRunName:
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["lceval_run_dir"] = str(node.config.stash[RUN_DIR])


@pytest.hookimpl
def pytest_lceval_criteria(config: pytest.Config) -> list[ThresholdCriterion]:
    return [ThresholdCriterion(config.stash[SETTINGS])]


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash[SETTINGS]
    data = str(settings.data_dir) if settings.data_dir else "offline fixtures (no --lceval-data)"
    if settings.fetched_data is not None:
        data += f", then fetched {settings.fetched_data}"
    return [
        f"lceval: model={settings.model} seed={settings.seed} "
        f"(rerun with --lceval-seed={settings.seed})",
        f"lceval: data={data} run={config.stash[RUN_DIR]} store={settings.store_path}",
        grid_profile.header_line(settings.grid, (
            f"lengths {','.join(format_length(n) for n in settings.lengths)}, depths "
            f"{','.join(format_depth(d) for d in settings.depths)}, "
            f"{settings.samples} {'case' if settings.samples == 1 else 'cases'} per cell"
            f"{_grid_suites(config)}")),
        *reference_header(settings.ref_tokenizer),
        _batching_line(settings),
        settings.thresholds_line(),
        *filter(None, [window_line(settings)]),
    ]


def _grid_suites(config: pytest.Config) -> str:
    """Which suites the grid line is for, when a suite of the session has a grid of its own
    (a Task Haystack-only run would otherwise read another suite's grid as its own)."""
    suites = suites_of(config)
    if all(not suite.own_grid for suite in suites.values()):
        return ""
    return f" (for {', '.join(sorted(n for n, s in suites.items() if not s.own_grid))})"


def _batching_line(settings: Settings) -> str:
    calls = f"lceval: backend calls of up to {settings.batch_size} requests; "
    if settings.lookahead:
        return calls + (f"cells measured together, {settings.lookahead} cases at a time "
                        f"(--lceval-lookahead)")
    why = ", the default for a model on this CPU" if settings.lookahead_auto else ""
    return calls + f"one cell at a time (--lceval-lookahead=0{why})"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    from .run import selection  # a feature plugin: pytest imports it first, to rewrite its asserts

    if "lc_cell" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker(SUITE_MARKER)
    if marker is None:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid} asks for lc_cell but has no "
            f"@pytest.mark.{SUITE_MARKER}(suite=...) marker naming its suite")
    suite = marker.kwargs.get("suite") or marker.args[0]
    settings = metafunc.config.stash[SETTINGS]
    try:
        registered = get_suite(metafunc.config, suite)
        cells: list[Cell] = registered.grid(settings)
    except (DataError, pytest.UsageError) as exc:  # one line for the module, no traceback
        message = str(exc)
        raise pytest.Collector.CollectError(
            message if message.startswith("pytest-lceval") else f"pytest-lceval: {message}"
        ) from None
    for cell in cells:
        _register_marker(metafunc.config, cell.suite, registered.description)
        _register_marker(metafunc.config, cell.length_mark, "cells of that length")
    selection.parametrize(metafunc, registered, cells, settings)


def _register_marker(config: pytest.Config, name: str, description: str) -> None:
    """Register a grid marker once, so -m works under --strict-markers."""
    if name not in config.stash[MARKERS]:
        config.stash[MARKERS].add(name)
        config.addinivalue_line("markers", f"{name}: {description}")


@pytest.fixture(scope="session")
def lc_settings(pytestconfig: pytest.Config) -> Settings:
    return pytestconfig.stash[SETTINGS]


@pytest.fixture(scope="session")
def lc_store(lc_settings: Settings) -> Iterator[Store]:
    store = Store(lc_settings.store_path)
    yield store
    store.close()


@pytest.fixture(scope="session")
def lc_backend(lc_settings: Settings, pytestconfig: pytest.Config) -> Backend:
    """The model under test, made once per process (once per xdist worker, on the GPU that
    serving_plugin chose for the worker in pytest_configure). A backend may load its weights
    at the first request the store lacks (hf does), so a fully stored rerun never loads them."""
    return _load(pytestconfig, lc_settings, serving_options(pytestconfig))


def _load(config: pytest.Config, settings: Settings, serving: ServingOptions) -> Backend:
    return make_backend(config, settings.model, LoadOptions(
        settings.chat_template, settings.dtype, settings.device, serving=serving,
        model_args=settings.model_args, window=settings.window, rank=settings.rank))


@pytest.fixture(scope="session")
def lc_model(lc_backend: Backend, lc_store: Store, lc_settings: Settings,
             pytestconfig: pytest.Config) -> StoredModel:
    """The model behind the store: answers already stored never reach it."""
    return StoredModel(lc_backend, lc_store, lc_settings.batch_size,
                       pytestconfig.stash[RUN_STARTED])


@pytest.fixture(scope="session")
def lc_evaluator(pytestconfig: pytest.Config, lc_settings: Settings,
                 lc_model: StoredModel) -> Iterator[Evaluator]:
    """The session's evaluator; at its end, what reached the models from this process."""
    from .judge.judge_plugin import judge_panel  # a feature plugin, as selection above

    run_dir = pytestconfig.stash[RUN_DIR]
    scoring = {name: StoredScoring(model, lc_model.store)
               for offered in pytestconfig.hook.pytest_lceval_scoring_models(config=pytestconfig)
               for name, model in (offered or {}).items()}
    evaluator = Evaluator(pytestconfig, lc_settings, lc_model, lc_settings.data_source(),
                          run_dir, judge_panel(pytestconfig, lc_model.store, lc_model.backend),
                          scoring, pytestconfig.stash.get(BOARD, None))
    yield evaluator
    if isinstance(lc_model.backend, BaseBackend):
        lc_model.calls.by_endpoint = lc_model.backend.answered_by()
    write_usage(run_dir, "model", lc_model.calls)
    for role, calls in (evaluator.judges.used() if evaluator.judges else {}).items():
        write_usage(run_dir, role, calls)
    for name, stored in scoring.items():
        write_usage(run_dir, name, stored.calls)


@pytest.fixture(scope="session")
def lc_lookahead(lc_evaluator: Evaluator, request: pytest.FixtureRequest) -> Lookahead:
    """Measures the selected cells a window at a time (--lceval-lookahead), so the backend
    answers many cells' requests per call."""
    return Lookahead(lc_evaluator, suites_of(request.config), selected_cells(request.session),
                     lc_evaluator.settings.lookahead)


@pytest.fixture
def lc_eval(lc_evaluator: Evaluator, lc_lookahead: Lookahead,
            request: pytest.FixtureRequest) -> CellRun:
    """Measure and judge cells of any suite: ``lc_eval.check(lc_eval.run(lc_cell))``."""
    config = request.config
    return CellRun(lc_evaluator, lc_lookahead, suites_of(config),
                   CellJudge(criteria_of(config), config),
                   request.node.nodeid, _property_recorder(request.node))


def _property_recorder(item: pytest.Item) -> Callable[[str, object], None]:
    """What pytest's ``record_property`` does, without that fixture: it warns under pytest's
    default junit_family (xunit2) on every test. The properties travel in the test's
    ``user_properties`` (to the xdist controller too), and pytest's JUnit XML writes them as the
    testcase's ``<properties>`` in every junit_family."""
    def record(name: str, value: object) -> None:
        item.user_properties.append((name, value))
    return record


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """tryfirst: session reports must exist before pytest-html renders its page (its own
    sessionfinish, trylast, calls pytest_html_results_summary). The reports that tell the verdict
    come last, after the verdict is decided once more: a signal while the others were written
    makes it incomplete (run/completion.py), and every one of them tells that."""
    from .run.completion import completion_of  # a feature plugin, as selection above
    from .run.errored import with_errored

    config = session.config
    if hasattr(config, "workerinput") or SETTINGS not in config.stash:
        return
    run_dir = config.stash[RUN_DIR]
    results = with_errored(config, read_results(run_dir))
    completion = completion_of(config)
    if not results and not (completion and completion.signal and (
            completion.selected or completion.has_cells)):
        return
    if results:
        write_merged(run_dir, results)
    gates = _suite_gates(config, results)
    verdict = config.stash[RUN_VERDICT] = _decide(session, results, gates)
    suite_verdicts = config.stash[SUITE_VERDICTS] = {
        suite: [gate.judgement for gate in verdict.gates_of(suite)]
        for suite in sorted({gate.suite for gate in verdict.gates})}
    if results:
        for suite in suites_of(config).values():
            lines = suite.summarize(run_dir, [r for r in results if r.suite == suite.name])
            _write_lines(config, lines)
        config.hook.pytest_lceval_session_finish(
            config=config, run_dir=run_dir, results=results, suite_verdicts=suite_verdicts,
            verdict=verdict)
    if completion is not None:
        completion.seal()
    verdict = config.stash[RUN_VERDICT] = _decide(session, results, gates)
    session.exitstatus = verdict.exit_status(session.exitstatus)
    _count_in_pytest_line(config, verdict)
    config.hook.pytest_lceval_verdict_reports(config=config, run_dir=run_dir, results=results,
                                              suite_verdicts=suite_verdicts, verdict=verdict)
    latest = run_dir.parent / "latest"
    if verdict.outcome == INCOMPLETE:
        _write_lines(config, [f"lceval: {latest} not moved: this run is incomplete"])
    elif latest.is_symlink() or not latest.exists():
        _point_latest(latest, run_dir)
    _write_lines(config, [*(usage_line(role, calls, results)
                            for role, calls in read_usage(run_dir).items()),
                          f"lceval: {len(results)} cells, results and reports in {run_dir}"])


def _point_latest(latest: Path, run_dir: Path) -> None:
    """Two runs that finish together both move ``latest``: unlinking then linking lets the
    second's link fail on the first's, so a link made under a name of its own is renamed over
    it, which replaces the link in one step whoever comes last."""
    fresh = latest.with_name(f".latest-{os.getpid()}")
    fresh.unlink(missing_ok=True)
    os.symlink(run_dir.name, fresh)
    os.replace(fresh, latest)


def _suite_gates(config: pytest.Config, results: list[CellResult]) -> list[GateResult]:
    """Every suite gate, over every suite the session knows, each said in a line."""
    suites = {*suites_of(config), *(r.suite for r in results)}
    gates = suite_gates(config, sorted(suites), results)
    _write_lines(config, [f"lceval: suite gate {gate.status.upper()} {gate.name}: "
                          f"{gate.judgement.message}" for gate in gates])
    return gates


def _decide(session: pytest.Session, results: list[CellResult],
            gates: list[GateResult]) -> RunVerdict:
    """The run's one verdict (verdicts/verdict.py): the cells, the suite gates and how far the
    run got, a signal until now included."""
    from .run.completion import completion_of  # a feature plugin, as selection above

    completion = completion_of(session.config)
    if completion is None:
        return decide(results, gates)
    return decide(results, gates, len(completion.selected), completion.not_run,
                  completion.stopped(session), bool(completion.signal), tuple(completion.lost))


def _count_in_pytest_line(config: pytest.Config, verdict: RunVerdict) -> None:
    """pytest's own last line counts what fails the run besides tests: "4 passed, 1 gate
    failed", "12 passed, 40 not run", "52 passed, 1 interrupted". Without it a gate-failed run
    ended on "4 passed" in green. The keys are ones pytest does not know, so its counts of tests
    (and pytester's parsing of them) stay as they were, and the line is no longer green."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    failed = verdict.failed_gates
    if failed:
        reporter.stats["gate failed" if len(failed) == 1 else "gates failed"] = list(failed)
    if verdict.not_run:
        reporter.stats["not run"] = [verdict] * verdict.not_run
    elif verdict.signalled:  # every test ran, the reports were interrupted
        reporter.stats["interrupted"] = [verdict]
    refresh = getattr(reporter, "_set_main_color", None)
    if refresh is not None:  # pytest keeps the line's kinds from before its last test, which an
        refresh()           # interrupted run never reached


def _write_lines(config: pytest.Config, lines: list[str]) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for line in lines:
            reporter.write_line(line)
