"""The cell grid: parsing lengths and depths, cell ids, markers and per-case seeds."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Cell:
    """One (task, length, depth) point of the grid: one pytest test, N cases.

    Suites with axes of their own subclass it with typed fields (Task Haystack's cell knows its
    permutation and shots) and override ``length_label``, ``id_tail`` and ``axes``.
    """

    suite: str
    """The suite that owns the cell (e.g. 'recall'); also the category marker."""
    task: str
    length: int
    """Token budget: prompt, template and generation budget together; 0 when the length is a
    setting whose token count only measuring tells (``length_label`` names it)."""
    depth: float | None
    """Requested depth in percent; None for tasks that have no single key position."""
    samples: int

    def __post_init__(self) -> None:
        """A cell of a suite's own grid (``api.Cell``) is checked where it is made: a length of
        -5 would otherwise reach the task, which refuses it cells later in words of its own."""
        for name in ("suite", "task"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"Cell {name} {value!r} is not a name: give a non-empty string")
        if not _whole(self.length) or self.length < 0:
            raise ValueError(f"Cell length {self.length!r} is not a token count: give a whole "
                             f"number of tokens >= 0 (0 for a length setting that measuring "
                             f"counts)")
        if self.depth is not None and (isinstance(self.depth, bool)
                                       or not isinstance(self.depth, (int, float))
                                       or not 0.0 <= self.depth <= 100.0):
            raise ValueError(f"Cell depth {self.depth!r} is not a percent of the context: give "
                             f"0..100, or None for a task without a key position")
        if not _whole(self.samples) or self.samples < 1:
            raise ValueError(f"Cell samples {self.samples!r} is not a case count: give a whole "
                             f"number >= 1")

    @property
    def length_label(self) -> str:
        """The length axis as ids and markers name it: '4k', or a setting such as '16t1s'."""
        return format_length(self.length)

    def id_tail(self) -> list[str]:
        """Id parts after task, length and depth (a subclass's own axes)."""
        return []

    def axes(self) -> dict[str, Any]:
        """The subclass's own axes as results.jsonl's ``extra`` records them."""
        return {}

    @property
    def id(self) -> str:
        parts = [self.task, self.length_label]
        if self.depth is not None:
            parts.append(format_depth(self.depth))
        return "-".join(parts + self.id_tail())

    @property
    def length_mark(self) -> str:
        """The cell's length marker: ``len_4k``, ``len_16t1s``."""
        return "len_" + self.length_label.replace(".", "_")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def case_seed(seed: int, *parts: object) -> int:
    """A 32-bit seed from the run seed and a case's coordinates, identical on every machine.

    crc32 rather than hash(): Python's str hash is salted per process, so xdist workers would
    disagree.
    """
    text = "\x1f".join([str(seed), *map(str, parts)])
    return zlib.crc32(text.encode("utf-8"))
