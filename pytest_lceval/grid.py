"""The cell grid: parsing lengths and depths, cell ids, markers and per-case seeds."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Any

_LENGTH = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


def parse_length(text: str) -> int:
    """'8k' -> 8192 (binary k, as HELMET), '1.5k' -> 1536, '3000' -> 3000, '1m' -> 1048576."""
    match = _LENGTH.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a length; write tokens like 4096, 4k or 1.5k")
    number, unit = float(match.group(1)), match.group(2).lower()
    scale = {"": 1, "k": 1024, "m": 1024 * 1024}[unit]
    tokens = number * scale
    if tokens != int(tokens) or tokens <= 0:
        raise ValueError(f"{text!r} is not a whole positive number of tokens")
    return int(tokens)


def format_length(tokens: int) -> str:
    """Inverse of parse_length for display and ids: 8192 -> '8k', 1536 -> '1.5k', 512 -> '512'."""
    if tokens < 1024:
        return str(tokens)
    if tokens % 1024 == 0:
        return f"{tokens // 1024}k" if tokens < 1024 * 1024 else f"{tokens // (1024 * 1024)}m"
    if (tokens * 2) % 1024 == 0:
        return f"{tokens / 1024:g}k"
    return str(tokens)


def parse_depth(text: str) -> float:
    """'50' or '50%' -> 50.0; depths are percent of the context, 0 = start, 100 = end."""
    value = float(text.strip().rstrip("%"))
    if not 0.0 <= value <= 100.0:
        raise ValueError(f"depth {text!r} is outside 0..100 (percent of the context)")
    return value


def format_depth(depth: float) -> str:
    return f"{depth:g}"


def length_marker(tokens: int) -> str:
    """Marker name for a length, usable in -m expressions: 4096 -> 'len_4k'."""
    return "len_" + format_length(tokens).replace(".", "_")


@dataclass(frozen=True)
class Cell:
    """One (task, length, depth) point of the grid: one pytest test, N cases."""

    suite: str
    """The suite that owns the cell (e.g. 'recall'); also the category marker."""
    task: str
    length: int
    """Token budget: prompt, template and generation budget together."""
    depth: float | None
    """Requested depth in percent; None for tasks that have no single key position."""
    samples: int
    extra: tuple[tuple[str, Any], ...] = field(default=())
    """Suite-specific axes (e.g. Task Haystack's permutation), as sorted (name, value) pairs."""
    label: str | None = None
    """Names the length axis in ids and markers when it is a setting rather than a token budget
    (Task Haystack's '16t1s' = 16 tasks, 1 shot per class, whose token length is measured)."""

    @property
    def id(self) -> str:
        parts = [self.task, self.label or format_length(self.length)]
        if self.depth is not None:
            parts.append(format_depth(self.depth))
        parts.extend(str(value) for _, value in self.extra)
        return "-".join(parts)

    @property
    def length_mark(self) -> str:
        """The cell's length marker: ``len_4k``, or ``len_<label>`` for labelled lengths."""
        return "len_" + self.label if self.label else length_marker(self.length)

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.extra).get(name, default)


def case_seed(seed: int, *parts: object) -> int:
    """A 32-bit seed from the run seed and a case's coordinates, identical on every machine.

    crc32 rather than hash(): Python's str hash is salted per process, so xdist workers would
    disagree.
    """
    text = "\x1f".join([str(seed), *map(str, parts)])
    return zlib.crc32(text.encode("utf-8"))
