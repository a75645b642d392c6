"""Task Haystack's pytest wiring: options, the grid, the verdict as a judgement, reports.

Module-level hooks add the options and, in pytest_configure, resolve them and register a
:class:`HaystackPlugin` object that holds the resolved settings (hooks such as
pytest_lceval_grid receive no config, so the object carries it).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..evaluation import CellRun
from ..grid import Cell
from ..models.stored import StoredModel
from ..plugin import SETTINGS
from ..results import CellResult, Judgement
from ..settings import Settings, lookup
from . import config as haystack_config
from .data import available_tasks, load_task
from .fetch import FetchError, fetch_tasks, names_to_fetch
from .plan import SUITE, cells
from .runner import HaystackRun
from .verdict import FAIL

if TYPE_CHECKING:
    from ..evaluation import Evaluator

HAYSTACK = pytest.StashKey[haystack_config.HaystackSettings]()
PLUGIN_NAME = "lceval-haystack"


def pytest_addoption(parser: pytest.Parser) -> None:
    haystack_config.add_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Resolve after the core plugin (trylast): its settings are in the stash by then."""
    core = config.stash[SETTINGS]
    fetched = _fetch(config) if config.getoption("haystack_fetch") else None
    settings = haystack_config.resolve(config, core, fetched)
    config.stash[HAYSTACK] = settings
    for length in settings.lengths:
        config.addinivalue_line(
            "markers", f"len_{length.label}: Task Haystack cells with {length.n_task} tasks x "
                       f"{length.n_shot} shots per class")
    config.pluginmanager.register(HaystackPlugin(settings), PLUGIN_NAME)


def _fetch(config: pytest.Config) -> Path:
    """--haystack-fetch: the controller downloads what is missing before workers start."""
    cache_value, _ = lookup(config, "haystack_cache")
    cache = Path(cache_value).expanduser() if cache_value else haystack_config.default_cache()
    target = cache / "llicl"
    if hasattr(config, "workerinput"):
        return target
    url_value, _ = lookup(config, "haystack_fetch_url")
    spec_value, _ = lookup(config, "haystack_tasks")
    try:
        names = names_to_fetch(str(spec_value or "main16"))
        report = fetch_tasks(names, target, str(url_value or haystack_config.DEFAULT_FETCH_URL))
    except (ValueError, FetchError) as exc:
        raise pytest.UsageError(f"pytest-lceval: --haystack-fetch: {exc}") from None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"haystack: {report.summary()} into {target}")
    return target


@pytest.fixture
def lc_haystack(lc_eval: CellRun, lc_model: StoredModel,
                pytestconfig: pytest.Config) -> HaystackRun:
    """Run and judge one Task Haystack cell: ``lc_haystack.check(lc_haystack.run(lc_cell))``."""
    settings = pytestconfig.stash[HAYSTACK]
    return HaystackRun(lc_eval, settings, _batched(lc_model, settings.batch_size))


def _batched(model: StoredModel, batch_size: int) -> StoredModel:
    """The session model with larger backend calls: a Task Haystack stream sends hundreds of
    queries on one prefix, and the backend scores a call's queries together. Same store,
    same call counter."""
    if batch_size == model.batch_size:
        return model
    view = StoredModel(model.backend, model.store, batch_size)
    view.calls = model.calls
    return view


class HaystackPlugin:
    """Hooks that need the resolved settings."""

    def __init__(self, settings: haystack_config.HaystackSettings) -> None:
        self.settings = settings

    @pytest.hookimpl
    def pytest_lceval_grid(self, suite: str, settings: Settings) -> list[Cell] | None:
        if suite != SUITE:
            return None
        for name in self.settings.tasks:  # read (cached) now: a broken file is found at start
            load_task(self.settings.root, name)
        return cells(self.settings, settings)

    @pytest.hookimpl
    def pytest_lceval_task_names(self, config: pytest.Config) -> list[str]:
        return [*self.settings.tasks, *available_tasks(self.settings.root)]

    @pytest.hookimpl
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        hs = self.settings
        lengths = ",".join(length.label for length in hs.lengths)
        line = (f"haystack: {hs.source} ({len(hs.tasks)} tasks from {hs.root}), lengths "
                f"{lengths} (tasks x shots), {hs.permutations} permutations x {hs.resamples} "
                f"resamples, test size {hs.test_size}, setting {','.join(hs.settings)}")
        lines = [line]
        if hs.offline:
            lines.append("haystack: no llicl/ in --lceval-data: running the self-made offline "
                         f"pack with reduced defaults ({hs.reduced or 'none'})")
        return lines

    @pytest.hookimpl
    def pytest_lceval_judge(self, result: CellResult, evaluator: Evaluator) -> Judgement | None:
        if result.suite != SUITE or "verdict" not in result.metrics:
            return None
        return judgement(result.metrics)

    @pytest.hookimpl
    def pytest_lceval_session_finish(self, config: pytest.Config, run_dir: Path,
                                     results: list[CellResult]) -> None:
        from .report import write_reports

        mine = [r for r in results if r.suite == SUITE]
        if mine:
            written = write_reports(run_dir, mine)
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                for line in written.summary_lines:
                    reporter.write_line(line)


def judgement(metrics: dict[str, Any]) -> Judgement:
    """The t-test verdict as a judgement; EXCEL passes (positive transfer)."""
    verdict = metrics["verdict"]
    s_acc, l_acc = metrics["s_acc"], metrics["l_acc"]
    n = metrics["resamples"]
    stats = f"t={_number(metrics['t'])}, p={_number(metrics['p'])}"
    where = (f" at stream index {metrics['stream_index']} of {metrics['n_task']}"
             if metrics.get("stream_index") is not None else "")
    meaning = {"FAIL": "significantly worse than", "EXCEL": "significantly better than",
               "PASS": "not significantly different from"}[verdict]
    message = (f"{verdict}: {metrics['setting']} Lifelong ICL accuracy {l_acc:.3f}{where} is "
               f"{meaning} Single-task ICL {s_acc:.3f} (paired t-test over {n} resamples, "
               f"{stats}, two-sided p<0.05)")
    for note in ("verdict_note", "rank_note"):
        if metrics.get(note):
            message += f"; {metrics[note]}"
    properties = {"verdict": verdict, "t": metrics["t"], "p": metrics["p"],
                  "s_acc": s_acc, "l_acc": l_acc}
    return Judgement("task_haystack", verdict != FAIL, message, properties)


def _number(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.3g}"
