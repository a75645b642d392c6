"""Reading a judge's reply: the scores are the last JSON object of the reply that holds every
field the rubric asked for, with whole numbers in the field's range (HELMET and 100-LongBench
read the last ``{...}`` of the reply; a judge reasons first and answers last)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..tasks.judged import Field

_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


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
