"""Reading a judge's reply: the scores are the last JSON object of the reply that holds every
field the rubric asked for, with whole numbers in the field's range (HELMET and 100-LongBench
read the last ``{...}`` of the reply; a judge reasons first and answers last)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


@dataclass(frozen=True)
class Field:
    """One score the judge must give: a whole number from ``low`` to ``high``."""

    name: str
    low: int = 0
    high: int | None = None
    """None: a count with no fixed top (sentences of a summary)."""
    at_most: str | None = None
    """Another field this one cannot exceed (supported sentences <= sentences)."""

    @property
    def ordinal(self) -> bool:
        """A rating on a fixed scale (fluency, correctness), which two judges' kappa compares;
        counts are compared by the scores they lead to instead."""
        return self.high is not None

    def describe(self) -> str:
        top = "" if self.high is None else f" to {self.high}"
        return f'"{self.name}" (a whole number from {self.low}{top})'


class Unparsed(ValueError):
    """The reply holds no usable scores; the message says what was missing, for the retry."""


def parse_scores(reply: str, fields: Sequence[Field]) -> dict[str, int]:
    """The scores of ``fields`` from the last JSON object of ``reply`` that holds them all."""
    candidates = _FENCED.findall(reply) + _OBJECT.findall(reply)
    if not candidates:
        raise Unparsed("the reply has no JSON object")
    problem = "no JSON object in the reply could be read"
    for text in reversed(candidates):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if not isinstance(value, dict):
            continue
        try:
            scores = {field.name: _whole(value, field) for field in fields}
            _check_bounds(scores, fields)
            return scores
        except Unparsed as exc:
            problem = str(exc)
    raise Unparsed(problem)


def _whole(value: dict[str, object], field: Field) -> int:
    if field.name not in value:
        raise Unparsed(f"the JSON object has no field \"{field.name}\"")
    number = value[field.name]
    if isinstance(number, str):
        number = number.strip()
        number = int(number) if re.fullmatch(r"-?\d+", number) else number
    if isinstance(number, bool) or not isinstance(number, (int, float)) \
            or float(number) != int(number):
        raise Unparsed(f"\"{field.name}\" is {number!r}, not a whole number")
    whole = int(number)
    if whole < field.low or (field.high is not None and whole > field.high):
        raise Unparsed(f"\"{field.name}\" is {whole}, outside {field.low}.."
                       f"{'' if field.high is None else field.high}")
    return whole


def _check_bounds(scores: dict[str, int], fields: Sequence[Field]) -> None:
    for field in fields:
        if field.at_most is not None and scores[field.name] > scores[field.at_most]:
            raise Unparsed(f"\"{field.name}\" ({scores[field.name]}) exceeds "
                           f"\"{field.at_most}\" ({scores[field.at_most]})")
