"""Strict JSON for the files a run writes (results.jsonl, summary.json, saved baselines, Task
Haystack's tables): no bare NaN or Infinity, which ``JSON.parse``, jq and most dashboards reject.

A number that is not finite is written as null, and its key gets a sibling ``<key>_why`` that
says which it was, so that an infinite value never reads like a missing one: ``infinite``,
``-infinite`` or ``undefined`` (NaN), unless the writer put a reason there already, which must
begin with one of those words (``infinite: no drop is detectable at N=3 ...``). In a list, the
item is null and the list's key gets ``<key>_why`` naming the positions (``undefined at 2, 5``).
Reading back restores the numbers and keeps the reasons, so a run folder round-trips.
"""

from __future__ import annotations

import json
import math
from typing import Any

WHY = "_why"
"""Suffix of the key that says why a sibling value is null."""
INFINITE, NEGATIVE_INFINITE, UNDEFINED = "infinite", "-infinite", "undefined"
_VALUES = {INFINITE: math.inf, NEGATIVE_INFINITE: -math.inf, UNDEFINED: math.nan}


def word(value: float) -> str:
    """The reason word of a number that is not finite."""
    if math.isnan(value):
        return UNDEFINED
    return INFINITE if value > 0 else NEGATIVE_INFINITE


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def encode(value: Any) -> Any:
    """``value`` with every non-finite number replaced by null and explained (see the module)."""
    if isinstance(value, dict):
        encoded: dict[str, Any] = {}
        for key, item in value.items():
            encoded[key] = encode(item)
            reason = _reason(item)
            if reason and not value.get(f"{key}{WHY}"):
                encoded[f"{key}{WHY}"] = reason
        return encoded
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    return value if _finite(value) else None


def _reason(item: Any) -> str:
    """Why ``item`` (a dict's value) is written as null, or the positions of a list's nulls."""
    if isinstance(item, float) and not math.isfinite(item):
        return word(item)
    if isinstance(item, (list, tuple)):
        positions: dict[str, list[str]] = {}
        for index, element in enumerate(item):
            if not _finite(element):
                positions.setdefault(word(element), []).append(str(index))
        return "; ".join(f"{kind} at {', '.join(at)}" for kind, at in positions.items())
    return ""


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`: nulls explained by a ``_why`` key are numbers again."""
    if isinstance(value, list):
        return [decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    decoded = {key: decode(item) for key, item in value.items()}
    for key, reason in value.items():
        target = key.removesuffix(WHY)
        if not key.endswith(WHY) or target not in decoded or not isinstance(reason, str):
            continue
        if decoded[target] is None:
            number = _VALUES.get(reason.partition(":")[0].strip())
            if number is not None:
                decoded[target] = number
        elif isinstance(decoded[target], list):
            decoded[target] = _restore_items(decoded[target], reason)
    return decoded


def _restore_items(items: list[Any], reason: str) -> list[Any]:
    restored = list(items)
    for part in reason.split(";"):
        kind, _, positions = part.strip().partition(" at ")
        for position in positions.split(","):
            index = int(position) if position.strip().isdigit() else -1
            if kind in _VALUES and 0 <= index < len(restored) and restored[index] is None:
                restored[index] = _VALUES[kind]
    return restored


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of the encoded value; it refuses any NaN or infinity left over."""
    return json.dumps(encode(value), allow_nan=False, **kwargs)


def loads(text: str) -> Any:
    return decode(json.loads(text))
