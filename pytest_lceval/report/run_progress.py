"""The whole run on the terminal: a plan before the first cell, then progress and an ETA.

After collection one line states the plan (suites, cells, cases, tokens, estimated time, see
``run/plan.py``), after the start-up lines of the suites that have cells in it (``Suite.header``:
a recall-only run prints nothing of Task Haystack's settings). As cells finish, the whole
run's progress (cells, cases, tokens/s, elapsed, ETA) is rewritten in place on a terminal and
printed as a line every 5 % of the cells in a log.

Under xdist the controller collects nothing: each worker writes the plan of what it collected
into the run folder before announcing its collection, and the controller reads it when
``pytest_xdist_node_collection_finished`` arrives. Finished cells reach the controller as
reports, with the measurements that ``record_property`` attached to them.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from ..foundation.workers import worker_id
from ..models.options import LoadOptions
from ..models.registry import unscaled_positions, window_hint
from ..results.cells import RUN_DIR
from ..run.data_check import fallback_lines
from ..run.plan import (
    PlannedCell,
    RunTracker,
    Throughput,
    load_prior,
    plan_of,
    read_plan,
    save_prior,
    split_by_window,
    today,
    write_plan,
)
from ..run.progress import BOARD, TerminalBoard, WorkerBoard, bypass_capture
from ..run.suite import suites_of
from ..settings import SETTINGS, serving_options

PLUGIN_NAME = "lceval-run-progress"
PLAN_DIR = ".plan"
"""Folder of the run folder where xdist workers leave their plans; removed at the end."""


def pytest_sessionstart(session: pytest.Session) -> None:
    """Once the run's settings, its folder and pytest's terminal reporter exist, whatever
    order the plugins were configured in; before collection, whose end the plan is made at."""
    config = session.config
    if SETTINGS not in config.stash:
        return
    bypass = bypass_capture(config.pluginmanager.getplugin("capturemanager"))
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:
        path = config.stash[RUN_DIR] / PLAN_DIR / f"{worker_id()}.json"
        config.stash[BOARD] = WorkerBoard(bypass)
        config.pluginmanager.register(WorkerPlan(path), PLUGIN_NAME)
        return
    reporter = config.pluginmanager.getplugin("terminalreporter")
    if reporter is not None:
        board = TerminalBoard(reporter, config.get_terminal_writer(), bypass)
        config.stash[BOARD] = board
        config.pluginmanager.register(RunProgress(config, board), PLUGIN_NAME)


class WorkerPlan:
    """An xdist worker: hands its plan to the controller, prints cell progress to logs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """tryfirst: before xdist's own hook tells the controller that collection finished."""
        plan = plan_of(session.items)
        if plan:
            write_plan(self.path, plan)


