"""HELMET's realistic categories, one suite each; a new category is a module of tasks here and
one line below."""

from __future__ import annotations

import pytest

from ...run.generation_suite import GenerationSuite
from ...tasks.context_size import REFERENCE, context_size
from . import cite, icl, longqa, rag, rerank, summ


def summ_wording(config: pytest.Config) -> str:
    """``--lceval-summ-prompts``: the wording the session's summarisation tasks ask in."""
    return str(config.getoption("lceval_summ_prompts") or summ.WORDINGS[0])


def helmet_suites(config: pytest.Config | None = None) -> list[GenerationSuite]:
    """New suite objects for one session, with the categories' options read from ``config``
    (their defaults without it)."""
    summ_prompts = summ_wording(config) if config is not None else summ.WORDINGS[0]
    size = context_size(config) if config is not None else REFERENCE
    return [
        GenerationSuite("rag", rag.TASKS,
                        "HELMET's retrieval-augmented generation: question + passages filling "
                        "the length, the gold passage at each depth; SubEM"),
        GenerationSuite("rerank", rerank.TASKS,
                        "HELMET's passage re-ranking: a query and passages with ids, the "
                        "model's ranking scored by NDCG@10"),
        GenerationSuite("icl", icl.TASKS,
                        "HELMET's many-shot in-context learning: balanced rounds of "
                        "demonstrations filling the length; accuracy"),
        GenerationSuite("cite", cite.TASKS,
                        "HELMET's generation with citations (ALCE): correctness and citation "
                        "recall/precision"),
        GenerationSuite("longqa", longqa.sized(size),
                        "HELMET's long-document QA: NarrativeQA (judged), ∞Bench-style QA "
                        "(ROUGE-L F1) and multiple choice cut to the length"),
        GenerationSuite("summ", summ.worded(summ_prompts, size),
                        "HELMET's summarisation (judged): ∞Bench Sum's L-Eval substitutes and "
                        "Multi-LexSum, the document cut to the length"),
    ]
