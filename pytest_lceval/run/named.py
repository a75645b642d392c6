"""Objects that plugins register by name through a hook (suites, criteria): gathered once per
process, and two of one name are a usage error rather than one silently hiding the other."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

import pytest


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


def by_name(groups: Iterable[Iterable[N] | None], kind: str) -> dict[str, N]:
    """The hook's answers (one list per plugin) by name."""
    found: dict[str, N] = {}
    for group in groups:
        for item in group or ():
            if item.name in found:
                raise pytest.UsageError(
                    f"pytest-lceval: two plugins register a {kind} named {item.name!r}: "
                    f"{type(found[item.name]).__qualname__} and {type(item).__qualname__}; "
                    f"rename one")
            found[item.name] = item
    return found
