"""The saved-run file (``<--lceval-out>/baselines/NAME.json``) and case-by-case pairing."""

from __future__ import annotations

import json
import math
import re
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from filelock import FileLock

from ... import __version__
from ...results import strict_json
from ...results.cells import CellResult
from ...results.score_metric import ScoreMetric, range_text
from ...results.whole_file import write_whole
from ...settings import Settings
from ...store.repair import HEADER as SQLITE_HEADER

FORMAT = "pytest-lceval-baseline"
FORMAT_VERSION = 1
BASELINES_DIR = "baselines"
"""Saved runs live in <--lceval-out>/baselines/NAME.json."""
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class SavedCell:
    """One cell of a saved run."""

    nodeid: str
    score: float
    n: int
    outcome: str
    scores: tuple[float, ...]
    case_keys: tuple[str, ...]
    judge: str = ""
    """The judge that scored the cell (spec@fingerprint); "" for rule-scored cells."""
    suite: str = ""
    task: str = ""
    length: int = 0
    """The cell's axes, for numbers over cells (the effective context length)."""


@dataclass(frozen=True)
class SavedRun:
    """A run saved with --lceval-save: what a later run is compared against."""

    name: str
    path: Path
    model: str
    fingerprint: str
    """Model fingerprint (weights, tokenizer, template, engine)."""
    seed: int
    package_version: str
    settings: dict[str, Any]
    created: str
    cells: dict[str, SavedCell]
    """By nodeid."""
    run: str = ""
    """The run folder it was saved from; "" when not recorded."""


# -- the file -------------------------------------------------------------------------------


def baseline_path(value: str, out_root: Path) -> Path:
    """NAME -> <out_root>/baselines/NAME.json; anything with a slash or .json is a path."""
    if "/" in value or "\\" in value or value.endswith(".json"):
        return Path(value).expanduser()
    if not _NAME.match(value):
        raise ValueError("a baseline name uses letters, digits, '.', '_' and '-' only")
    return out_root / BASELINES_DIR / f"{value}.json"


class SaveRefused(ValueError):
    """Saving would lose a better baseline, or a file that is not one: the message says what
    the save would replace, and the plugin adds the fix (another name)."""


def save_run(path: Path, results: list[CellResult], settings: Settings, run_dir: Path,
             left_out: int = 0) -> str | None:
    """Write a saved run of ``results`` (every one measured; ``left_out``: the run's cells that
    were not): whole, to a file of its own renamed over ``path``, so that the old baseline is
    there until the new one is; under a lock, so that two runs saving one name at once write
    one after the other, each deciding on the file the other left. Returns what the save
    replaced ("the one run X saved at T"), or None for a new file; raises SaveRefused when it
    would replace a baseline with less (``check_replacing``)."""
    models = sorted({r.model for r in results})
    fingerprints = sorted({r.fingerprint for r in results})
    payload = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "name": path.stem,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "package_version": __version__,
        "run": str(run_dir),
        "model": ", ".join(models), "fingerprint": ", ".join(fingerprints),
        "seed": settings.seed,
        "settings": json.loads(json.dumps(asdict(settings), default=str)),
        "cells": {
            r.nodeid: {"score": r.score, "n": r.n, "outcome": r.outcome, "scores": r.scores,
                       "case_keys": r.case_keys, "judge": r.judge, "suite": r.suite,
                       "task": r.task,
                       "length": r.length, "depth": r.depth, "extra": r.extra}
            for r in results
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_name(path.name + ".lock"))):
        replaced = check_replacing(path, len(results), left_out)
        write_whole(path, strict_json.dumps(payload, indent=1, sort_keys=True))
    return replaced


