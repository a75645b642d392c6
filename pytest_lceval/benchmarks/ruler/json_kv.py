"""JSON KV retrieval (Liu et al.'s lost-in-the-middle task, as HELMET runs it): a JSON object of
random UUID keys and values fills the context; the queried pair sits at the cell's depth.
Scored as HELMET's ``load_json_kv``: SubEM of the output or of its parsed answer line.

Prompt (HELMET's order: data first, then the instruction, two demonstrations and the key)::

    JSON data:
    {"<uuid>": "<uuid>",
     "<uuid>": "<uuid>",
     ...}

    Extract the value corresponding to the specified key in the JSON object below.

    Key: "<demo key 1>"
    Corresponding value: <demo value 1>

    Key: "<demo key 2>"
    Corresponding value: <demo value 2>

    Key: "<key>"
    Corresponding value:

The demonstrations ask for two other pairs of the same object (at random depths), so that they
are answerable from the context and never name the test key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from ...foundation.grid import Cell
from ...models.base import Tokenizer
from ...results.records import Case
from ...results.score_metric import SUBEM, ScoreMetric
from ...tasks.base import BuildContext
from ...tasks.fitting import Frame, fit
from ...tasks.metrics import substring_exact_match
from ..helmet.output import helmet_parse_output, helmet_scored
from .common import (
    CUE_SEPARATOR,
    DEMOS,
    SYNTHETIC,
    USE_CHAT_TEMPLATE,
    case_rngs,
    make_case,
    place,
)
from .filler_items import fill, shared_stream
from .filler_text import Context, Piece, assemble, piece
from .values import Draw

INSTRUCTION = "Extract the value corresponding to the specified key in the JSON object below."
ANSWER_PREFIX = "Corresponding value:"


def _pair(tokenizer: Tokenizer, key: str, value: str, tag: str | None) -> Piece:
    return piece(tokenizer, _pair_text(key, value), tag)


def _pair_text(key: str, value: str) -> str:
    """One pair on its own line. The newline leads and the comma trails, so pieces meet at
    whitespace and their counts add up; ``_close`` trims the first newline and last comma."""
    return f'\n "{key}": "{value}",'


def _close(joined: str) -> str:
    """Pairs as Liu et al. format them: '{"k": "v",\\n "k": "v"}' without the braces."""
    return joined.removeprefix("\n ").removesuffix(",")


@dataclass
class JsonKvTask:
    """See the module docstring. (Not frozen: GenerationTask declares settable attributes.)"""

    metric: ClassVar[ScoreMetric] = SUBEM
    name: str = "json_kv"
    uses_depth: bool = True
    use_chat_template: bool = USE_CHAT_TEMPLATE
    max_new_tokens: int = 100
    """HELMET's generation_max_length for json_kv (configs/recall.yaml)."""

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        return [self._case(cell, context, index) for index in range(cell.samples)]

    def score(self, output: str, case: Case) -> float:
        """HELMET's: SubEM of the output, or of the rest of the line after the answer prefix
        when that scores higher (``load_json_kv``'s post_process)."""
        scored = helmet_scored(output, case.meta)
        parsed = helmet_parse_output(scored, ANSWER_PREFIX)
        return max(substring_exact_match(scored, case.gold),
                   substring_exact_match(parsed, case.gold))

    def _case(self, cell: Cell, context: BuildContext, index: int) -> Case:
        rng, filler_rng = case_rngs(context, self.name, index)
        tokenizer = context.tokenizer
        uuids = Draw(rng, "uuid")
        key, value = uuids(), uuids()
        demos = [(uuids(), uuids()) for _ in range(DEMOS)]
        items = [(_pair(tokenizer, k, v, "demo"), rng.uniform(0, 100)) for k, v in demos]
        items.append((_pair(tokenizer, key, value, "gold"),
                      cell.depth if cell.depth is not None else rng.uniform(0, 100)))
        key_tokens = sum(item.tokens for item, _ in items)
        stream = shared_stream(tokenizer, (self.name, context.seed, index), lambda: self._filler(
            Draw(filler_rng, "uuid", set(uuids.taken))))

        def build(budget: int) -> Context:
            return assemble(place(fill(stream, budget - key_tokens), items), _close)

        shots = "".join(f'Key: "{k}"\n{ANSWER_PREFIX} {v}\n\n' for k, v in demos)
        frame = Frame("JSON data:\n{", f'}}\n\n{INSTRUCTION}\n\n{shots}Key: "{key}"',
                      CUE_SEPARATOR + ANSWER_PREFIX)
        fitted = fit(frame, build, context.renderer, cell.length, self.max_new_tokens,
                     key_tokens, f"{self.name} at {cell.length} tokens", stream.largest())
        meta = {"source": SYNTHETIC, "requested_depth": cell.depth, "keys": [key],
                "pairs": fitted.context.text.count("\n") + 1}
        return make_case(index, fitted, [value], context.renderer, self.max_new_tokens,
                         fitted.context.depth_of("gold"), meta)

    @staticmethod
    def _filler(uuids: Draw) -> Iterator[str]:
        while True:
            yield _pair_text(uuids(), uuids())

