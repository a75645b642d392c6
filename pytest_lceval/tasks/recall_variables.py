"""RULER's variable tracking (VT): a chain of assignments hidden in the noise haystack; the
model names every variable that ends up holding the chain's value.

Prompt (HELMET's template for RULER's vt; base model)::

    <RULER's one solved example>\\n\\n
    Memorize and track the chain(s) of variable assignment hidden in the following text.\\n\\n
    <noise lines, with VAR QWERT = 12345, VAR ASDFG = VAR QWERT, ... on their own lines>
    Question: Find all variables that are assigned the value 12345 in the text above.
    Answer: According to the chain(s) of variable assignment in the text above, 5 variables are
    assigned the value 12345, they are:

As RULER (scripts/synthetic.yaml ``vt``): one chain of four hops (five variables of five
capital letters), a five-digit value, the chain's lines in order at random lines of the noise
haystack (no depth axis), and one in-context example that RULER always prepends: the same task
with three-letter variables on a noise haystack filling RULER's 500 tokens. Scored with
string_match_all over the five variables.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from ..grid import Cell
from ..records import Case
from .base import BuildContext
from .fitting import Frame, fit
from .haystack_text import NOISE, Context, Piece, assemble, piece
from .recall_common import (
    CUE_SEPARATOR,
    SYNTHETIC,
    WholeContextTask,
    case_rngs,
    make_case,
)

HOPS = 4
"""Assignments after the first: five variables in the chain (RULER's num_hops)."""
NAME_LETTERS = 5
EXAMPLE_NAME_LETTERS = 3
"""RULER names the example's variables with three letters, the test's with five."""
EXAMPLE_TOKENS = 500
"""RULER builds its example with max_seq_length=500; here in the model's own tokens."""
INSTRUCTION = "Memorize and track the chain(s) of variable assignment hidden in the following text."


def question(value: str) -> str:
    return f"Question: Find all variables that are assigned the value {value} in the text above."


def answer_prefix(value: str) -> str:
    return (f"Answer: According to the chain(s) of variable assignment in the text above, "
            f"{HOPS + 1} variables are assigned the value {value}, they are:")


@dataclass(frozen=True)
class Chain:
    """Variables in assignment order and the value the first one gets."""

    names: list[str]
    value: str

    def lines(self) -> list[str]:
        first = f"VAR {self.names[0]} = {self.value}"
        pairs = zip(self.names, self.names[1:], strict=False)
        return [first, *(f"VAR {b} = VAR {a} " for a, b in pairs)]  # RULER's trailing space


def draw_chain(rng: random.Random, letters: int) -> Chain:
    """HOPS + 1 distinct names of ``letters`` capitals and a five-digit value (RULER's range)."""
    names: list[str] = []
    while len(names) < HOPS + 1:
        name = "".join(rng.choices(string.ascii_uppercase, k=letters))
        if name not in names:
            names.append(name)
    return Chain(names, str(rng.randrange(10_000, 99_999)))


def insert_in_order(pieces: list[Piece], items: list[Piece], fractions: list[float]
                    ) -> list[Piece]:
    """``items`` between the pieces at the given fractions (sorted), keeping their order: the
    positions are RULER's sorted random line indices."""
    placed = list(pieces)
    for item, fraction in reversed(list(zip(items, sorted(fractions), strict=True))):
        placed.insert(round(fraction * len(pieces)), item)
    return placed


@dataclass
class VariableTrackingTask(WholeContextTask):
    """See the module docstring."""

    name: str = "vt"
    max_new_tokens: int = 50
    """HELMET's generation_max_length for ruler_vt."""

    def _case(self, cell: Cell, context: BuildContext, index: int) -> Case:
        rng, _ = case_rngs(context, self.name, index)
        chain = draw_chain(rng, NAME_LETTERS)
        example_chain = draw_chain(rng, EXAMPLE_NAME_LETTERS)
        while example_chain.value == chain.value:
            example_chain = draw_chain(rng, EXAMPLE_NAME_LETTERS)
        line = piece(context.tokenizer, "\n" + NOISE)
        example = self._example(context, example_chain, [rng.random() for _ in range(HOPS + 1)],
                                line)
        fractions = [rng.random() for _ in range(HOPS + 1)]
        items = [piece(context.tokenizer, "\n" + text, "chain") for text in chain.lines()]
        key_tokens = sum(item.tokens for item in items)

        def build(budget: int) -> Context:  # whole noise lines, as RULER's
            lines = [line] * max((budget - key_tokens) // line.tokens, 0)
            return assemble(insert_in_order(lines, items, fractions))

        frame = Frame(f"{example}\n\n{INSTRUCTION}\n\n", f"\n{question(chain.value)}",
                      CUE_SEPARATOR + answer_prefix(chain.value))
        fitted = fit(frame, build, context.renderer, cell.length, self.max_new_tokens,
                     key_tokens, f"{self.name} at {cell.length} tokens", line.tokens)
        meta = {"source": SYNTHETIC, "requested_depth": None, "value": chain.value,
                "chain": chain.lines()}
        return make_case(index, fitted, chain.names, context.renderer, self.max_new_tokens,
                         None, meta)

    @staticmethod
    def _example(context: BuildContext, chain: Chain, fractions: list[float], line: Piece
                 ) -> str:
        """RULER's solved example: as many whole noise lines as keep it within EXAMPLE_TOKENS
        (counted by addition, as the haystack is)."""
        items = [piece(context.tokenizer, "\n" + text) for text in chain.lines()]

        def text(count: int) -> str:
            body = assemble(insert_in_order([line] * count, items, fractions)).text
            # RULER's: the answer prefix (ending "they are: ") on the question's line, a space
            return (f"{INSTRUCTION}\n\n{body}\n{question(chain.value)} "
                    f"{answer_prefix(chain.value)}  {' '.join(chain.names)}")

        bare = len(context.tokenizer.encode(text(0)))
        return text(max(0, (EXAMPLE_TOKENS - bare) // line.tokens))
