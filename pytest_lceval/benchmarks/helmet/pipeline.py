"""What HELMET's shared pipeline (``eval.py``, ``model_utils.py``, ``arguments.py``) does around
every category's prompt, as this project applies it.

- **Template.** A raw prompt is the user text, a separator and the answer prefix (HELMET's
  ``prompt_template``); under a chat template the user text alone is templated and the assistant
  turn starts empty, because ``tokenize`` is never asked to continue a final message and API
  models get the user message alone. Tasks say this with ``Prompt.cue`` / ``Frame.cue``, which
  ``Renderer.render`` leaves out under a template.
- **Scoring.** ``eval.py`` puts the answer prefix before a raw prompt's output before it parses
  and scores it, and nothing after a chat template (a task records it in its cases' ``meta``,
  ``output.helmet_scored``).
- **Stops.** The configs of RAG, re-ranking and ICL say ``stop_new_line: true``, but
  ``arguments.py`` defines only ``--stop_newline`` (default False) and ``set_defaults(**config)``
  stores the config's key under a name nothing reads: the released pipeline never stops at a
  newline. That is the default here; ``--lceval-stop-newline=config`` gives the configs' intent
  (``tasks/stops.py``: a task says ``stop_new_line`` as HELMET's config does).
- **Seeds.** Which questions a run asks and which demonstrations they get follow HELMET's
  seeding, so that the same files give the same prompts (``sample_keys``, ``key_seed``,
  ``shuffled``).
- **Truncation.** A prompt longer than the input length minus the generation budget has the end
  of its context cut at a token boundary (``truncate_context``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

import numpy as np

from ...models.base import Tokenizer
from ...results.records import Prompt
from ...tasks.base import BuildContext, CellDoesNotFit

K = TypeVar("K", bound=Hashable)


def sample_keys(keys: Iterable[K], count: int, seed: int) -> set[K]:
    """The keys (question ids) a run of ``count`` test samples asks: ``random.seed(seed)``, then
    ``random.sample`` of the sorted distinct keys (``load_qa``, ``load_msmarco_rerank``)."""
    distinct = sorted(set(keys))  # type: ignore[type-var]
    return set(random.Random(seed).sample(distinct, min(count, len(distinct))))


def key_seed(key: str) -> int:
    """The seed HELMET derives from a question's key for its demonstration shuffle."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % 2**31


def shuffled(count: int, seed: int) -> list[int]:
    """The order ``datasets.Dataset.shuffle(seed=seed)`` puts ``count`` rows in."""
    return [int(i) for i in np.random.default_rng(seed).permutation(count)]


def first_distinct(rows: Sequence[K], order: Sequence[int], shots: int) -> list[int]:
    """Indices of the first ``shots`` rows of ``order`` with a key not seen before (HELMET's
    ``drop_duplicates(...).select(range(shots))``)."""
    seen: set[K] = set()
    chosen: list[int] = []
    for index in order:
        if rows[index] in seen:
            continue
        seen.add(rows[index])
        chosen.append(index)
        if len(chosen) == shots:
            break
    return chosen


def truncate_context(prompt: Callable[[str], str], context: str, count: Callable[[str], int],
                     tokenizer: Tokenizer, limit: int) -> str:
    """``context`` as HELMET's ``tokenize`` leaves it when the prompt built around it by
    ``prompt`` takes more than ``limit`` tokens (its input length minus the generation budget):
    cut before the token that many tokens from its end, at the character a fast tokenizer's
    offsets give (``offsets``), else by decoding the tokens kept (HELMET's way for a slow
    one)."""
    over = count(prompt(context)) - limit
    if over <= 0:
        return context
    offsets = getattr(tokenizer, "offsets", None)
    spans: list[tuple[int, int]] | None = offsets(context) if offsets is not None else None
    if spans is None:
        ids = tokenizer.encode(context)
        return tokenizer.decode(ids[:-over]) if over < len(ids) else ""
    return context[:spans[-over][0]] if over <= len(spans) else ""


def context_that_fits(context: BuildContext, prompt: Callable[[str], Prompt], whole: str,
                      limit: int, refusal: str) -> str:
    """``whole`` cut as ``truncate_context`` cuts it for the prompt rendered around it; raises
    CellDoesNotFit with ``refusal`` when nothing of a non-empty ``whole`` is left."""
    kept = truncate_context(lambda text: context.renderer.render(prompt(text)), whole,
                            context.renderer.count, context.tokenizer, limit)
    if not kept and whole:
        raise CellDoesNotFit(refusal)
    return kept
