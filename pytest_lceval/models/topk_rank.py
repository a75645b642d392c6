"""Rank answers from what serving engines return: top-k log-probabilities, or generated text.

Servers give the k most likely next tokens, not the probability of every option. An option found
among them gets its log-probability; one that is not is bounded above by the k-th value and the
Ranking says so (method 'logprobs-bound'). A server that returns no log-probabilities at all is
answered by generating a few tokens and matching the options (method 'generate-match'): the
scores are then 0 for the option the text starts with and UNMATCHED for the others, and callers
must report the method. Either way the method is recorded, so no fallback passes for the real
thing.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from ..records import Ranking

LOGPROBS = "logprobs"
BOUNDED = "logprobs-bound"
GENERATE_MATCH = "generate-match"
K = TypeVar("K", bound=Hashable)
UNMATCHED = -100.0
"""Score of an option that a generate-match answer did not start with: far below any real
log-probability (a uniform guess over a 256k vocabulary is about -12.5)."""


def rank_from_top(top: Mapping[K, float], wanted: Sequence[Iterable[K]],
                  prompt_tokens: int, seconds: float = 0.0) -> Ranking:
    """A Ranking from the top-k log-probabilities of the next token.

    ``wanted[i]`` are the keys (token ids or token texts) that stand for option i; several keys
    (e.g. 'yes' and ' yes') are pooled with log-sum-exp, as the model may start the option
    either way. Options absent from ``top`` get the smallest returned value, an upper bound.
    """
    floor = min(top.values()) if top else UNMATCHED
    scores, bounded = [], False
    for keys in wanted:
        found = [top[key] for key in keys if key in top]
        if found:
            scores.append(_logsumexp(found))
        else:
            scores.append(floor)
            bounded = True
    best = max(top, key=top.__getitem__) if top else None
    top_in_options = best is not None and any(best in set(keys) for keys in wanted)
    return Ranking(tuple(scores), top_in_options, prompt_tokens, seconds,
                   BOUNDED if bounded else LOGPROBS)


def rank_by_match(text: str, options: Sequence[str], prompt_tokens: int,
                  seconds: float = 0.0) -> Ranking:
    """The fallback: which option the generated ``text`` starts with (case and leading space
    ignored; the longest match wins when one option is a prefix of another)."""
    said = " ".join(text.split()).lower()
    matches = [i for i, option in enumerate(options)
               if option.strip() and said.startswith(" ".join(option.split()).lower())]
    chosen = max(matches, key=lambda i: len(options[i].strip()), default=None)
    scores = tuple(0.0 if i == chosen else UNMATCHED for i in range(len(options)))
    return Ranking(scores, chosen is not None, prompt_tokens, seconds, GENERATE_MATCH)


def pooled_keys(top: Mapping[str, float], texts: Sequence[str]) -> list[list[str]]:
    """For each option's first-token text, the returned token texts that are the same token up to
    surrounding whitespace (servers differ on whether they report the leading space)."""
    return [[key for key in top if key.strip() == text.strip() and key.strip()]
            for text in texts]


def _logsumexp(values: Sequence[float]) -> float:
    peak = max(values)
    return peak + math.log(sum(math.exp(v - peak) for v in values))
