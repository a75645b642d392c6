"""RULER's aggregation tasks: common-words extraction (CWE) and frequent-words extraction (FWE).

CWE: a numbered list of words ("1. apple 2. sofa ...") in which ten words repeat more often than
the others; the model names the ten. As RULER (common_words_extraction.py): words from the
``wonderwords`` package's nouns, adjectives and verbs; below 4k tokens the ten appear 6 times
and the others once, from 4k on 30 and 3 times; one solved example precedes the question (20
words repeated 3/1 below 4k, 40 words repeated 10/3 from 4k), written as RULER's template with
its answer prefix on the question's line and the answer after it. RULER f682453 (the default,
``--lceval-ruler``) glues the answer to the prefix ("are:1. apple"); c3f5e3b puts a space
between them.

FWE: coded words (six random lowercase letters) with Zipf frequencies, count_k = floor(n k^-2 /
zeta(2)) for rank k (n a whole number, computed as RULER computes it), shuffled; the most
frequent is the noise word '...', and the answer is ranks 2-4. As RULER
(freq_words_extraction.py), with no example. The vocabulary has length // 50 words in RULER
f682453 (the default) and (length - generation budget) // 50 in c3f5e3b.

Both have no depth axis. Their size is what RULER f682453's search picks (``size_search``: CWE's
distinct words by steps of 10, FWE's n from (length - budget) // 6 by (length - budget) // 32);
under ``--lceval-context-size fill`` or with c3f5e3b, the largest whose predicted token count
fits the cell (a list's tokens are the sum of its items', each item starting with its space).
The fitting measures the rendered prompt as for every recall task. Scored with
string_match_all. Prompts are HELMET's templates for ruler_cwe and ruler_fwe.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from itertools import accumulate
from typing import TypeVar

import numpy as np
from scipy.special import zeta

from ...foundation.grid import Cell, case_seed
from ...models.base import Tokenizer
from ...results.records import Case
from ...tasks.base import BuildContext, CellDoesNotFit
from ...tasks.fitting import Frame, fit, render
from .common import (
    CUE_SEPARATOR,
    SYNTHETIC,
    WholeContextTask,
    case_rngs,
    largest,
    make_case,
)
from .filler_text import Context, Piece, token_counts, tokenizer_cache
from .size_search import Steps, searched
from .values import word_list as wonderwords_list

COMMON = 10
"""Words to find in CWE (RULER's num_cw)."""
LONG = 4096
"""RULER's switch between the short and the long CWE settings."""
CWE_INSTRUCTION = ("Below is a numbered list of words. In these words, some appear more often "
                   "than others. Memorize the ones that appear most often.")
CWE_QUESTION = "Question: What are the 10 most common words in the above list?"
CWE_PREFIX = "Answer: The top 10 words that appear most often in the list are:"
FWE_INSTRUCTION = ("Read the following coded text and track the frequency of each coded word. "
                   "Find the three most frequently appeared coded words.")
FWE_QUESTION = ("Question: Do not provide any explanation. Please ignore the dots '....'. What "
                "are the three most frequently appeared words in the above coded text?")
FWE_PREFIX = "Answer: According to the coded text above, the three most frequently appeared " \
             "words are:"
ALPHA = 2.0
"""FWE's Zipf exponent (RULER's alpha)."""
CODED_LETTERS = 6
TOKENS_PER_WORD = 50
"""FWE's vocabulary size is the context budget over this (RULER)."""
FWE_ANSWERS = 3
FWE_LEAST_WORDS = 100
"""Smallest n of FWE: below it ranks 4 and 5 may tie and the answer would be ambiguous."""
SEARCH_STEP = 10
"""f682453's step (and first try) of CWE's distinct words when it sizes a case."""
EXAMPLE_ANSWER_SEPARATOR = {"f682453": "", "c3f5e3b": " "}
"""What CWE's example puts between its answer prefix and its answer, per RULER version."""


T = TypeVar("T")


@cache
def wonderwords() -> tuple[str, ...]:
    """RULER's CWE vocabulary: wonderwords' nouns, adjectives and verbs, deduplicated, sorted."""
    lists = ("nounlist", "adjectivelist", "verblist")
    return tuple(sorted({word for name in lists for word in wonderwords_list(name)}))


def _pieces(tokenizer: Tokenizer, texts: list[str]) -> list[Piece]:
    """List items (" apple", " 12.") and their counts, each counted once per tokenizer (the new
    ones in one batch): the list is joined from these pieces, so its prompt is counted from
    them (``Context.parts``)."""
    table: dict[str, Piece] = tokenizer_cache(tokenizer).setdefault("word pieces", {})
    new = list(dict.fromkeys(text for text in texts if text not in table))
    table.update(zip(new, map(Piece, new, token_counts(tokenizer, new)), strict=True))
    return [table[text] for text in texts]


def _listed(parts: list[Piece], tokens: int) -> Context:
    """The list joined from its items, each with its leading space, less the first space."""
    return Context("".join(part.text for part in parts)[1:], tokens, (), tuple(parts), (1, 0))


def shuffled(items: list[T], seed: int, size: int) -> list[T]:
    """``items`` in an order fixed by (case seed, size): one build per budget is reproducible."""
    random.Random(f"{seed}:{size}").shuffle(items)
    return items


# -- CWE ------------------------------------------------------------------------------------


def numbered(words: list[str]) -> str:
    return " ".join(f"{i}. {word}" for i, word in enumerate(words, 1))


def numbered_parts(tokenizer: Tokenizer, words: list[str]) -> list[Piece]:
    """The pieces of ``numbered(words)``, each with its leading space: " 1.", " apple", ..."""
    return _pieces(tokenizer, [text for i, word in enumerate(words, 1)
                               for text in (f" {i}.", " " + word)])


@dataclass(frozen=True)
class Repeats:
    """How often the common and the other words appear, and the example's size (RULER)."""

    common: int
    other: int
    example_words: int
    example_common: int
    example_other: int

    @staticmethod
    def for_length(length: int) -> Repeats:
        return Repeats(6, 1, 20, 3, 1) if length < LONG else Repeats(30, 3, 40, 10, 3)


def word_list(words: list[str], common: int, other: int, seed: int) -> list[str]:
    """The first COMMON words ``common`` times, the rest ``other`` times, shuffled (the list
    built in RULER's order, so that the same shuffle gives RULER's text)."""
    return shuffled(words[:COMMON] * common + words[COMMON:] * other, seed, len(words))


@dataclass
class CommonWordsTask(WholeContextTask):
    """See the module docstring."""

    name: str = "cwe"
    max_new_tokens: int = 100
    """HELMET's generation_max_length for ruler_cwe."""

    def _case(self, cell: Cell, context: BuildContext, index: int) -> Case:
        rng, _ = case_rngs(context, self.name, index)
        vocabulary = wonderwords()
        order = rng.sample(vocabulary, len(vocabulary))
        repeats = Repeats.for_length(cell.length)
        example_words = rng.sample(vocabulary, repeats.example_words)
        seed = case_seed(context.seed, self.name, index, "order")
        example = word_list(example_words, repeats.example_common, repeats.example_other, seed)
        # RULER's example: its template with the answer prefix on the question's line
        shot = (f"{CWE_INSTRUCTION}\n{numbered(example)}\n{CWE_QUESTION} {CWE_PREFIX}"
                f"{EXAMPLE_ANSWER_SEPARATOR[self.ruler]}{numbered(example_words[:COMMON])}")
        per_word = [part.tokens for part in _pieces(context.tokenizer,
                                                    [" " + word for word in order])]
        tokens = self._predictor(context.tokenizer, per_word, repeats)
        what = f"{self.name} at {cell.length} tokens"

        exhausted = CellDoesNotFit(
            f"{what}: the list would need more than the {len(order)} distinct words of "
            f"wonderwords (RULER f682453 stops there, short of the length; c3f5e3b switches to "
            f"a larger word list)")

        def listed(size: int) -> Context:
            if size > len(order):
                raise exhausted
            words = word_list(order[:size], repeats.common, repeats.other, seed)
            return replace(_listed(numbered_parts(context.tokenizer, words), tokens(size)),
                           units=size)

        def build(budget: int) -> Context:
            size = largest(COMMON, len(order), tokens, budget)
            if size == len(order) and tokens(size) < budget:
                raise exhausted
            return listed(size)

        frame = Frame(f"{shot}\n\n{CWE_INSTRUCTION}\n", f"\n{CWE_QUESTION}",
                      CUE_SEPARATOR + CWE_PREFIX)
        number = _pieces(context.tokenizer, [f" {cell.length}."])[0].tokens  # >= any item's
        granularity = repeats.other * (max(per_word) + number)
        fitted = fit(frame, build, context.renderer, cell.length, self.max_new_tokens,
                     tokens(COMMON), what, granularity)
        if self.searches:  # RULER's answer: " 1. word 2. word ..." after the prompt
            steps = Steps(SEARCH_STEP, SEARCH_STEP, " " + numbered(order[:COMMON]),
                          cell.length - self.max_new_tokens)
            fitted = searched(lambda size: render(frame, listed(size), context.renderer), steps,
                              fitted.context.units, context.renderer, what)
        meta = {"source": SYNTHETIC, "requested_depth": None, "ruler": self.ruler,
                "context_size": self.size, "items": len(re.findall(r"\d+\. ", fitted.context.text)),
                "example_words": example_words, "words": order[:fitted.context.units]}
        return make_case(index, fitted, order[:COMMON], context.renderer, self.max_new_tokens,
                         None, meta)

    @staticmethod
    def _predictor(tokenizer: Tokenizer, per_word: list[int], repeats: Repeats
                   ) -> Callable[[int], int]:
        """Predicted tokens of the list of the first n words (``per_word`` their counts): its
        numbers (" 12.") and words (" apple") counted apart and added, the first item's leading
        space left out."""
        common = repeats.common * sum(per_word[:COMMON])
        others = [0]
        for count in per_word[COMMON:]:
            others.append(others[-1] + repeats.other * count)
        numbers = [0]

        def tokens(size: int) -> int:
            items = COMMON * repeats.common + (size - COMMON) * repeats.other
            if len(numbers) <= items:
                more = _pieces(tokenizer, [f" {n}." for n in range(len(numbers), items + 1)])
                last = numbers[-1]
                numbers.extend(last + total for total in accumulate(part.tokens for part in more))
            return numbers[items] + common + others[size - COMMON] - 1

        return tokens


# -- FWE ------------------------------------------------------------------------------------


def coded_vocabulary(rng: random.Random, size: int) -> list[str]:
    """``size`` distinct coded words in random order, the first replaced by the noise '...'."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(string.ascii_lowercase, k=CODED_LETTERS)))
    vocabulary = sorted(words)
    rng.shuffle(vocabulary)
    return ["...", *vocabulary[1:]]


def zipf_counts(size: int, words: int) -> list[int]:
    """RULER's count of each rank: floor(words k^-alpha / zeta(alpha)) for k = 1..size, in
    RULER's floating-point order of operations."""
    ranks = np.arange(1, size + 1)
    return [int(count) for count in (words * (ranks ** -ALPHA) / zeta(ALPHA)).astype(int)]


def vocabulary_size(ruler: str, length: int, max_new_tokens: int) -> int:
    """FWE's coded words: one per TOKENS_PER_WORD tokens of the length (f682453), of the length
    less the generation budget (c3f5e3b)."""
    return (length - (max_new_tokens if ruler == "c3f5e3b" else 0)) // TOKENS_PER_WORD


@dataclass
class FrequentWordsTask(WholeContextTask):
    """See the module docstring."""

    name: str = "fwe"
    max_new_tokens: int = 50
    """HELMET's generation_max_length for ruler_fwe (also RULER's)."""

    def _case(self, cell: Cell, context: BuildContext, index: int) -> Case:
        rng, _ = case_rngs(context, self.name, index)
        what = f"{self.name} at {cell.length} tokens"
        size = vocabulary_size(self.ruler, cell.length, self.max_new_tokens)
        if size < FWE_ANSWERS + 2:
            raise CellDoesNotFit(
                f"{what}: a vocabulary of {size} coded words (one per {TOKENS_PER_WORD} tokens) "
                f"is too small for {FWE_ANSWERS} answers and the noise word")
        vocabulary = coded_vocabulary(rng, size)
        seed = case_seed(context.seed, self.name, index, "order")
        pieces = _pieces(context.tokenizer, [" " + word for word in vocabulary])
        per_word = [part.tokens for part in pieces]

        def tokens(words: int) -> int:
            counts = zipf_counts(size, words)
            return sum(count * n for count, n in zip(counts, per_word, strict=True)) - 1

        def coded(words: int) -> Context:
            counts = zipf_counts(size, words)
            items = [part for part, count in zip(pieces, counts, strict=True)
                     for _ in range(count)]
            return replace(_listed(shuffled(items, seed, words), tokens(words)), units=words)

        def build(budget: int) -> Context:
            return coded(largest(FWE_LEAST_WORDS, 2 * (budget + size), tokens, budget))

        frame = Frame(f"{FWE_INSTRUCTION}\n", f"\n{FWE_QUESTION}",
                      CUE_SEPARATOR + FWE_PREFIX)
        fitted = fit(frame, build, context.renderer, cell.length, self.max_new_tokens,
                     tokens(FWE_LEAST_WORDS), what, max(per_word))
        if self.searches:  # n from limit // 6 by limit // 32 while the prompt is under limit
            limit = cell.length - self.max_new_tokens
            steps = Steps(limit // CODED_LETTERS, limit // 32, "", limit, strict=True)
            fitted = searched(lambda words: render(frame, coded(words), context.renderer),
                              steps, fitted.context.units, context.renderer, what)
        meta = {"source": SYNTHETIC, "requested_depth": None, "ruler": self.ruler,
                "context_size": self.size, "vocabulary": size, "coded_words": vocabulary,
                "zipf_n": fitted.context.units, "words": len(fitted.context.text.split())}
        return make_case(index, fitted, vocabulary[1:1 + FWE_ANSWERS], context.renderer,
                         self.max_new_tokens, None, meta)
