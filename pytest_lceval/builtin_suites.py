"""The built-in suites of generation tasks; Task Haystack registers its own (haystack/plugin)."""

from __future__ import annotations

import pytest

from .generation_suite import GenerationSuite
from .suite import Suite


@pytest.hookimpl
def pytest_lceval_suites(config: pytest.Config) -> list[Suite]:
    return [
        GenerationSuite("recall", "synthetic recall cells (HELMET's recall category, RULER "
                                  "generators), task x length x depth"),
        GenerationSuite("longbench100", "100-LongBench's length-controllable tasks, task x "
                                        "length, with LongScore on long cells"),
        GenerationSuite("rag", "HELMET's retrieval-augmented generation: question + passages "
                               "filling the length, the gold passage at each depth; SubEM"),
        GenerationSuite("rerank", "HELMET's passage re-ranking: a query and passages with ids, "
                                  "the model's ranking scored by NDCG@10"),
        GenerationSuite("icl", "HELMET's many-shot in-context learning: balanced rounds of "
                               "demonstrations filling the length; accuracy"),
        GenerationSuite("cite", "HELMET's generation with citations (ALCE): correctness and "
                                "citation recall/precision"),
        GenerationSuite("longqa", "HELMET's long-document QA: NarrativeQA (judged), ∞Bench-style "
                                  "QA (ROUGE-L F1) and multiple choice cut to the length"),
        GenerationSuite("summ", "HELMET's summarisation (judged): ∞Bench Sum's L-Eval "
                                "substitutes and Multi-LexSum, the document cut to the length"),
    ]
