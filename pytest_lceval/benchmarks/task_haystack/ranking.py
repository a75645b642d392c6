"""Rank classification: which option's first token the model finds most likely, and guards.

The first token of an option is taken from the model's own tokenizer *in context*: tokenize the
prompt's end, then the prompt's end + " " + option, and take the first new token. Model-name
heuristics ("drop the BOS") get this wrong for some tokenizers (METHODS §6.3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...models.base import Tokenizer
from ...models.hf_text import first_token_ids
from ...results.records import Ranking
from .data import LliclTask, TaskDataError


class OptionCollisionError(TaskDataError):
    """Two options of a task start with the same token: rank classification cannot separate
    them. The message names the task, the options, the token and the file to fix. A stream
    holds every task's queries, so one such task stops the run (a data error)."""


def check_options(tokenizer: Tokenizer, task: LliclTask, context: str) -> list[int]:
    """Each option's first token after ``context`` (the end of a test prompt), by the same rule
    the backends use (``hf_text.first_token_ids``), so the check cannot disagree with the
    scoring; a task whose options share a first token is refused before any model call."""
    try:
        return first_token_ids(tokenizer, context, task.options)
    except ValueError as exc:
        raise OptionCollisionError(
            f"task {task.name} is refused: {exc}. Rename an option in {task.folder}/config.json "
            f"so that each starts with a distinct token, or leave the task out with "
            f"--haystack-tasks.") from None


@dataclass(frozen=True)
class Scored:
    """Per-case outcomes of one condition on one resample."""

    choices: tuple[int | None, ...]
    """Index of the predicted option per case; None where no option could be scored (a top-k
    server returned none of them, or a generated answer matched none): wrong, and counted."""
    correct: tuple[bool, ...]
    ood: tuple[bool, ...]
    """The model's most likely next token is none of the options' first tokens."""
    prompt_tokens: tuple[int, ...]
    methods: tuple[str, ...] = ()
    """How the rankings were obtained (Ranking.method), one per case."""

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / len(self.correct) if self.correct else 0.0

    @property
    def ood_rate(self) -> float:
        return sum(self.ood) / len(self.ood) if self.ood else 0.0

    @property
    def no_prediction(self) -> int:
        """Cases with no prediction (scored wrong, as the reference code's NO_PREDICTION)."""
        return sum(choice is None for choice in self.choices)

    def bits(self) -> str:
        """'0110...' per-case correctness, compact enough to keep in results.jsonl."""
        return "".join("1" if c else "0" for c in self.correct)


def score(task: LliclTask, rows: Sequence[Mapping[str, str]],
          rankings: Sequence[Ranking]) -> Scored:
    """Prediction = the option with the highest first-token log-probability; none (wrong) when
    no option could be scored."""
    if len(rows) != len(rankings):
        raise ValueError(f"{len(rows)} test rows but {len(rankings)} rankings")
    choices = tuple(r.choice for r in rankings)
    correct = tuple(c is not None and task.options[c] == row["label"]
                    for row, c in zip(rows, choices, strict=True))
    ood = tuple(not r.top_in_options for r in rankings)
    return Scored(choices, correct, ood, tuple(r.prompt_tokens for r in rankings),
                  tuple(r.method for r in rankings))
