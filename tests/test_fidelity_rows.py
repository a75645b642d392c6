"""docs/fidelity.md's promise that its conformance tests can fail (issue #34): every row a
conformance test pins (``tests/conformance/``) is marked faithful by naming the mutations of
``tests/conformance/test_mutations.py`` that make its test fail, and every mutation a row names
is one that file applies. Read from the two files' text, so the check needs neither the
reference code nor the data."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIDELITY = ROOT / "docs" / "fidelity.md"
MUTATIONS = ROOT / "tests" / "conformance" / "test_mutations.py"
CONFORMANCE = re.compile(r"tests/conformance/test_\w+\.py|`test_\w+\.py::")
"""A conformance test, named with its folder or, in the HELMET sections, under it."""
NAMED = re.compile(r"mutations? ((?:`[\w.-]+`(?:, )?)+)")


def rows() -> Iterator[tuple[str, str]]:
    """Each table row's item and its last column (the tests that pin it), the table of the
    mutations themselves and the commits left out."""
    for line in FIDELITY.read_text(encoding="utf-8").splitlines():
        cells = line.split(" | ")
        if not line.startswith("| ") or len(cells) < 3 or set(cells[0]) <= set("|- "):
            continue
        item = cells[0].removeprefix("| ")
        if item.startswith("`") or item in ("item", "mutation"):
            continue
        yield item, cells[-1]


def named(tests: str) -> set[str]:
    return {name for listed in NAMED.findall(tests) for name in re.findall(r"`([^`]+)`", listed)}


def mutations() -> set[str]:
    """The names ``test_mutations.py`` gives its mutations (the keys of its two tables)."""
    return set(re.findall(r'^    "([\w.-]+)": \(', MUTATIONS.read_text(encoding="utf-8"),
                          re.MULTILINE))


def test_every_row_a_conformance_test_pins_names_its_mutations() -> None:
    unmarked = [item for item, tests in rows() if CONFORMANCE.search(tests) and not named(tests)]
    assert unmarked == []


def test_every_mutation_a_row_names_is_applied() -> None:
    known = mutations()
    assert len(known) >= 80
    unknown = {name for _, tests in rows() for name in named(tests)} - known
    assert unknown == set()


def test_a_row_without_its_mutation_is_found(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The check sees a conformance-pinned row that names no mutation, and a mutation that
    does not exist."""
    page = tmp_path / "fidelity.md"
    page.write_text("| item | reference | this project | test |\n| --- | --- | --- | --- |\n"
                    "| A | r | p | `tests/conformance/test_x.py::test_a` |\n"
                    "| B | r | p | `test_helmet_x.py::test_b`; mutation `no-such-one` |\n"
                    "| C | r | p | `tests/test_unit.py::test_c` |\n")
    monkeypatch.setattr(sys.modules[__name__], "FIDELITY", page)
    assert [item for item, tests in rows() if CONFORMANCE.search(tests)
            and not named(tests)] == ["A"]
    assert {name for _, tests in rows() for name in named(tests)} - mutations() == {"no-such-one"}
