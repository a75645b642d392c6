"""Rank answers from what serving engines return: top-k log-probabilities, or generated text.

Servers give the k most likely next tokens, not the probability of every option. An option found
among them gets its log-probability; one that is not gets None: only an upper bound (the k-th
value) is known. The prediction is still exact when some option was found, since every option
left out is less likely than any found one (method 'logprobs-bound'). When *no* option is in the
top k there is no prediction (``Ranking.choice`` is None), scored wrong and counted, as the
reference code does with its NO_PREDICTION label; giving every option the same floor would make
the first option win and pass a failure off as a guess. A server that returns no
log-probabilities at all is answered by generating a few tokens and matching the options (method
'generate-match'): the option the text starts with scores 0, the others None, and text that
starts with no option is again no prediction. Either way the method is recorded, so no fallback
passes for the real thing.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from ..results.records import Ranking
from .base import Tokenizer

LOGPROBS = "logprobs"
BOUNDED = "logprobs-bound"
GENERATE_MATCH = "generate-match"
FULL_VOCABULARY = "full-vocabulary"
"""Method of a local backend that scored every option from the whole next-token distribution
(``--lceval-rank full``): no option is ever left unscored."""
REFERENCE_TOP_K = 100
"""Lifelong-ICL ranks with vLLM's 100 most likely next tokens (``model/vllm.py``:
``logprobs=100``); a local backend reads the same top 100 from its logits by default."""
RANK_CHOICES = ("top100", "full")
"""--lceval-rank: how a local backend (hf:) ranks: ``top100``, the reference's rule (an option
outside the top 100 unscored, none in it no prediction), or ``full``, every option from the
whole vocabulary (exact, but decides otherwise where the reference finds no prediction)."""
NO_PREDICTION = "(no prediction)"
"""What reports show for a case whose Ranking has no choice."""
K = TypeVar("K", bound=Hashable)


def rank_from_top(top: Mapping[K, float], wanted: Sequence[Iterable[K]],
                  prompt_tokens: int, seconds: float = 0.0) -> Ranking:
    """A Ranking from the top-k log-probabilities of the next token.

    ``wanted[i]`` are the keys (token ids or token texts) that stand for option i; of several
    keys (e.g. 'yes' and ' yes') the most likely one counts, as in the reference code's
    ``rank_postprocess`` for OpenAI models, which looks the option up with and without its
    leading space and takes the maximum. Options absent from ``top`` get None (see the module
    docstring).
    """
    scores: list[float | None] = []
    for keys in wanted:
        found = [top[key] for key in keys if key in top]
        scores.append(max(found) if found else None)
    best = max(top, key=top.__getitem__) if top else None
    top_in_options = best is not None and any(best in set(keys) for keys in wanted)
    return Ranking(tuple(scores), top_in_options, prompt_tokens, seconds,
                   BOUNDED if None in scores else LOGPROBS)


def rank_by_match(text: str, options: Sequence[str], prompt_tokens: int,
                  seconds: float = 0.0) -> Ranking:
    """The fallback: which option the generated ``text`` starts with (case and leading space
    ignored; the longest match wins when one option is a prefix of another)."""
    said = " ".join(text.split()).lower()
    matches = [i for i, option in enumerate(options)
               if option.strip() and said.startswith(" ".join(option.split()).lower())]
    chosen = max(matches, key=lambda i: len(options[i].strip()), default=None)
    scores = tuple(0.0 if i == chosen else None for i in range(len(options)))
    return Ranking(scores, chosen is not None, prompt_tokens, seconds, GENERATE_MATCH)


def spellings(tokenizer: Tokenizer, options: Sequence[str]) -> list[list[str]]:
    """For each option, the texts a server may report for its first token: the first subword of
    the option and of the option after a space, as Lifelong-ICL's ``get_label_tokens`` looks
    them up for OpenAI models (either spelling can start the answer)."""
    return [list(dict.fromkeys(tokenizer.decode(tokenizer.encode(text)[:1])
                               for text in (option, " " + option)))
            for option in options]
