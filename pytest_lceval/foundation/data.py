"""Where task text comes from: the user's data directory, or the offline fixtures.

The project never copies public data sets into its repository; it reads them from a data
directory (--lceval-data or $LCEVAL_DATA). Without one, self-made fixtures are used and every
result says so (``source``).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
"""Self-made offline data, package data so that an installed wheel runs offline too."""
ESSAY_FOLDER = "pg_essays"
"""The data directory's folder of essays (natural prose for haystacks); the fixtures' own
essays stand in without it."""
Fallbacks = tuple[tuple[str, str], ...]
"""(data folder, what is read in its place): a folder whose absence from the data directory
makes cells run on offline fixtures, as recall's self-made essays stand in for pg_essays/."""


class DataError(ValueError):
    """A data file is missing, empty or malformed. The message names the file (and the 1-based
    line) and the fix; the same file feeds every cell, so the run stops at the first one."""


@dataclass(frozen=True)
class DataSource:
    root: Path | None
    """The data directory, or None when running on the offline fixtures."""
    fixtures: Path = FIXTURES
    fetched: Path | None = None
    """Public data --lceval-fetch downloaded (fetch/), consulted after ``root``
    so that the user's own files always win."""

    def folder(self, name: str) -> Path | None:
        """``root/name``, else ``fetched/name``, whichever exists first."""
        for base in (self.root, self.fetched):
            if base is not None and (base / name).is_dir():
                return base / name
        return None

    def essays(self) -> tuple[tuple[str, ...], str]:
        """Natural-prose documents for haystacks, and where they came from; raises DataError."""
        return _read_texts(self.folder(ESSAY_FOLDER) or self.fixtures / "essays")

    def origin(self, name: str) -> str:
        """'data:<name>' or 'fixtures': the provenance recorded in results."""
        return f"data:{name}" if self.folder(name) else "fixtures"


@cache
def _read_texts(folder: Path) -> tuple[tuple[str, ...], str]:
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise DataError(f"no .txt files in {folder}: put the essays there as .txt files, or "
                        f"remove the folder to use the offline fixtures")
    source = "fixtures" if folder.is_relative_to(FIXTURES) else f"data:{folder.name}"
    return tuple(_read_text(path) for path in files), source


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
"""Control bytes that no prose holds (whitespace controls and the C1 range are allowed: the
public essays carry cp1252 dashes decoded as U+0097)."""


def _read_text(path: Path) -> str:
    """One essay; an empty, undecodable or binary file is a broken download, named with its
    path."""
    text = read_data_text(path)
    if not text.strip():
        raise DataError(f"{path} is empty: restore its text or delete it")
    control = _CONTROL.search(text)
    if control:
        byte = "NUL" if control.group() == "\0" else f"control byte {ord(control.group()):#04x}"
        raise DataError(f"{path} holds {byte} at character {control.start()}: it is not plain "
                        f"text (a broken download?); restore its text or delete it")
    return text


def read_data_text(path: Path) -> str:
    """A data file's UTF-8 text. Whatever stops the read (a missing file, a folder, a link that
    loops, no permission, an I/O error) or the decoding is one DataError naming the file."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text (byte {exc.start}): re-save it as UTF-8 or "
                        f"delete it") from None
    except OSError as exc:
        raise DataError(f"cannot read {path} ({exc.strerror or exc}): replace it with the "
                        f"file's contents or delete it") from None


def read_jsonl(path: Path, required: Collection[str] = ()) -> tuple[dict[str, Any], ...]:
    """The JSON objects of a JSONL file (gzipped when its name ends in .gz), blank lines
    skipped. A line that is not a JSON object, or lacks a ``required`` key, raises DataError with
    its 1-based line number in the file."""
    try:
        if path.suffix == ".gz":  # a release that ships gzipped (lost-in-the-middle's oracle)
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        else:
            lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path} line {number} is not valid JSON ({exc.msg}, column "
                            f"{exc.colno}): fix or delete the line") from None
        if not isinstance(row, Mapping):
            raise DataError(f"{path} line {number} is not a JSON object: each line must be "
                            f"one {{...}} record")
        missing = sorted(set(required) - set(row))
        if missing:
            raise DataError(f"{path} line {number} lacks {missing}: every record needs "
                            f"{sorted(required)}")
        rows.append(dict(row))
    return tuple(rows)