def check_replacing(path: Path, cells: int, left_out: int = 0,
                    counted: str = "this run measured") -> str | None:
    """Whether a save of ``cells`` measured cells (and ``left_out`` not measured) may replace
    what ``path`` holds: nothing, or a baseline of at most as many measured cells, and only
    from a run that measured every cell (``counted`` says what ``cells`` counts). Returns who
    wrote the baseline replaced, as the line about replacing it says; None when there is none;
    raises SaveRefused otherwise."""
    if not path.exists():
        return None
    try:
        old = load_run(path)
    except ValueError as exc:
        raise SaveRefused(f"{path} holds something other than a readable baseline "
                          f"({exc})") from None
    measured = sum(bool(cell.scores) for cell in old.cells.values())
    if left_out:
        raise SaveRefused(f"it would replace baseline {old.name!r} ({measured} measured cells) "
                          f"with a run that left {left_out} of its "
                          f"{cells + left_out} cells unmeasured")
    if cells < measured:
        raise SaveRefused(f"it would replace baseline {old.name!r} ({measured} measured cells, "
                          f"saved at {old.created}) with the {cells} cells {counted}")
    return f"the one run {old.run or '(not recorded)'} saved at {old.created}"


def load_run(path: Path) -> SavedRun:
    """Read a saved run; ValueError says what is wrong with the file."""
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.json")) if path.parent.is_dir() else []
        listing = f"saved runs in {path.parent}: {', '.join(known)}" if known else \
            f"no saved runs in {path.parent}"
        raise ValueError(f"{path} does not exist ({listing}); save one with --lceval-save=NAME")
    try:
        data = strict_json.loads(_baseline_text(path))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path} is not a pytest-lceval saved run")
    if data.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path} has format version {data.get('format_version')}, this "
                         f"pytest-lceval reads {FORMAT_VERSION}; save the baseline again")
    run = _Fields(path, "", data)
    cells = run.get("cells", dict)
    return SavedRun(run.get("name", str), path, run.get("model", str),
                    run.get("fingerprint", str), run.get("seed", int),
                    run.get("package_version", str), run.get("settings", dict),
                    run.get("created", str),
                    {str(nodeid): _cell(path, str(nodeid), cell) for nodeid, cell in cells.items()},
                    run.get("run", str, ""))