class RunProgress:
    """The single process or the xdist controller: plan line, progress, remembered speed."""

    def __init__(self, config: pytest.Config, board: TerminalBoard) -> None:
        self.config = config
        settings = config.stash[SETTINGS]
        self.config = config
        self.store_dir = settings.store_path.parent
        self.model = " ".join([settings.model] + [
            f"{name}={value}" for name, value in (("device", settings.device),
                                                  ("dtype", settings.dtype)) if value != "auto"])
        """Which model, where: the key of the remembered throughput."""
        self.board = board
        self.tracker: RunTracker | None = None
        self.started = time.perf_counter()
        self.properties: dict[str, dict[str, Any]] = {}
        """Recorded properties of cells still running, by nodeid."""
        self.nodes: set[str] = set()
        self.lines_printed = 0
        self.announced = False
        self.plan_lines: list[str] = []
        """What the pytest_lceval_plan hooks add to the plan line (the comparison's power)."""

    @property
    def run_dir(self) -> Path:
        """Read when needed: the run's folder is final only once the session has started (a
        run started in the same second as another takes a folder of its own)."""
        return self.config.stash[RUN_DIR]

    # -- the plan ----------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        plan = plan_of(session.items)
        if plan:
            self._start(plan)
            self._announce()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.nodes.add(node.gateway.id)
        if self.tracker is None:
            try:
                plan = read_plan(self.run_dir / PLAN_DIR / f"{node.gateway.id}.json", ids)
            except FileNotFoundError:
                return  # the worker collected no lceval cell
            if plan:
                self._start(plan)
        if self.tracker is not None:
            self.tracker.workers = len(self.nodes)

    def _start(self, plan: dict[str, PlannedCell]) -> None:
        window = self._window()
        fits, too_long = split_by_window(plan, window)
        self.tracker = RunTracker(fits, load_prior(self.store_dir, self.model),
                                  too_long=too_long, window=window)
        # Asked here, not when the plan is printed: a hook may refuse the plan (the comparison's
        # --lceval-require-power), and under xdist the line is printed at the first test's
        # start, when a worker is already measuring; the controller learns the plan from the
        # first worker's collection, before xdist hands out any test.
        self.plan_lines = [line for lines in self.config.hook.pytest_lceval_plan(
            config=self.config, plan=self.tracker.plan) for line in lines or ()]
        self.started = time.perf_counter()

    def _window(self) -> int | None:
        """The model's window, when its files tell it before loading; None with a reference
        tokenizer, whose lengths the model's window does not bound."""
        settings = self.config.stash[SETTINGS]
        if settings.ref_tokenizer is not None:
            return None
        return window_hint(settings.model, self._options())

    def _options(self) -> LoadOptions:
        settings = self.config.stash[SETTINGS]
        return LoadOptions(settings.chat_template, settings.dtype, settings.device,
                           serving=serving_options(self.config), model_args=settings.model_args,
                           window=settings.window)

    def _window_warning(self) -> list[str]:
        """A ``--lceval-window`` above the positions of a model whose RoPE is not scaled: a
        choice one may mean (to see it fail past them), so a warning, not an error."""
        settings = self.config.stash[SETTINGS]
        positions = unscaled_positions(settings.model, self._options())
        if positions is None or settings.window is None:
            return []
        factor = math.ceil(10 * settings.window / positions) / 10
        scaling = json.dumps({"rope_type": "yarn", "factor": factor}, separators=(",", ":"))
        return [f"lceval: warning: --lceval-window {settings.window} is above the {positions:,} "
                f"positions of {settings.model}, whose RoPE is not scaled: cells past "
                f"{positions:,} tokens measure positions it was not trained on; scale it (e.g. "
                f"--lceval-model-args 'rope_scaling={scaling}') or lower --lceval-window"]

    def _announce(self) -> None:
        """The plan line, then the status line; under xdist at the first test's start, after
        xdist's own lines about its workers' collection."""
        if self.tracker is not None and not self.announced:
            self.announced = True
            suites = suites_of(self.config)
            plan = self.tracker.plan.values()
            names = [name for name in sorted({cell.suite for cell in plan}) if name in suites]
            for name in names:
                for line in suites[name].header():
                    self.board.log(line)
            fallbacks = {name: suites[name].fallbacks({c.task for c in plan if c.suite == name})
                         for name in names}
            for line in [*fallback_lines(self.config.stash[SETTINGS].data_source(), fallbacks),
                         *self._window_warning()]:
                self.board.log(line)
            self.board.log(self.tracker.plan_line())
            for line in self.plan_lines:
                self.board.log(line)
            self.board.set_run(self._status)

    def _status(self) -> str:
        assert self.tracker is not None
        return self.tracker.progress_line(time.perf_counter() - self.started)

    # -- progress: the status line is taken down while pytest writes, then redrawn ----------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Any:
        self._announce()
        self.board.hide()
        try:
            return (yield)
        finally:
            self.board.show()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Any:
        self.board.hide()
        try:
            return (yield)
        finally:
            if self.tracker is not None and report.nodeid in self.tracker.plan:
                self.properties.setdefault(report.nodeid, {}).update(
                    (name, value) for name, value in report.user_properties)
            self.board.show()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> Any:
        self.board.hide()
        try:
            return (yield)
        finally:
            self._finished(nodeid)
            self.board.show()

    def _finished(self, nodeid: str) -> None:
        tracker = self.tracker
        if tracker is None or nodeid not in tracker.plan or nodeid in tracker.done:
            return
        tracker.finish(nodeid, self.properties.pop(nodeid, {}))
        done = len(tracker.done)
        if done == len(tracker.plan):
            self.board.set_run(None)  # the last line comes at session end, after pytest's [100%]
        elif not self.board.interactive and done // tracker.step() > self.lines_printed:
            self.lines_printed = done // tracker.step()
            self.board.log(self._status())

    # -- the end -----------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Any:
        self.board.set_run(None)
        if self.tracker is not None and self.tracker.done:
            self.board.log(self._status())
        try:
            return (yield)
        finally:
            self._remember()
            shutil.rmtree(self.run_dir / PLAN_DIR, ignore_errors=True)

    def _remember(self) -> None:
        """Keep this run's measured throughput: the next run's first estimate."""
        tracker = self.tracker
        measured = tracker.measured if tracker is not None else None
        if tracker is None or measured is None:
            return
        try:
            save_prior(self.store_dir, self.model,
                       Throughput(round(measured, 1), tracker.workers, today()))
        except OSError as exc:
            self.board.log(f"lceval: could not remember the throughput in {self.store_dir}: "
                           f"{exc}")
