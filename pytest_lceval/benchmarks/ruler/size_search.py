"""How many haystack units a recall case gets under ``--lceval-context-size reference``: the
number RULER f682453's own size search picks (the code that generated HELMET's recall files).

f682453 searches once per file, upward from a first size in fixed steps, each try measured in
the model's tokenizer, and keeps the last try that fit; a sample that then does not fit steps
down. What each generator steps by and how it measures a try:

- NIAH (``niah.py``): essay words from 500 by 500; noise lines or filler needles from 25 by 25
  (from 5 by 5 below 4k); a try fits when its prompt with the answers appended
  (``input + " ".join(answers)``) plus the generation budget is within the length.
- VT (``variable_tracking.py``): noise lines from 10 by 10; the prompt with ``" " + str(answer)``
  (the variables as a Python list) appended.
- CWE (``common_words_extraction.py``): distinct words from 10 by 10; the prompt with
  ``" 1. word 2. word ..."`` appended.
- FWE (``freq_words_extraction.py``): Zipf's n from ``limit // 6`` by ``limit // 32`` while the
  prompt alone stays under ``limit`` tokens, then one step back.

Here a try is the project's prompt for that many units, rendered and measured as every cell's
(METHODS §1: with the chat template when one is used). The search starts at the step below the
size the fitting found and moves a step at a time, which for counts that grow with the size
gives what f682453's walk from its first try gives, in two or three measurements. RULER
searches with draws of its own and then writes every sample at that size; here each case is
measured with its own needles, so near a step's edge one case may get a step more or less than
a file of RULER's would. The step is large below 4k: an essay case at 1k holds 500 words where
the filled cell held about 720.

Deviation: f682453's FWE gives the prompt alone the whole length (its budget can overflow the
cell); its limit here is the length less the generation budget, as RULER's code does since 2025.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...models.base import Renderer
from ...tasks.base import CellDoesNotFit
from ...tasks.fitting import Fitted, count_with
from .filler_text import Context

LONG = 4096
"""Below this length f682453 steps its noise and needle haystacks by 5 lines instead of 25."""


@dataclass(frozen=True)
class Steps:
    """One generator's search: its first try, its step, what it appends to a try's prompt to
    measure it, the most tokens a try may take, and whether it must stay under them (FWE)."""

    first: int
    step: int
    answer: str
    limit: int
    strict: bool = False

    def fits(self, tokens: int) -> bool:
        return tokens < self.limit if self.strict else tokens <= self.limit


def niah_steps(haystack: str, length: int, max_new_tokens: int, answers: list[str]) -> Steps:
    step = 500 if haystack == "essay" else 25 if length >= LONG else 5
    return Steps(step, step, " ".join(answers), length - max_new_tokens)


def searched(make: Callable[[int], Fitted[Context]], steps: Steps, near: int,
             renderer: Renderer, what: str) -> Fitted[Context]:
    """The case at the size f682453's search picks, the search started near ``near`` units:
    the largest size on its steps whose try fits, then, as f682453 checks each sample, a step
    down while the prompt alone does not."""
    def measured(units: int) -> tuple[Fitted[Context], bool]:
        if units < steps.first:
            raise CellDoesNotFit(f"{what}: RULER's first size, {steps.first} units, takes "
                                 f"more than the {steps.limit} tokens its search allows")
        fitted = make(units)
        return fitted, steps.fits(count_with(fitted, steps.answer, renderer))

    units = steps.first + max(near - steps.first, 0) // steps.step * steps.step
    fitted, fits = measured(units)
    while not fits:
        units -= steps.step
        fitted, fits = measured(units)
    while True:
        larger, fits = measured(units + steps.step)
        if not fits:
            break
        units, fitted = units + steps.step, larger
    while fitted.prompt_tokens > steps.limit:
        units -= steps.step
        fitted, _ = measured(units)
    return fitted