def _baseline_text(path: Path) -> str:
    """The file's text, or a ValueError naming the file and what it holds instead (a store
    written there by ``--lceval-store`` is not UTF-8: its bytes are not the message)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path} cannot be read ({exc.strerror})") from None
    if data.startswith(SQLITE_HEADER):
        raise ValueError(f"{path} is a SQLite database (a store, as --lceval-store writes), "
                         f"not a saved run")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not a text file (byte {data[exc.start]:#04x} at "
                         f"{exc.start} is not UTF-8), not a saved run") from None


class _Fields:
    """Typed reads of one object of a saved run: any missing field or value of another type is
    a ValueError naming the file, the cell (for a cell's field) and the field, so that a
    hand-edited baseline stops the run in one line before the first cell, never with a
    KeyError in the middle of it or a NaN compared as "unchanged"."""

    def __init__(self, path: Path, cell: str, data: Any) -> None:
        self.where = f"{path}: " + (f"cell {cell!r}: " if cell else "")
        if not isinstance(data, dict):
            raise ValueError(f"{self.where}is {type(data).__name__}, not an object")
        self.data = data

    def fail(self, name: str, problem: str) -> ValueError:
        return _field_error(self.where, name, problem)

    def get(self, name: str, kind: type[T], default: T | None = None) -> T:
        if name not in self.data or (self.data[name] is None and default is not None):
            if default is not None:
                return default
            raise self.fail(name, "is missing")
        value = self.data[name]
        if kind is float and _number(value):
            return cast(T, float(value))
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(name, f"is {value!r}, not {_KINDS.get(kind, kind.__name__)}")
        return value

    def scores(self, name: str) -> tuple[float, ...]:
        values = self.get(name, list)
        for index, value in enumerate(values):
            if not _number(value) or not math.isfinite(value):
                raise self.fail(name, f"holds {value!r} at case {index}, not a finite number")
        return tuple(float(value) for value in values)


def _field_error(where: str, name: str, problem: str) -> ValueError:
    return ValueError(f"{where}field {name!r} {problem}; save the baseline again with "
                      f"--lceval-save")


def check_ranges(saved: SavedRun, metrics: Mapping[str, ScoreMetric]) -> None:
    """Every saved score of the cells in ``metrics`` (by nodeid, the metric this run's cell is
    on) lies in its metric's range, or a ValueError names the file, the cell and the case: a
    hand-edited 1.5 on a 0-1 metric would pair as a drop no model can make."""
    for nodeid, metric in metrics.items():
        cell = saved.cells.get(nodeid)
        for index, score in enumerate(cell.scores if cell is not None else ()):
            if not metric.low <= score <= metric.high:
                raise _field_error(f"{saved.path}: cell {nodeid!r}: ", "scores", (
                    f"holds {score:g} at case {index}, outside the range "
                    f"{range_text(metric.range)} of its metric {metric.name}"))


T = TypeVar("T")
_KINDS = {str: "a string", int: "a whole number", float: "a number", list: "a list",
          dict: "an object"}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(path: Path, nodeid: str, raw: Any) -> SavedCell:
    cell = _Fields(path, nodeid, raw)
    scores, keys = cell.scores("scores"), cell.get("case_keys", list)
    if len(keys) != len(scores) or not all(isinstance(key, str) for key in keys):
        raise cell.fail("case_keys", f"holds {len(keys)} values for {len(scores)} scores, or "
                        f"one that is not a string")
    return SavedCell(nodeid, cell.get("score", float), cell.get("n", int),
                     cell.get("outcome", str), scores, tuple(keys), cell.get("judge", str, ""),
                     cell.get("suite", str, ""), cell.get("task", str, ""),
                     cell.get("length", int, 0))


# -- pairing --------------------------------------------------------------------------------


class CasesDiffer(ValueError):
    """The two runs measured different prompts for a cell; the message names the likely cause."""


def pair_scores(saved: SavedRun, cell: SavedCell, result: CellResult,
                settings: Settings) -> tuple[list[float], list[float]]:
    """(baseline, current) scores of the cases both runs measured, in this run's case order.

    Pairs on the common cases: runs with different --samples share a prefix of cases, and a
    prior-knowledge filter may drop different cases for different models. No common case at all
    means the runs built different prompts, and the comparison is refused with the likely cause.
    """
    saved_scores: dict[str, list[float]] = defaultdict(list)
    for key, score in zip(cell.case_keys, cell.scores, strict=True):
        saved_scores[key].append(score)
    base, current = [], []
    for key, score in zip(result.case_keys, result.scores, strict=True):
        if saved_scores.get(key):
            base.append(saved_scores[key].pop(0))
            current.append(score)
    if not base:
        raise CasesDiffer(_differ_message(saved, cell, result, settings))
    return base, current


def _differ_message(saved: SavedRun, cell: SavedCell, result: CellResult,
                    settings: Settings) -> str:
    causes = []
    if saved.seed != result.seed:
        causes.append(f"the seed differs (baseline {saved.seed}, this run {result.seed}): rerun "
                      f"with --lceval-seed={saved.seed}")
    saved_template = saved.settings.get("chat_template")
    if saved_template is not None and saved_template != settings.chat_template:
        causes.append(f"--chat-template differs (baseline {saved_template}, this run "
                      f"{settings.chat_template})")
    saved_stop = saved.settings.get("stop_newline", "released")
    if saved_stop != settings.stop_newline:
        causes.append(f"--lceval-stop-newline differs (baseline {saved_stop}, this run "
                      f"{settings.stop_newline})")
    if saved.fingerprint != result.fingerprint:
        causes.append(f"the model differs (baseline {saved.model}, this run {result.model}): a "
                      f"different tokenizer or chat template builds different prompts, so only "
                      f"models that share them can be paired")
    if saved.package_version != __version__ or not causes:
        causes.append(f"the task generator changed (baseline saved by pytest-lceval "
                      f"{saved.package_version}, this is {__version__})")
    return (f"cannot compare with baseline {saved.name!r}: none of this cell's "
            f"{len(result.case_keys)} cases is among the baseline's {len(cell.case_keys)}; "
            f"cases pair by request hash, so the prompts differ. Likely cause: "
            + "; ".join(causes))
