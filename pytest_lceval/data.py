"""Where task text comes from: the user's data directory, or the offline fixtures.

The project never copies public data sets into its repository; it reads them from a data
directory (--lceval-data or $LCEVAL_DATA). Without one, self-made fixtures are used and every
result says so (``source``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
"""Self-made offline data shipped with the checkout."""


@dataclass(frozen=True)
class DataSource:
    root: Path | None
    """The data directory, or None when running on the offline fixtures."""
    fixtures: Path = FIXTURES

    def folder(self, name: str) -> Path | None:
        """``root/name`` if the data directory has it."""
        if self.root is not None and (self.root / name).is_dir():
            return self.root / name
        return None

    def essays(self) -> tuple[tuple[str, ...], str]:
        """Natural-prose documents for haystacks, and where they came from."""
        return _read_texts(self.folder("pg_essays") or self.fixtures / "essays")

    def origin(self, name: str) -> str:
        """'data:<name>' or 'fixtures': the provenance recorded in results."""
        return f"data:{name}" if self.folder(name) else "fixtures"


@cache
def _read_texts(folder: Path) -> tuple[tuple[str, ...], str]:
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise FileNotFoundError(f"no .txt files in {folder}")
    source = "fixtures" if folder.is_relative_to(FIXTURES) else f"data:{folder.name}"
    return tuple(path.read_text(encoding="utf-8") for path in files), source
