"""pytest entry point: options, fixtures and hooks. Thin: it wires the parts to pytest."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import grid_profile, hookspecs
from .data import DataSource
from .evaluation import CellRun, Evaluator
from .grid import Cell, format_depth, format_length
from .models.base import Backend
from .models.registry import (
    LoadOptions,
    MissingDependencyError,
    UnknownModelError,
    load_backend,
    split_spec,
)
from .models.serving import ServingOptions
from .models.stored import StoredModel
from .results import read_results, write_merged
from .settings import Settings, add_options, resolve
from .store import Store
from .suites import grid_for_suite
from .verdicts import ThresholdCriterion

SETTINGS = pytest.StashKey[Settings]()
RUN_DIR = pytest.StashKey[Path]()
MARKERS = pytest.StashKey[set[str]]()
"""Suite and length markers registered so far (they depend on the suites collected)."""
SUITE_MARKER = "lceval"

#: Feature plugins, loaded with this one: each adds its own options and hooks (grids, judges,
#: session reports), so suites grow without touching this file's logic.
pytest_plugins = [
    "pytest_lceval.report.heatmaps",
    "pytest_lceval.haystack.plugin",
    "pytest_lceval.serving_plugin",
    "pytest_lceval.baseline.plugin",
    "pytest_lceval.report.summary",
    "pytest_lceval.report.badge",
    "pytest_lceval.report.html",
    "pytest_lceval.longscore.plugin",
]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    settings = resolve(config, config.rootpath)
    try:
        split_spec(settings.model)
    except UnknownModelError as exc:
        raise pytest.UsageError(f"pytest-lceval: --model: {exc}") from None
    config.stash[SETTINGS] = settings
    config.stash[RUN_DIR] = _run_dir(config, settings)
    config.addinivalue_line(
        "markers", f"{SUITE_MARKER}(suite): expand the test over the suite's cell grid")
    config.stash[MARKERS] = set()
    config.pluginmanager.register(ThresholdCriterion(settings), "lceval-threshold")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistRunName(), "lceval-xdist")


def _run_dir(config: pytest.Config, settings: Settings) -> Path:
    """The run folder; xdist workers take the controller's, so every process writes to one."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput and "lceval_run_dir" in workerinput:
        return Path(workerinput["lceval_run_dir"])
    name = settings.run_name or (
        time.strftime("%Y%m%d-%H%M%S") + "-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", settings.model)
    )
    return settings.out_root / name


class _XdistRunName:
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["lceval_run_dir"] = str(node.config.stash[RUN_DIR])


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash[SETTINGS]
    data = str(settings.data_dir) if settings.data_dir else "offline fixtures (no --lceval-data)"
    return [
        f"lceval: model={settings.model} seed={settings.seed} "
        f"(rerun with --lceval-seed={settings.seed})",
        f"lceval: data={data} run={config.stash[RUN_DIR]} store={settings.store_path}",
        grid_profile.header_line(settings.grid, (
            f"lengths {','.join(format_length(n) for n in settings.lengths)}, depths "
            f"{','.join(format_depth(d) for d in settings.depths)}, {settings.samples} samples "
            f"per cell")),
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "lc_cell" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker(SUITE_MARKER)
    if marker is None:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid} asks for lc_cell but has no "
            f"@pytest.mark.{SUITE_MARKER}(suite=...) marker naming its suite")
    suite = marker.kwargs.get("suite") or marker.args[0]
    settings = metafunc.config.stash[SETTINGS]
    cells: list[Cell] = grid_for_suite(metafunc.config, suite, settings)
    for cell in cells:
        _register_marker(metafunc.config, cell.suite, f"cells of the {cell.suite} suite")
        _register_marker(metafunc.config, cell.length_mark, "cells of that length")
    params = [
        pytest.param(cell, id=cell.id, marks=[
            getattr(pytest.mark, cell.suite), getattr(pytest.mark, cell.length_mark)])
        for cell in cells
    ]
    metafunc.parametrize("lc_cell", params)


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
    """The model under test, loaded once per process (once per xdist worker, on the GPU that
    serving_plugin chose for the worker in pytest_configure)."""
    from .serving_plugin import serving_options  # a feature plugin: pytest imports it first

    return _load(lc_settings, serving_options(pytestconfig))


def _load(settings: Settings, serving: ServingOptions | None = None) -> Backend:
    options = LoadOptions(settings.chat_template, settings.dtype, settings.device,
                          serving=serving or ServingOptions())
    try:
        return load_backend(settings.model, options)
    except MissingDependencyError as exc:
        raise pytest.UsageError(f"pytest-lceval: --model={settings.model}: {exc}") from None
    except (ValueError, OSError) as exc:
        # Cached by pytest for the session: every cell reports this one line, no reload.
        pytest.fail(f"pytest-lceval: cannot load --model={settings.model}: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def lc_model(lc_backend: Backend, lc_store: Store, lc_settings: Settings) -> StoredModel:
    """The model behind the store: answers already stored never reach it."""
    return StoredModel(lc_backend, lc_store, lc_settings.batch_size)


@pytest.fixture(scope="session")
def lc_evaluator(pytestconfig: pytest.Config, lc_settings: Settings,
                 lc_model: StoredModel) -> Evaluator:
    return Evaluator(pytestconfig, lc_settings, lc_model, DataSource(lc_settings.data_dir),
                     pytestconfig.stash[RUN_DIR])


@pytest.fixture
def lc_eval(lc_evaluator: Evaluator, request: pytest.FixtureRequest,
            record_property: Any) -> CellRun:
    """Measure and judge cells inside a test: ``lc_eval.check(lc_eval.run(lc_cell))``."""
    return CellRun(lc_evaluator, request.node.nodeid, record_property)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """tryfirst: session reports must exist before pytest-html renders its page (its own
    sessionfinish, trylast, calls pytest_html_results_summary)."""
    config = session.config
    if hasattr(config, "workerinput") or SETTINGS not in config.stash:
        return
    run_dir = config.stash[RUN_DIR]
    results = read_results(run_dir)
    if not results:
        return
    write_merged(run_dir, results)
    config.hook.pytest_lceval_session_finish(config=config, run_dir=run_dir, results=results)
    latest = run_dir.parent / "latest"
    if latest.is_symlink() or not latest.exists():
        if latest.is_symlink():
            latest.unlink()
        os.symlink(run_dir.name, latest)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"lceval: {len(results)} cells, results and reports in {run_dir}")
