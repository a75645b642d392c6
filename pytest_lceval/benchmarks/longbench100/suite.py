"""The longbench100 suite: 100-LongBench's tasks, LongScore on its long cells."""

from __future__ import annotations

from ...run.generation_suite import GenerationSuite
from . import judged_tasks, tasks


def longbench100_suite() -> GenerationSuite:
    return GenerationSuite("longbench100", tasks.TASKS + judged_tasks.TASKS,
                           "100-LongBench's length-controllable tasks, task x length, with "
                           "LongScore on long cells")
