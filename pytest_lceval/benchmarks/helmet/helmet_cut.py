"""HELMET's document cut for a length, under ``--lceval-context-size reference`` (the default):
what HELMET's own code keeps of a long-QA or summarisation document at each length.

HELMET cuts the document twice. ``data.py``'s ``truncate_llama2`` keeps its first tokens up to
a fixed count N, then " ... [the rest of the text is omitted]". N is the dataset suffix its
``scripts/generate_configs.py`` writes: the length less a margin for the instructions and
demonstrations (200 tokens; Multi-LexSum 300) less the generation budget (NarrativeQA 100,
∞Bench QA and choice 10, ∞Bench Sum 1200, Multi-LexSum 400), e.g. ``narrativeqa_7892`` at 8k.
Then ``model_utils.tokenize`` cuts the context's end again when the whole prompt and the budget
still exceed the length (``pipeline.context_that_fits``). Both count in the length tokenizer
(METHODS §1: the model's own, or ``--lceval-ref-tokenizer``; HELMET's is Llama-2's).

So a prompt holds the margin's worth less than its length when the instructions are short, and
exactly its length when they are long; a document of at most N tokens is given whole.
``--lceval-context-size fill`` instead cuts the document so that the prompt and the budget fill
99-100 % of the cell (the only rule before issue #34).
"""

from __future__ import annotations

from ...models.base import Renderer

MARGIN = 200
"""What HELMET's configs leave for the prompt around a long-QA or ∞Bench Sum document."""
LEGAL_MARGIN = 300
"""The same for Multi-LexSum ("length - 300 (prompt and buffer) - 400 (generation)")."""


def helmet_count(length: int, margin: int, max_new_tokens: int) -> int:
    """``truncate_llama2``'s max_length at ``length``: HELMET's dataset suffix."""
    return length - margin - max_new_tokens


def truncation_budget(count: int, renderer: Renderer) -> int:
    """The budget of ``longqa.Truncation`` (kept tokens and the marker's) that cuts where
    ``truncate_llama2`` cuts at ``count``: it keeps the tokens up to index ``count - m`` (m:
    the marker's tokens as HELMET counts them, with the tokenizer's special tokens), a BOS being
    index 0 and one of the m."""
    special = renderer.count("")
    return count + 1 - 2 * special
