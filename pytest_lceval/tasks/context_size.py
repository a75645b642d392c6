"""``--lceval-context-size``: how much context a prompt holds where the reference code decides
it for itself.

- ``reference`` (default): as the code that produced the papers' numbers sizes it. The recall
  tasks take the size RULER f682453's search picks in the model's tokens (whole steps of 500
  essay words, 25 or 5 lines, 10 words; ``benchmarks/ruler/size_search.py``); long-QA and
  summarisation cut their document at HELMET's fixed token count for the length (``L - 200 -
  generation``, Multi-LexSum ``L - 700``; ``benchmarks/helmet/helmet_cut.py``). A cell's prompt
  then falls short of its length by up to a step or by what HELMET's margin leaves.
- ``fill``: the prompt plus the generation budget fills 99-100 % of the cell, for every task
  alike, so a cell's length means the same for all of them (the only rule before issue #34).

Tasks whose size no reference code decides (JSON KV, RAG, re-rank, ICL, cite, 100-LongBench,
Task Haystack) are the same under both.
"""

from __future__ import annotations

import pytest

SIZES = ("reference", "fill")
REFERENCE, FILL = SIZES


def context_size(config: pytest.Config) -> str:
    """The session's ``--lceval-context-size`` (``reference`` when not given)."""
    return str(config.getoption("lceval_context_size", None) or REFERENCE)
