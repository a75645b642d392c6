"""LongScore's options, resolved once (CLI > ini > default) like the core settings."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest

from ....foundation.grid import format_length, parse_length
from ....settings import option_value

DEFAULT_BASE_LENGTHS = "2k,4k,6k"
DEFAULT_FLOOR = 0.05
REDUCED_LONGSCORE_BASE = "1k"
"""The reduced grid's base length (``models.grid_profile.REDUCED_CORE`` runs 1k and 2k), so its
2k cells get a LongScore."""
RELEASED, PAPER = "released", "paper"
BASES = (RELEASED, PAPER)
"""--longscore-base: what a task's base ability is measured on. ``released``, as
100-LongBench's released code (``generate_dataset.py``) makes its length-0 files: the QA and
summary tasks on their gold passages alone (no distractors, no length), the others on the base
lengths; ``paper``, as its §3.2 states: every task on the base lengths."""
POOLED, PER_LENGTH = "pooled", "per-length"
BASE_MEANS = (POOLED, PER_LENGTH)
"""--longscore-base-mean: how a base ability averages its cases. ``pooled``, as the released
code scores it (``eval_trec.py``'s ``scorer`` averages every kept case of the length-0 file,
which holds the 2k, 4k and 6k contexts together); ``per-length``, each base length's mean
weighted the same, as the paper's (S_2k + S_4k + S_6k) / 3 reads. They differ when the
prior-knowledge filter keeps unequal counts per length (e.g. 10/7/4)."""
OFF = ("off", "none")
"""Values of --longscore-base-lengths that turn LongScore off."""


@dataclass(frozen=True)
class LongScoreSettings:
    base_lengths: tuple[int, ...]
    """Short lengths whose mean score is the base ability (the paper: 2k, 4k, 6k); empty = off."""
    minimum: float | None
    """Least LC in percent that a long cell must reach (e.g. -20); None = record, don't assert."""
    floor: float
    """A base ability below this (score 0..1) makes LC undefined instead of a huge ratio."""
    mean_minimum: float | None = None
    """Least mean LC in percent over a suite's long cells (a suite-level gate); None = off."""
    base: str = RELEASED
    """RELEASED or PAPER (see BASES)."""
    base_mean: str = POOLED
    """POOLED or PER_LENGTH (see BASE_MEANS)."""

    def role(self, length: int) -> str:
        """'base' for a base length, 'long' beyond the longest one, 'short' otherwise.

        Lengths below or between the base lengths get no LongScore: the paper's LC and its
        averages are about lengths beyond the base, and a 1k cell 'losing' against a 2k-6k base
        says nothing about long context.
        """
        if length in self.base_lengths:
            return "base"
        if self.base_lengths and length > max(self.base_lengths):
            return "long"
        return "short"

    def active(self, lengths: tuple[int, ...]) -> bool:
        """LongScore runs when the run has long lengths; otherwise it would cost base cases for
        no long cell."""
        return any(self.role(length) == "long" for length in lengths)

    def describe(self) -> str:
        if not self.base_lengths:
            return "off"
        bound = "recorded only" if self.minimum is None else f"LC >= {self.minimum:g}%"
        return (f"base lengths {','.join(format_length(n) for n in self.base_lengths)} "
                f"(--longscore-base {self.base}, --longscore-base-mean {self.base_mean}), "
                f"floor {self.floor:g}, {bound}")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--longscore-min", dest="longscore_min", default=None,
                    help="fail long cells whose LongScore LC = (S - Base) / Base is below this "
                         "percentage, e.g. -20 (default: record LC, don't assert)")
    group.addoption("--longscore-base-lengths", dest="longscore_base_lengths", default=None,
                    help=f"lengths whose mean score is the base ability (default "
                         f"{DEFAULT_BASE_LENGTHS}; 'off' disables LongScore)")
    group.addoption("--longscore-base", dest="longscore_base", default=None,
                    help=f"what a task's base ability is measured on: {RELEASED} (default, "
                         f"100-LongBench's released code: QA and summary tasks on their gold "
                         f"passages alone, other tasks on the base lengths) or {PAPER} (the "
                         f"paper: every task on the base lengths)")
    group.addoption("--longscore-base-mean", dest="longscore_base_mean", default=None,
                    help=f"how the base ability averages its cases: {POOLED} (default, "
                         f"100-LongBench's released code: one mean over every kept base case) "
                         f"or {PER_LENGTH} (each base length's mean weighted the same)")
    group.addoption("--longscore-floor", dest="longscore_floor", default=None,
                    help=f"base ability (0..1) below which LongScore is undefined (default "
                         f"{DEFAULT_FLOOR})")
    group.addoption("--longscore-mean-min", dest="longscore_mean_min", default=None,
                    help="suite-level gate: fail the run when a suite's mean LongScore over its "
                         "long cells is below this percentage, e.g. -10")
    parser.addini("longscore_min", "default --longscore-min", type="string")
    parser.addini("longscore_mean_min", "default --longscore-mean-min", type="string")
    parser.addini("longscore_base_lengths", "default --longscore-base-lengths", type="string")
    parser.addini("longscore_floor", "default --longscore-floor", type="string")
    parser.addini("longscore_base", "default --longscore-base", type="string")
    parser.addini("longscore_base_mean", "default --longscore-base-mean", type="string")


