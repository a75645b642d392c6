"""How HELMET reads an output before it scores or judges it: ``eval.py`` puts the answer prefix
before a raw prompt's output (``scored``), and ``utils.parse_output`` takes the answer after a
prefix (``parse_output``). HELMET's tasks, and the RULER and recall tasks HELMET runs, score
through these, so each task records its prefix in its cases' ``meta`` (``OUTPUT_PREFIX``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

OUTPUT_PREFIX = "output_prefix"
"""The case ``meta`` key of the text HELMET puts before an output it scores."""


def helmet_parse_output(output: str, prefix: str) -> str:
    """HELMET's ``parse_output``: the rest of the line after the first ``prefix`` (any case),
    else the first line; a repeated prefix removed; stripped."""
    found = re.search(f"{re.escape(prefix)}(.*)", output, flags=re.IGNORECASE)
    line = (found[1] if found else output.split("\n", 1)[0]).strip()
    return re.sub(f"^{re.escape(prefix)}", "", line, flags=re.IGNORECASE).strip()


def helmet_scored(output: str, meta: Mapping[str, Any]) -> str:
    """The output as HELMET scores and judges it: without a chat template the prompt ended with
    an answer prefix ("Answer:", "Summary:"), which ``eval.py`` puts before the output
    (``system_template``, "for the sake of parsing"); a task records it in ``meta``."""
    return str(meta.get(OUTPUT_PREFIX, "")) + output
