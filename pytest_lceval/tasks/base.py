"""What a task is: data that builds a cell's cases and scores an output. It never calls a model."""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Protocol

from ..data import DataSource
from ..grid import Cell
from ..models.base import Renderer, Tokenizer
from ..records import Case


class CellDoesNotFit(Exception):
    """The cell cannot be built within its budget; the message names the numbers."""


@dataclass(frozen=True)
class BuildContext:
    """What a generator may use: the tokenizer and renderer that lengths are counted with, data,
    and the run seed.

    The tokenizer is the model's own, or the reference tokenizer of --lceval-ref-tokenizer
    (reference_tokenizer.py); the renderer always applies the model's chat template, so the
    model is fed the text that was counted. Generators count and slice only through these two.
    """

    tokenizer: Tokenizer
    renderer: Renderer
    data: DataSource
    seed: int


class GenerationTask(Protocol):
    """A task scored on generated text (recall, QA...)."""

    # Read-only properties, so that frozen dataclasses satisfy the protocol.
    @property
    def name(self) -> str: ...

    @property
    def suite(self) -> str:
        """The suite (and category marker) the task belongs to."""
        ...

    @property
    def uses_depth(self) -> bool:
        """Whether the task places key information at a depth (so the grid sweeps depths)."""
        ...

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        """The cell's cases, deterministic in (cell, seed); raises CellDoesNotFit."""
        ...

    def score(self, output: str, case: Case) -> float:
        """Score 0..1 of one output."""
        ...


_TASKS: dict[str, GenerationTask] = {}


def register(task: GenerationTask) -> GenerationTask:
    """Add a task; re-importing the module that defines it (pytester, reloads) replaces it."""
    existing = _TASKS.get(task.name)
    if existing is not None and _origin(existing) != _origin(task):
        raise ValueError(f"task {task.name!r} is registered twice: by {_origin(existing)} and "
                         f"by {_origin(task)}; rename one")
    _TASKS[task.name] = task
    return task


def _origin(task: GenerationTask) -> str:
    return f"{type(task).__module__}.{type(task).__qualname__}"


def register_all(tasks: list[GenerationTask]) -> None:
    for task in tasks:
        register(task)


def get_task(name: str) -> GenerationTask:
    _load_builtin_tasks()
    if name not in _TASKS:
        close = difflib.get_close_matches(name, list(_TASKS), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown task {name!r}.{hint} Known: {', '.join(sorted(_TASKS))}")
    return _TASKS[name]


def tasks_of_suite(suite: str) -> list[GenerationTask]:
    _load_builtin_tasks()
    return [task for task in _TASKS.values() if task.suite == suite]


def all_task_names() -> list[str]:
    _load_builtin_tasks()
    return sorted(_TASKS)


_BUILTIN_MODULES: list[str] = ["pytest_lceval.tasks.recall", "pytest_lceval.tasks.longbench",
                               "pytest_lceval.tasks.longbench_judged",
                               "pytest_lceval.tasks.helmet_rag",
                               "pytest_lceval.tasks.helmet_icl",
                               "pytest_lceval.tasks.helmet_rerank",
                               "pytest_lceval.tasks.helmet_cite",
                               "pytest_lceval.tasks.helmet_longqa",
                               "pytest_lceval.tasks.helmet_summ",
                               ]
"""Modules whose import registers the built-in generation tasks."""


def _load_builtin_tasks() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)