def resolve(config: pytest.Config, reduced_grid: bool = False) -> LongScoreSettings:
    """``reduced_grid``: the run got the CPU-sized grid, whose base length is shorter."""
    def get(name: str, parse: Any, default: Any, fix: str) -> Any:
        return option_value(config, name, parse, default, fix)

    return LongScoreSettings(
        base_lengths=get("longscore_base_lengths", _base_lengths,
                         _base_lengths(REDUCED_LONGSCORE_BASE if reduced_grid
                                       else DEFAULT_BASE_LENGTHS),
                         "Give lengths such as --longscore-base-lengths 2k,4k,6k, or 'off'."),
        minimum=get("longscore_min", _percent, None,
                    "Give a percentage such as --longscore-min -20 (LC of -20% keeps 80% of "
                    "the base ability)."),
        floor=get("longscore_floor", _fraction, DEFAULT_FLOOR,
                  "Give a score fraction such as --longscore-floor 0.05."),
        mean_minimum=get("longscore_mean_min", _percent, None,
                         "Give a percentage such as --longscore-mean-min -10."),
        base=get("longscore_base", _base, RELEASED, f"Give {' or '.join(BASES)}."),
        base_mean=get("longscore_base_mean", _base_mean, POOLED,
                      f"Give {' or '.join(BASE_MEANS)}."),
    )


def _base(text: Any) -> str:
    value = str(text).strip().lower()
    if value not in BASES:
        raise ValueError(f"unknown base {text!r}")
    return value


def _base_mean(text: Any) -> str:
    value = str(text).strip().lower()
    if value not in BASE_MEANS:
        raise ValueError(f"unknown base mean {text!r}")
    return value


def _base_lengths(text: Any) -> tuple[int, ...]:
    if str(text).strip().lower() in OFF:
        return ()
    lengths = [parse_length(part) for part in str(text).split(",") if part.strip()]
    if not lengths:
        raise ValueError("the list is empty")
    return tuple(sorted(set(lengths)))


def _percent(text: Any) -> float:
    value = float(str(text).strip().rstrip("%"))
    if not math.isfinite(value) or value < -100.0:
        raise ValueError("LC is a percentage change and cannot be below -100")
    return value


def _fraction(text: Any) -> float:
    value = float(str(text))
    if not 0.0 <= value < 1.0:
        raise ValueError("the floor is a score fraction in 0..1 (write 0.05, not 5)")
    return value
