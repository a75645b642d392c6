"""The built-in suite-level gates: ``--lceval-min-pass-rate`` asserts the share of a suite's
judged cells that passed (a release gate on a whole suite, beside the per-cell verdicts), and a
suite none of whose cells was judged fails, always.

Skipped cells are neither passed nor failed: they are left out of the rate and counted in the
message, so a suite that skips everything cannot pass a gate on nothing. Nor can it pass without
one: every cell longer than the model's window (``--lengths 128k`` on an 8k model) used to skip
into a green run. A rate that names a suite with no cells in the run (``longqa=0.9`` in a recall
run) is a gate asked for and never applied: it is said, and fails the run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from ..results.cells import CellResult, Judgement
from ..run.suite import suites_of
from ..settings import NamedFractions, convert, lookup, named_fractions

GATE = "pass_rate"
JUDGED_SOMETHING = "judged_cells"
REASONS_SHOWN = 2
MIN_PASS_RATE = pytest.StashKey[NamedFractions]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-min-pass-rate", dest="lceval_min_pass_rate", action="append",
                    default=None, metavar="RATE|SUITE=RATE",
                    help="suite-level gate: the run fails unless at least this fraction of a "
                         "suite's judged cells passed (0.9, or recall=0.9 for one suite)")
    parser.addini("lceval_min_pass_rate", "suite pass-rate gates, one per line", "linelist")


def pytest_configure(config: pytest.Config) -> None:
    raw, where = lookup(config, "lceval_min_pass_rate")
    config.stash[MIN_PASS_RATE] = convert(
        raw if isinstance(raw, list) else [], where, "--lceval-min-pass-rate", named_fractions,
        "Write --lceval-min-pass-rate 0.9 or --lceval-min-pass-rate recall=0.9.")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Suite names are known once every plugin is configured: check them before any cell."""
    per_suite = session.config.stash[MIN_PASS_RATE].per_name
    known = suites_of(session.config)
    unknown = sorted(set(per_suite) - set(known))
    if unknown:
        raise pytest.UsageError(
            f"pytest-lceval: --lceval-min-pass-rate names unknown suite(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    rates = config.stash[MIN_PASS_RATE]
    if rates.default is None and not rates.per_name:
        return []
    given = [f"{rates.default:g}"] if rates.default is not None else []
    given += [f"{suite}={rate:g}" for suite, rate in sorted(rates.per_name.items())]
    replaced = f"; given twice, the last wins: {', '.join(rates.replaced)}" \
        if rates.replaced else ""
    return [f"lceval: suite gate --lceval-min-pass-rate {', '.join(given)}{replaced}"]


@pytest.hookimpl
def pytest_lceval_suite_verdict(config: pytest.Config, suite: str,
                                results: list[CellResult]) -> list[Judgement] | None:
    rates = config.stash[MIN_PASS_RATE]
    minimum = rates.per_name.get(suite, rates.default)
    if not results:  # the suite had no cells in this run
        return [_not_applied(suite, rates.per_name[suite])] if suite in rates.per_name else None
    judged = [r for r in results if r.outcome in ("passed", "failed")]
    nothing = [] if judged else [_judged_nothing(suite, results)]
    if minimum is None:
        return nothing
    skipped = len(results) - len(judged)
    passed = sum(r.outcome == "passed" for r in judged)
    rate = passed / len(judged) if judged else 0.0
    ok = bool(judged) and rate >= minimum
    message = (f"{suite}: {passed} of {len(judged)} judged cells passed ({100 * rate:.1f}%) "
               f"{'>=' if ok else '<'} --lceval-min-pass-rate {100 * minimum:g}%"
               + (f"; {skipped} skipped cells left out" if skipped else ""))
    return [*nothing, Judgement(GATE, ok, message, {
        "pass_rate": round(rate, 6), "min_pass_rate": minimum, "judged": len(judged),
        "skipped": skipped}, rule=_rule(minimum))]


def _rule(minimum: float) -> str:
    return f"at least {100 * minimum:g}% of the judged cells pass (--lceval-min-pass-rate)"


def _not_applied(suite: str, minimum: float) -> Judgement:
    """--lceval-min-pass-rate SUITE=RATE for a suite with no cells in the run: the gate asked
    for cannot be applied, and a release gate that was never applied must not pass."""
    return Judgement(GATE, False, (
        f"{suite}: not applied: --lceval-min-pass-rate {suite}={minimum:g} names it, but no "
        f"cell of {suite} was selected in this run; select its cells (e.g. -m {suite}) or drop "
        f"the gate"), {"min_pass_rate": minimum, "judged": 0}, rule=_rule(minimum),
        applied=False)


def _judged_nothing(suite: str, results: list[CellResult]) -> Judgement:
    """The failed gate of a suite whose cells all skipped, with their reasons (most common
    first)."""
    reasons = Counter(r.reason for r in results)
    said = "; ".join(f"{count} x {reason}" if count > 1 else reason
                     for reason, count in reasons.most_common(REASONS_SHOWN))
    more = f"; and {len(reasons) - REASONS_SHOWN} more reasons" \
        if len(reasons) > REASONS_SHOWN else ""
    return Judgement(JUDGED_SOMETHING, False, (
        f"{suite}: none of its {len(results)} selected cells was judged, so the suite "
        f"cannot pass: {said}{more}"), {"judged": 0, "skipped": len(results)},
        rule="at least one of the suite's cells is judged (always on)")
