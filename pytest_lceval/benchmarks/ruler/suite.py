"""The recall suite: RULER's synthetic tasks as HELMET's recall category runs them."""

from __future__ import annotations

from ...run.generation_suite import GenerationSuite
from . import tasks
from .common import HELMET_RULER


def recall_suite(niah_placement: str = "depths", ruler: str = HELMET_RULER) -> GenerationSuite:
    """A new suite object; ``niah_placement`` is ``--lceval-niah-placement``, ``ruler``
    ``--lceval-ruler`` (ruler_plugin.py)."""
    return GenerationSuite("recall", tasks.tasks(niah_placement, ruler),
                           "synthetic recall cells (HELMET's recall category, RULER generators), "
                           "task x length x depth")
