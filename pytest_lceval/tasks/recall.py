"""The recall suite (HELMET's synthetic recall category): RULER's NIAH variants and JSON KV.

HELMET's recall subset is json_kv, niah_multikey_2 (MK needle), niah_multikey_3 (MK UUID) and
niah_multivalue (MV); the other NIAH variants are RULER's and run in the same suite.

| task | haystack | key | value(s) | metric |
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

Choices, each explained where it is made:

- Every prompt has HELMET's two in-context demonstrations (own keys, never the test key) and
  ends with HELMET's answer prefix, for base and chat-template models alike (``recall_common``).
- Multi-value and multi-query needles lie at random depths (as in RULER), so those two tasks
  have no depth axis; their needles' depths are in ``Case.meta["key_depths"]``.
- Depth is counted in tokens as the share of the rest of the context before the key item, so 0 %
  is first and 100 % last at any length (``haystack_text``).
- Case i draws the same keys, values and demonstrations at every length and depth, so heatmap
  rows and columns are paired (``recall_common.case_rngs``).
- Length: prompt (template, BOS) + generation budget within [99 %, 100 %] of the cell length,
  measured with the model's renderer; haystacks of whole items (needles, JSON pairs) coarser
  than 1 % of a small length are accepted within one item (``fitting``).

Generators live in ``recall_niah`` and ``recall_json``; the token-level context builder in
``haystack_text``, ``haystack_items`` and ``fitting``.
"""

from __future__ import annotations

from .base import GenerationTask, register_all
from .recall_json import JsonKvTask
from .recall_niah import NiahTask

MULTI_ANSWER_TOKENS = 50
"""Generation budget for a UUID or four numbers."""

TASKS: list[GenerationTask] = [
    NiahTask("niah_single_1", "noise"),
    NiahTask("niah_single_2", "essay"),
    NiahTask("niah_single_3", "essay", value_kind="uuid", max_new_tokens=MULTI_ANSWER_TOKENS),
    NiahTask("niah_multikey_1", "essay", distractors=3),
    NiahTask("niah_multikey_2", "needle"),
    NiahTask("niah_multikey_3", "needle", key_kind="uuid", value_kind="uuid",
             max_new_tokens=MULTI_ANSWER_TOKENS),
    NiahTask("niah_multivalue", "essay", values=4, max_new_tokens=MULTI_ANSWER_TOKENS),
    NiahTask("niah_multiquery", "essay", queries=4, max_new_tokens=MULTI_ANSWER_TOKENS),
    JsonKvTask(),
]

register_all(TASKS)
