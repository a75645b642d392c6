"""The recall suite: RULER's synthetic tasks as HELMET's recall category runs them."""

from __future__ import annotations

import pytest

from ...run.generation_suite import GenerationSuite
from ...tasks.context_size import REFERENCE, context_size
from . import tasks
from .common import HELMET_RULER


def placement(config: pytest.Config) -> str:
    """``--lceval-niah-placement``: where the NIAH tasks put the queried needle."""
    return str(config.getoption("lceval_niah_placement") or tasks.PLACEMENTS[0])


def ruler_code(config: pytest.Config) -> str:
    """``--lceval-ruler``: the RULER commit the generators follow."""
    return str(config.getoption("lceval_ruler") or HELMET_RULER)


def recall_suite(config: pytest.Config | None = None) -> GenerationSuite:
    """A new suite object, its tasks as ``--lceval-niah-placement``, ``--lceval-ruler`` and
    ``--lceval-context-size`` say (ruler_plugin.py, tasks/context_size.py; their defaults
    without ``config``)."""
    niah_placement, ruler, size = (
        (placement(config), ruler_code(config), context_size(config)) if config is not None
        else (tasks.PLACEMENTS[0], HELMET_RULER, REFERENCE))
    return GenerationSuite("recall", tasks.tasks(niah_placement, ruler, size),
                           "synthetic recall cells (HELMET's recall category, RULER generators), "
                           "task x length x depth")
