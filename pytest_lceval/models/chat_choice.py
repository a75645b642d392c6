"""Which rendering a task's prompts get: the ``--chat-template`` choice, or under ``auto`` the
paper's default for the task's category.

HELMET sets ``use_chat_template`` per category: false for recall (and RULER), RAG, re-ranking
and ICL, so an instruct model reads the raw prompt there; true for long QA, summarisation and
citations. A task states its category's value as a ``use_chat_template`` attribute; a task that
states none follows the model (its template when it has one, as ``auto`` always did). ``on`` and
``off`` apply to every task. A chat API applies its template itself (``Renderer.fixed``), so
there the template stays whatever the task prefers, as it does in HELMET's API runs.
"""

from __future__ import annotations

from .base import Renderer


def task_default(task: object) -> bool | None:
    """The task's ``use_chat_template`` (HELMET's per-category value), or None if it has none."""
    value = getattr(task, "use_chat_template", None)
    return value if isinstance(value, bool) else None


def renderer_for(renderer: Renderer, choice: str, task: object) -> Renderer:
    """The model's renderer, without its template when ``choice`` is ``auto`` and the task's
    category runs without one."""
    if choice == "auto" and task_default(task) is False:
        return renderer.without_template()
    return renderer
