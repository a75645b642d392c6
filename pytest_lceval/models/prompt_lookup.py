"""Drafts for greedy decoding taken from the text so far (prompt lookup).

Long-context answers copy: a needle's value, a passage's words, a label from the
demonstrations, or their own earlier words. The tokens that followed the last place where the
answer's latest few tokens occurred are a good guess at what comes next; a decode step that
feeds the guesses after the next token checks them all in one forward pass and keeps them up
to the first one greedy decoding does not choose, so an answer is the greedy one (transformers'
``prompt_lookup_num_tokens`` does the same for one sequence). Replayed from the README's main
job's answers, its generate batches take 513 passes with drafts of up to 7 tokens where one
token a pass takes 1,515.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

DRAFT_TOKENS = 7
"""Tokens guessed at most per pass: on 2 CPU cores a pass of 2 prompts x 8 tokens takes about
1.9 times one of 2 x 1 (SmolLM2 over 2k tokens, ``cpu_products``), and longer guesses are seldom
kept whole (drafts of 4 to 10 tokens cost the main job's decode about the same)."""
NGRAM = 3
"""The longest run of last tokens looked up; shorter runs are tried when it is not found."""


def lookup_draft(tokens: Sequence[int], size: int) -> list[int]:
    """Up to ``size`` tokens that followed the latest earlier occurrence of ``tokens``' last
    ``NGRAM`` tokens (or fewer, down to one), or none where even the last token is new."""
    if size <= 0 or len(tokens) < 2:
        return []
    context = torch.tensor(tokens)
    for length in range(min(NGRAM, len(tokens) - 1), 0, -1):
        windows = context[:-1].unfold(0, length, 1)
        found = (windows == context[-length:]).all(dim=1).nonzero()
        if len(found):
            start = int(found[-1]) + length
            return list(tokens[start:start + size])
    return []
