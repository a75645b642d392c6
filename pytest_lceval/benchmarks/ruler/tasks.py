"""The recall suite (HELMET's synthetic recall category): RULER's synthetic tasks and JSON KV.

HELMET's recall subset is json_kv, niah_multikey_2 (MK needle), niah_multikey_3 (MK UUID) and
niah_multivalue (MV); the other tasks are RULER's (HELMET runs them in its ``ruler`` config) and
run in the same suite. RULER's QA tasks come with the RAG data, not here.

| task | haystack | key | answer | metric |
| --- | --- | --- | --- | --- |
| niah_single_1 | noise (one repeated line) | word | number | string_match_all |
| niah_single_2 | essay | word | number | string_match_all |
| niah_single_3 | essay | word | UUID | string_match_all |
| niah_multikey_1 | essay, 3 distractor needles | word | number | string_match_all |
| niah_multikey_2 | distractor needles only | word | number | string_match_all |
| niah_multikey_3 | distractor needles only | UUID | UUID | string_match_all |
| niah_multivalue | essay | word | 4 numbers | string_match_all |
| niah_multiquery | essay | 4 words | 4 numbers | string_match_all |
| json_kv | JSON object of UUID pairs | UUID | UUID | SubEM |
| vt | noise, one 4-hop assignment chain | number | 5 variables | string_match_all |
| cwe | numbered word list, 10 words repeated | - | 10 words | string_match_all |
| fwe | Zipf-distributed coded words | - | 3 words | string_match_all |

Choices, each explained where it is made:

- Prompts are HELMET's templates and end with HELMET's answer prefix, for base and
  chat-template models alike (``common``). Only JSON KV has HELMET's two in-context
  demonstrations (own keys, never the test key); HELMET gives RULER tasks none, except the one
  solved example RULER itself puts before vt and cwe.
- No stop string: HELMET's recall runs with ``stop_new_line: false`` and scores the whole
  output (``common``).
- Under ``--chat-template auto`` the recall tasks read the raw prompt (HELMET's
  ``use_chat_template: false``); ``on`` and ``off`` decide for themselves (``chat_choice``).
- Multi-value and multi-query needles, the vt chain and the cwe / fwe lists have no single
  depth (as in RULER), so those tasks have no depth axis; needles' depths are in
  ``Case.meta["key_depths"]``.
- Depth is counted in tokens as the share of the rest of the context before the key item, so 0 %
  is first and 100 % last at any length (``filler_text``).
- VT, CWE and FWE are generated as RULER f682453 wrote HELMET's files (``--lceval-ruler``
  c3f5e3b: as RULER's code does since 2025); NIAH is the same in both (``common``).
- Case i draws the same keys, values and demonstrations at every length and depth, so heatmap
  rows and columns are paired (``common.case_rngs``).
- Length: prompt (template, BOS) + generation budget within the cell's length, measured with
  the model's renderer. The RULER tasks' haystacks have the size RULER f682453's search picks
  (``size_search``; ``--lceval-context-size fill``, JSON KV, and ``--lceval-ruler c3f5e3b``:
  within [99 %, 100 %] of the length, haystacks of whole items coarser than 1 % of a small
  length accepted within one item, ``fitting``).

Generators live in ``niah``, ``json_kv``, ``variable_tracking`` and ``common_words``;
the token-level context builder in ``filler_text``, ``filler_items`` and ``fitting``.
"""

from __future__ import annotations

from typing import Any

from ...tasks.base import GenerationTask
from ...tasks.context_size import REFERENCE
from .common import HELMET_RULER
from .common_words import CommonWordsTask, FrequentWordsTask
from .json_kv import JsonKvTask
from .niah import NiahTask
from .variable_tracking import VariableTrackingTask

LONG_ANSWER_TOKENS = 100
"""HELMET's generation budget (configs/ruler.yaml, recall.yaml) for a UUID key's needle among
UUID needles (niah_multikey_3), four numbers for four keys (niah_multiquery) and JSON KV; the
other NIAH tasks and VT and FWE get the tasks' default 50, CWE 100."""
PLACEMENTS = ("depths", "ruler")
"""``--lceval-niah-placement``: the queried needle at each depth of the grid (default), or at a
depth sampled per case as RULER samples it (no depth axis)."""


def tasks(placement: str = "depths", ruler: str = HELMET_RULER,
          size: str = REFERENCE) -> tuple[GenerationTask, ...]:
    """The recall tasks; ``placement`` is one of PLACEMENTS, ``ruler`` of RULER_CODES (VT, CWE
    and FWE follow that RULER's generators; NIAH writes the same cases in both; every RULER
    task's size follows that RULER's search), ``size`` of ``context_size.SIZES``."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown NIAH placement {placement!r}; known: {', '.join(PLACEMENTS)}")
    sampled = placement == "ruler"

    def niah(name: str, haystack: str, **options: Any) -> NiahTask:
        return NiahTask(name, haystack, ruler=ruler, size=size, **options)

    return (
        niah("niah_single_1", "noise", sampled=sampled),
        niah("niah_single_2", "essay", sampled=sampled),
        niah("niah_single_3", "essay", value_kind="uuid", sampled=sampled),
        niah("niah_multikey_1", "essay", distractors=3, sampled=sampled),
        niah("niah_multikey_2", "needle", sampled=sampled),
        niah("niah_multikey_3", "needle", key_kind="uuid", value_kind="uuid",
             max_new_tokens=LONG_ANSWER_TOKENS, sampled=sampled),
        niah("niah_multivalue", "essay", values=4),
        niah("niah_multiquery", "essay", queries=4, max_new_tokens=LONG_ANSWER_TOKENS),
        JsonKvTask(),
        VariableTrackingTask(ruler=ruler, size=size),
        CommonWordsTask(ruler=ruler, size=size),
        FrequentWordsTask(ruler=ruler, size=size),
    )
