"""Task Haystack's options, resolved once (CLI > ini > default) into a frozen object.

Without a data directory the suite runs on the self-made offline pack with reduced defaults
(few permutations, a small test size) so that ``pytest suites/`` stays a few minutes on a CPU;
every explicit option still wins, and results and the report header say what was reduced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ...foundation.data import FIXTURES
from ...settings import Settings, convert, lookup
from .data import MAX_RESAMPLES, available_tasks, resolve_task_names
from .prompts import SETTINGS

T = TypeVar("T")

LLICL_FOLDER = "llicl"
"""The data directory's folder of Task Haystack's tasks; the offline pack stands in without it."""
OFFLINE_PACK = FIXTURES / "llicl_offline"
DEFAULTS = {"tasks": "main16", "permutations": 5, "resamples": 5, "test_size": 100}
OFFLINE_DEFAULTS = {"tasks": "all", "permutations": 1, "resamples": 3, "test_size": 4}
"""Used only on the offline pack and only for options the user did not set."""
REDUCED_HAYSTACK = {"tasks": "main16", "permutations": 1, "resamples": 2, "test_size": 5}
"""The reduced grid (``models.grid_profile``) on the real data: one task order, the fewest
resamples a paired t-test takes, five test inputs per task."""


@dataclass(frozen=True)
class LengthSetting:
    """One point of the length axis: n_task tasks with n_shot demonstrations per class.

    Scale-Shot varies n_shot (16 tasks), Scale-Task varies n_task (2 shots); the token length
    this gives is measured per test, never assumed.
    """

    n_task: int
    n_shot: int

    @property
    def label(self) -> str:
        return f"{self.n_task}t{self.n_shot}s"


@dataclass(frozen=True)
class HaystackSettings:
    root: Path
    """The folder holding the task folders."""
    source: str
    """'data:llicl', 'cache:llicl' or 'fixtures:llicl_offline' (recorded in every result)."""
    tasks: tuple[str, ...]
    """The task set, in its canonical order."""
    lengths: tuple[LengthSetting, ...]
    permutations: int
    resamples: int
    test_size: int
    settings: tuple[str, ...]
    """Controlled settings to run (recall = Task Haystack)."""
    batch_size: int
    """Requests per backend call for queries that share a prefix (more = more prefix reuse)."""
    reduced: str = ""
    """Which defaults were reduced for the offline pack (empty when none)."""

    @property
    def offline(self) -> bool:
        return self.source.startswith("fixtures")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    add = group.addoption
    add("--haystack-tasks", dest="haystack_tasks", default=None,
        help="Task Haystack tasks: main16 (default), permissive16, all64, all80, all, or a comma "
             "list")
    add("--haystack-shots", dest="haystack_shots", default=None,
        help="demonstrations per class, comma list (Scale-Shot; default 1)")
    add("--haystack-ntasks", dest="haystack_ntasks", default=None,
        help="tasks in the stream, comma list (Scale-Task; default: the whole task set)")
    add("--haystack-permutations", dest="haystack_permutations", default=None,
        help=f"task orders per length setting (default {DEFAULTS['permutations']})")
    add("--haystack-resamples", dest="haystack_resamples", default=None,
        help=f"few-shot resamples paired in the t-test, 2..{MAX_RESAMPLES} (default 5)")
    add("--haystack-test-size", dest="haystack_test_size", default=None,
        help=f"test inputs per task (default {DEFAULTS['test_size']})")
    add("--haystack-setting", dest="haystack_setting", default=None,
        help=f"controlled setting(s), comma list: {', '.join(SETTINGS)} (default recall)")
    add("--haystack-batch-size", dest="haystack_batch_size", default=None,
        help="queries sharing a prefix sent per backend call (default 64)")
    for name in ("tasks", "shots", "ntasks", "permutations", "resamples", "test_size",
                 "setting"):
        parser.addini(f"haystack_{name}", f"default --haystack-{name.replace('_', '-')}")


def resolve(config: pytest.Config, core: Settings) -> HaystackSettings:
    """Resolve the options (after the core's settings, which name the data folders)."""
    root, source = _data_root(core)
    offline = source.startswith("fixtures")
    shrunk = offline or core.grid.reduced
    defaults = OFFLINE_DEFAULTS if offline else REDUCED_HAYSTACK if shrunk else DEFAULTS
    reduced: list[str] = []

    def get(name: str, parse: Callable[[Any], T], fix: str) -> T:
        value, where = lookup(config, f"haystack_{name}")
        if value is None:
            value, where = defaults[name], "default"
            if shrunk and value != DEFAULTS[name]:
                reduced.append(f"{name}={value}")
        return convert(value, where, f"--haystack-{name.replace('_', '-')}", parse, fix)

    available = available_tasks(root)
    tasks = get("tasks", lambda v: resolve_task_names(str(v), available),
                f"Name a set (main16, permissive16, all64, all80, all) or tasks under {root}.")
    shots = _ints(config, "shots", "1", 1, 64, "Give shots per class such as 1,2,4,8.")
    ntasks = _ints(config, "ntasks", str(len(tasks)), 1, len(tasks),
                   f"Give stream sizes between 1 and the {len(tasks)} tasks of the set.")
    setting_value, where = lookup(config, "haystack_setting")
    settings = convert(setting_value or "recall", where, "--haystack-setting", _settings,
                       f"Choose from {', '.join(SETTINGS)}.")
    batch_value, where = lookup(config, "haystack_batch_size")
    return HaystackSettings(
        root=root, source=source, tasks=tasks,
        lengths=tuple(LengthSetting(n, k) for n in ntasks for k in shots),
        permutations=get("permutations", lambda v: _bounded(v, 1, 1000), "Give e.g. 5."),
        resamples=get("resamples", lambda v: _bounded(v, 2, MAX_RESAMPLES),
                      f"A paired t-test needs 2..{MAX_RESAMPLES} resamples."),
        test_size=get("test_size", lambda v: _bounded(v, 1, 100_000), "Give e.g. 100."),
        settings=settings,
        batch_size=convert(batch_value or 64, where, "--haystack-batch-size",
                           lambda v: _bounded(v, 1, 1_000_000), "Give e.g. 64."),
        reduced=", ".join(reduced),
    )


def _data_root(core: Settings) -> tuple[Path, str]:
    """--lceval-data's llicl/ first, then the fetched one, else the offline pack."""
    if core.data_dir is not None and (core.data_dir / LLICL_FOLDER).is_dir():
        return core.data_dir / LLICL_FOLDER, f"data:{LLICL_FOLDER}"
    if core.fetched_data is not None and (core.fetched_data / LLICL_FOLDER).is_dir():
        return core.fetched_data / LLICL_FOLDER, f"cache:{LLICL_FOLDER}"
    return OFFLINE_PACK, "fixtures:llicl_offline"


def _ints(config: pytest.Config, name: str, default: str, low: int, high: int,
          fix: str) -> tuple[int, ...]:
    value, where = lookup(config, f"haystack_{name}")

    def parse(text: Any) -> tuple[int, ...]:
        items = [part for part in str(text).split(",") if part.strip()]
        if not items:
            raise ValueError("the list is empty")
        return tuple(sorted({_bounded(part, low, high) for part in items}))

    return convert(value or default, where, f"--haystack-{name}", parse, fix)


def _bounded(text: Any, low: int, high: int) -> int:
    number = int(str(text).strip())
    if not low <= number <= high:
        raise ValueError(f"must be between {low} and {high}")
    return number


def _settings(text: Any) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(p.strip() for p in str(text).split(",") if p.strip()))
    unknown = [name for name in names if name not in SETTINGS]
    if unknown or not names:
        raise ValueError(f"unknown setting(s) {', '.join(unknown) or '(none)'}")
    return names
