"""The built-in suites of generation tasks, each declaring its tasks; Task Haystack declares its
own (haystack/plugin)."""

from __future__ import annotations

import pytest

from .generation_suite import GenerationSuite
from .suite import Suite
from .tasks import (
    helmet_cite,
    helmet_icl,
    helmet_longqa,
    helmet_rag,
    helmet_rerank,
    helmet_summ,
    longbench,
    longbench_judged,
    recall,
)
from .tasks.base import GenerationTask
from .tasks.recall_common import HELMET_RULER


def builtin_suites(niah_placement: str = "depths", ruler: str = HELMET_RULER
                   ) -> list[GenerationSuite]:
    """New suite objects for one session; ``niah_placement`` is ``--lceval-niah-placement``,
    ``ruler`` ``--lceval-ruler``."""
    return [
        GenerationSuite("recall", recall.tasks(niah_placement, ruler),
                        "synthetic recall cells (HELMET's recall category, RULER generators), "
                        "task x length x depth"),
        GenerationSuite("longbench100", longbench.TASKS + longbench_judged.TASKS,
                        "100-LongBench's length-controllable tasks, task x length, with "
                        "LongScore on long cells"),
        GenerationSuite("rag", helmet_rag.TASKS,
                        "HELMET's retrieval-augmented generation: question + passages filling "
                        "the length, the gold passage at each depth; SubEM"),
        GenerationSuite("rerank", helmet_rerank.TASKS,
                        "HELMET's passage re-ranking: a query and passages with ids, the "
                        "model's ranking scored by NDCG@10"),
        GenerationSuite("icl", helmet_icl.TASKS,
                        "HELMET's many-shot in-context learning: balanced rounds of "
                        "demonstrations filling the length; accuracy"),
        GenerationSuite("cite", helmet_cite.TASKS,
                        "HELMET's generation with citations (ALCE): correctness and citation "
                        "recall/precision"),
        GenerationSuite("longqa", helmet_longqa.TASKS,
                        "HELMET's long-document QA: NarrativeQA (judged), ∞Bench-style QA "
                        "(ROUGE-L F1) and multiple choice cut to the length"),
        GenerationSuite("summ", helmet_summ.TASKS,
                        "HELMET's summarisation (judged): ∞Bench Sum's L-Eval substitutes and "
                        "Multi-LexSum, the document cut to the length"),
    ]


def builtin_task(name: str) -> GenerationTask:
    """A built-in task by name, for tests and benchmarks that build cases without a session."""
    for suite in builtin_suites():
        if name in suite.tasks:
            return suite.tasks[name]
    raise KeyError(f"no built-in task named {name!r}")


def builtin_tasks(suite: str) -> list[GenerationTask]:
    """The tasks of a built-in suite, for tests and benchmarks."""
    by_name = {s.name: s for s in builtin_suites()}
    return list(by_name[suite].tasks.values())


@pytest.hookimpl
def pytest_lceval_suites(config: pytest.Config) -> list[Suite]:
    return list(builtin_suites(config.getoption("lceval_niah_placement") or "depths",
                               config.getoption("lceval_ruler") or HELMET_RULER))
