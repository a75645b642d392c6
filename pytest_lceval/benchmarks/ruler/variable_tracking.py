"""RULER's variable tracking (VT): a chain of assignments hidden in the noise haystack; the model
names every variable that ends up holding the chain's value.

Prompt (HELMET's template for RULER's vt; base model)::

    <RULER's one solved example>\\n\\n
    Memorize and track the chain(s) of variable assignment hidden in the following text.\\n\\n
    <noise lines with VAR QWERT = 12345, VAR ASDFG = VAR QWERT , ... among them>
    Question: Find all variables that are assigned the value 12345 in the text above.
    Answer: According to the chain(s) of variable assignment in the text above, 5 variables are
    assigned the value 12345, they are:

As RULER (scripts/synthetic.yaml ``vt``): one chain of four hops (five variables of five capital
letters), a five-digit value, a hop's statement ending with a space, the chain's statements in
order before distinct noise lines (RULER's ``sorted(random.sample(range(lines), 5))``: never two
statements in a row, and a noise line last), no depth axis, and one solved example: the same
task with three-letter variables on a noise haystack within RULER's 500 tokens (counted in the
model's tokenizer as RULER counts in the one it is given). Scored with string_match_all over the
five variables.

The RULER versions (``--lceval-ruler``, ``common.RULER_CODES``) write it differently:

- **f682453** (default: it generated HELMET's files). Each noise line keeps its newline and the
  haystack's items are joined with spaces, so a statement shares a line with the noise line
  after it (``VAR QWERT = 12345 The grass is green. ...``) and every noise line but the first
  starts with a space. The example is drawn once per run (every case and length shows the same
  one, as RULER generated one per file). RULER cut the model template out of the example's
  template by joining its words with single spaces and dropping the last word (a chat
  template's closing tag): on the base template that word is the question's "above.". Its
  answer prefix then said "assgined". Its size: steps of 5 lines while the example, a space and
  the Python list of its answer, plus RULER's 30 generation tokens, stay within 500. A case's
  noise lines: f682453's search, steps of 10 (``size_search``; ``--lceval-context-size fill``
  fills the cell).
- **c3f5e3b** (RULER's code since May 2025). Every noise line and statement on a line of its own.
  The example's noise lines and chain positions are drawn once per run with RULER's value 12345
  and template variables, then each case gets new variables and a new value in their place
  (RULER's ``randomize_icl``); the full template with its answer prefix; the most lines (from 5)
  that keep the example's prompt within 500 tokens. A case fills the cell (its binary search
  finds the most lines that fit).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ...foundation.grid import Cell, case_seed
from ...models.base import Tokenizer
from ...results.records import Case
from ...tasks.base import BuildContext
from ...tasks.fitting import Frame, fit, render
from .common import (
    CUE_SEPARATOR,
    SYNTHETIC,
    WholeContextTask,
    case_rngs,
    largest,
    make_case,
)
from .filler_text import NOISE, Context, Piece, assemble, piece, tokenizer_cache
from .size_search import Steps, searched

HOPS = 4
"""Assignments after the first: five variables in the chain (RULER's num_hops)."""
NAME_LETTERS = 5
EXAMPLE_NAME_LETTERS = 3
"""RULER names the example's variables with three letters, the test's with five."""
EXAMPLE_TOKENS = 500
"""RULER builds its example with max_seq_length=500."""
EXAMPLE_STEP = 5
"""RULER's step (and least number) of noise lines for the example."""
SEARCH_STEP = 10
"""f682453's step (and first try) of noise lines when it sizes a case (``size_search``)."""
RULER_VT_TOKENS = 30
"""RULER's tokens_to_generate for vt, which f682453 reserves in the example's 500 tokens."""
TEMPLATE_VALUE = "12345"
"""The value c3f5e3b writes in its example before each case replaces it."""
INSTRUCTION = "Memorize and track the chain(s) of variable assignment hidden in the following text."
LAYOUTS = {"f682453": (" ", NOISE + "\n"), "c3f5e3b": ("\n", NOISE)}
"""Per RULER version: what joins the haystack's items, and a noise line as an item."""
ASSIGNED = {"f682453": "assgined", "c3f5e3b": "assigned"}
"""The verb of RULER's answer prefix (in the example); HELMET's own prefix says "assigned"."""


def question(value: str) -> str:
    return f"Question: Find all variables that are assigned the value {value} in the text above."


def answer_prefix(value: str, assigned: str = "assigned") -> str:
    return (f"Answer: According to the chain(s) of variable assignment in the text above, "
            f"{HOPS + 1} variables are {assigned} the value {value}, they are:")


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


def positions(seed: int, lines: int) -> list[int]:
    """The noise lines (indices) the chain's statements go before: RULER's draw, fixed by
    (seed, number of lines) so that one build per budget is reproducible."""
    return random.Random(f"{seed}:{lines}").sample(range(lines), HOPS + 1)


def woven(noise: Piece, items: Sequence[Piece], before: Sequence[int], lines: int
          ) -> list[Piece]:
    """``lines`` noise lines with item j inserted before noise line ``sorted(before)[j]``."""
    placed = [noise] * lines
    for offset, (item, at) in enumerate(zip(items, sorted(before), strict=True)):
        placed.insert(at + offset, item)
    return placed


@dataclass(frozen=True)
class Haystack:
    """The noise haystack with a chain, as one RULER version writes it, in pieces that carry
    their token counts (each led by the separator; the first one's is stripped)."""

    noise: Piece
    items: list[Piece]

    @staticmethod
    def of(tokenizer: Tokenizer, ruler: str, chain: Chain, tag: str | None = None) -> Haystack:
        separator, line = LAYOUTS[ruler]
        return Haystack(piece(tokenizer, separator + line),
                        [piece(tokenizer, separator + text, tag) for text in chain.lines()])

    def context(self, lines: int, seed: int) -> Context:
        return replace(assemble(woven(self.noise, self.items, positions(seed, lines), lines)),
                       units=lines)

    @property
    def least(self) -> int:
        """Tokens of the smallest haystack RULER can write (one noise line per statement)."""
        return sum(item.tokens for item in self.items) + (HOPS + 1) * self.noise.tokens


def squeezed(template: str) -> str:
    """RULER f682453's example template: it removed the model template by joining the words
    before the answer prefix with single spaces and dropping the last one."""
    return " ".join(template.split()[:-1])


@dataclass(frozen=True)
class Example:
    """RULER's solved example, drawn once per run: its chain and the number of noise lines."""

    ruler: str
    chain: Chain
    lines: int
    seed: int

    def text(self, tokenizer: Tokenizer, names: list[str], value: str) -> str:
        """The example with its answer, with ``names`` and ``value`` in place of the drawn ones
        (c3f5e3b's ``randomize_icl``: one name after another, then the value; the same ones
        leave it as drawn)."""
        text = _example_prompt(tokenizer, self.ruler, self.chain, self.lines, self.seed)
        text = f"{text} {' '.join(self.chain.names)}"
        for old, new in zip(self.chain.names, names, strict=True):
            text = text.replace(old, new)
        return text.replace(self.chain.value, value)

    @staticmethod
    def draw(tokenizer: Tokenizer, ruler: str, seed: int) -> Example:
        cache = tokenizer_cache(tokenizer)
        key = ("vt example", ruler, seed)
        if key not in cache:
            drawn = draw_chain(random.Random(seed), EXAMPLE_NAME_LETTERS)
            chain = drawn if ruler == "f682453" else Chain(drawn.names, TEMPLATE_VALUE)

            def alone(lines: int) -> int:
                return len(tokenizer.encode(_example_prompt(tokenizer, ruler, chain, lines, seed)))

            if ruler == "f682453":
                lines = _lines_f682453(alone, lambda n: len(tokenizer.encode(
                    f"{_example_prompt(tokenizer, ruler, chain, n, seed)} {chain.names!r}")))
            else:
                most = max(int(EXAMPLE_TOKENS / (alone(EXAMPLE_STEP) / EXAMPLE_STEP) * 3),
                           2 * EXAMPLE_STEP)
                lines = largest(EXAMPLE_STEP, most, alone, EXAMPLE_TOKENS)
            cache[key] = Example(ruler, chain, lines, seed)
        example: Example = cache[key]
        return example


def _example_prompt(tokenizer: Tokenizer, ruler: str, chain: Chain, lines: int, seed: int
                    ) -> str:
    """The example's prompt up to its answer, with RULER's answer prefix (and its space)."""
    body = Haystack.of(tokenizer, ruler, chain).context(lines, seed).text
    task = f"{INSTRUCTION}\n\n{{context}}\n{question('{query}')}"
    if ruler == "f682453":
        task = squeezed(task)
    template = f"{task} {answer_prefix('{query}', ASSIGNED[ruler])} "
    return template.format(context=body, query=chain.value)


def _lines_f682453(alone: Callable[[int], int], answered: Callable[[int], int]) -> int:
    """f682453's search: grow by steps while the example with its answer fits, then step back
    while the example alone does not."""
    lines, total = EXAMPLE_STEP, 0
    while total + RULER_VT_TOKENS < EXAMPLE_TOKENS:
        total = answered(lines)
        if total + RULER_VT_TOKENS > EXAMPLE_TOKENS:
            lines = max(lines - EXAMPLE_STEP, EXAMPLE_STEP)
            break
        lines += EXAMPLE_STEP
    while lines > EXAMPLE_STEP and alone(lines) + RULER_VT_TOKENS > EXAMPLE_TOKENS:
        lines -= EXAMPLE_STEP
    return lines


@dataclass
class VariableTrackingTask(WholeContextTask):
    """See the module docstring."""

    name: str = "vt"
    max_new_tokens: int = 50
    """HELMET's generation_max_length for ruler_vt."""

    def _case(self, cell: Cell, context: BuildContext, index: int) -> Case:
        rng, _ = case_rngs(context, self.name, index)
        chain = draw_chain(rng, NAME_LETTERS)
        tokenizer = context.tokenizer
        drawn = Example.draw(tokenizer, self.ruler, case_seed(context.seed, self.name, "example"))
        shown = drawn.chain
        if self.ruler == "c3f5e3b":
            shown = Chain(["".join(rng.choices(string.ascii_uppercase, k=EXAMPLE_NAME_LETTERS))
                           for _ in drawn.chain.names], str(rng.randrange(10_000, 99_999)))
        example = drawn.text(tokenizer, shown.names, shown.value)
        haystack = Haystack.of(tokenizer, self.ruler, chain, "chain")
        seed = case_seed(context.seed, self.name, index, "positions")

        def build(budget: int) -> Context:  # whole noise lines, as RULER's
            lines = max((budget - haystack.least) // haystack.noise.tokens, 0) + HOPS + 1
            return haystack.context(lines, seed)

        frame = Frame(f"{example}\n\n{INSTRUCTION}\n\n", f"\n{question(chain.value)}",
                      CUE_SEPARATOR + answer_prefix(chain.value))
        what = f"{self.name} at {cell.length} tokens"
        fitted = fit(frame, build, context.renderer, cell.length, self.max_new_tokens,
                     haystack.least, what, haystack.noise.tokens)
        if self.searches:  # RULER's answer: the variables as a Python list after a space
            steps = Steps(SEARCH_STEP, SEARCH_STEP, f" {chain.names}",
                          cell.length - self.max_new_tokens)
            fitted = searched(lambda lines: render(frame, haystack.context(lines, seed),
                                                   context.renderer),
                              steps, fitted.context.units, context.renderer, what)
        meta = {"source": SYNTHETIC, "requested_depth": None, "value": chain.value,
                "chain": chain.lines(), "ruler": self.ruler, "context_size": self.size,
                "example_chain": {"names": shown.names, "value": shown.value},
                "noise_lines": fitted.context.units}
        return make_case(index, fitted, chain.names, context.renderer, self.max_new_tokens,
                         None, meta)
