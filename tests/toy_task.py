"""A user-written task in a few dozen lines: the plugin's own tests register it in pytester.

It hides "special magic number" needles in filler words, so mock:grep answers it perfectly and
mock:constant never does; it does not depend on the built-in generators.
"""

import random
from dataclasses import dataclass
from typing import ClassVar

from pytest_lceval.api import (
    STRING_MATCH_ALL,
    BuildContext,
    Case,
    Cell,
    CellDoesNotFit,
    GenerationSuite,
    Prompt,
    ScoreMetric,
    case_seed,
    string_match_all,
)


@dataclass(frozen=True)
class ToyNeedle:
    metric: ClassVar[ScoreMetric] = STRING_MATCH_ALL
    name: str = "toy"
    uses_depth: bool = True
    max_new_tokens: int = 8

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        cases = []
        for index in range(cell.samples):
            rng = random.Random(case_seed(context.seed, self.name, cell.length, cell.depth, index))
            key, value = f"k{rng.randrange(10**6)}", str(rng.randrange(10**6, 10**7))
            words = ["filler"] * max(0, cell.length - 40 - self.max_new_tokens)
            if not words:
                raise CellDoesNotFit(f"{cell.length} tokens leave no room for filler")
            position = round(len(words) * (cell.depth or 0) / 100)
            words.insert(position, f"One of the special magic numbers for {key} is: {value}.")
            prompt = Prompt(" ".join(words) + f"\nWhat is the special magic number for {key}?",
                            " Answer:")
            text = context.renderer.render(prompt)
            cases.append(Case(index, text, (value,), context.renderer.count(text),
                              100 * position / len(words), self.max_new_tokens))
        return cases

    def score(self, output: str, case: Case) -> float:
        return string_match_all(output, case.gold)


TASKS = [ToyNeedle()]


def pytest_lceval_suites(config):
    """The toy suite: its tasks over the run's lengths and depths."""
    return [GenerationSuite("toy", TASKS)]
