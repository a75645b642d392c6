"""The rubrics by name, and the rating fields several rubrics share.

A rubric (``tasks.judged.Rubric``) turns (output, case) into ``Ask`` objects and their ratings
into a score from 0 to 1. Each benchmark family writes its own rubrics beside its tasks (the
paper's method in the paper's folder) and declares them here when its module is imported
(``declare``), so the core lists none of them. A task holds its rubric object; the by-name
``RUBRICS`` is for an author's task that reuses a family's rubric through the public API.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..tasks.judged import Field, Rubric

FLUENCY = Field("fluency", 0, 1)
SUPPORTED_SENTENCES = (Field("precision", 0, None, at_most="sentence_count"),
                       Field("sentence_count", 0))
"""A precision reply: supported sentences, at most the sentences counted."""

_DECLARED: dict[str, Rubric] = {}
RUBRICS: Mapping[str, Rubric] = MappingProxyType(_DECLARED)
"""Every declared rubric by its name (the name results record as ``judge_rubric``)."""


def declare(*rubrics: Rubric) -> None:
    """Make ``rubrics`` known by name; a name another kind of rubric holds is a ValueError, as
    two families' rubrics under one name would mix their results. The same rubric declared again
    replaces the one held: its module imported anew (pytester takes the modules an inner run
    imported out of ``sys.modules``, and the next run imports them again)."""
    for rubric in rubrics:
        held = _DECLARED.get(rubric.name)
        if held is not None and type(held).__qualname__ != type(rubric).__qualname__:
            raise ValueError(f"rubric {rubric.name!r} is declared twice: "
                             f"{type(held).__qualname__} and {type(rubric).__qualname__}")
        _DECLARED[rubric.name] = rubric
