"""The conformance layer's tally: what each test compared against the papers' own code, summed
per category and printed at the end of the run ("prompts compared / identical, outputs scored /
identical, choices compared / identical": a choice is what the reference decides for itself from
the raw inputs, such as a haystack's size).

A plugin of tests/conftest.py rather than of tests/conformance/: under pytest-xdist the controller
never imports the conformance folder's conftest, but it does receive each test's user
properties, which is how the counts travel.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

NOT_CONFIGURED = "conformance layer not run: no reference configured"
"""How the layer's skip reason starts (tests/conformance/conftest.py): the summary repeats it,
so a run where the layer did not run says so even under ``-q``."""
PROPERTY = "conformance"
"""The user property a conformance test's counts travel in."""
KINDS = ("prompts", "outputs", "choices")


@dataclass
class Count:
    compared: int = 0
    identical: int = 0
    options: dict[str, int] = field(default_factory=dict)
    """Items compared under a named option (a documented deviation's switch), by option."""


class Tally:
    """What one test compared, recorded as it goes (fixture ``conformance``)."""

    def __init__(self, node: pytest.Item) -> None:
        self.node = node

    def record(self, category: str, kind: str, compared: int, identical: int,
               option: str | None = None) -> None:
        """``compared`` items of ``kind`` (one of KINDS) in ``category`` fed to the
        reference and to the project, of which ``identical`` agreed; ``option`` names the
        project option under which they were compared, when not the default."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        self.node.user_properties.append((PROPERTY, json.dumps(
            {"category": category, "kind": kind, "compared": compared, "identical": identical,
             "option": option})))

    def compare(self, category: str, kind: str, pairs: Iterable[Sequence[Any]],
                option: str | None = None) -> None:
        """Each ``(ours, theirs)`` pair (or ``(ours, theirs, what)``, ``what`` naming the item)
        counted, identical or not, then the test failed at the first that differs, showing
        both: recorded after an assertion, a failing test's items went uncounted and the tally
        read "compared 12 / identical 12" with twelve tests failing."""
        pairs = list(pairs)
        self.record(category, kind, len(pairs), sum(pair[0] == pair[1] for pair in pairs),
                    option)
        for ours, theirs, *what in pairs:
            assert ours == theirs, what


@pytest.fixture
def conformance(request: pytest.FixtureRequest) -> Tally:
    return Tally(request.node)


class Summary:
    """Sums the counts of every test's report (on the controller under xdist) and prints them."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], Count] = defaultdict(Count)
        self.not_run: dict[str, int] = {}
        """Conformance tests skipped because no reference is configured, by reason."""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and isinstance(report.longrepr, tuple) \
                and str(report.longrepr[2]).removeprefix("Skipped: ").startswith(NOT_CONFIGURED):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            self.not_run[reason] = self.not_run.get(reason, 0) + 1
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name != PROPERTY:
                continue
            entry = json.loads(str(value))
            count = self.counts[(entry["category"], entry["kind"])]
            count.compared += entry["compared"]
            count.identical += entry["identical"]
            if entry["option"]:
                count.options[entry["option"]] = (count.options.get(entry["option"], 0)
                                                  + entry["compared"])

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for reason, count in self.not_run.items():
            terminalreporter.write_line(f"{reason}: {count} tests skipped")
        if not self.counts:
            return
        terminalreporter.section("conformance with the papers' reference code")
        categories = sorted({category for category, _ in self.counts})
        width = max(len(category) for category in categories)
        for category in categories:
            parts = []
            for kind, verb in (("prompts", "compared"), ("outputs", "scored"),
                               ("choices", "compared")):
                count = self.counts.get((category, kind))
                if count is None:
                    continue
                under = "".join(f" ({n} of them under {option})"
                                for option, n in sorted(count.options.items()))
                parts.append(f"{kind} {verb} {count.compared} / identical {count.identical}"
                             f"{under}")
            terminalreporter.write_line(f"{category:<{width}}  {'; '.join(parts)}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Summary(), "lceval-conformance-summary")
