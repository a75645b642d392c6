"""The judge's side of a run, per judged task: what it scored, what it could not read, how far
a second judge or the rule metric agrees, and its share of the time. The summary's markdown,
JSON and HTML all show these rows, so an unreadable reply is never out of sight."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..results.cells import CellResult

KAPPA_PREFIX = "judge_kappa_"


@dataclass(frozen=True)
class JudgeRow:
    """One judged task over its cells."""

    suite: str
    task: str
    judge: str
    cells: int
    scored: int
    """Cases with a judged score."""
    unparsed: int
    """Cases whose replies stayed unreadable after the retry."""
    retried: int
    rule_metric: str
    rule: float
    """Mean of the rule metric over the cells (NaN when none recorded it)."""
    rule_spearman: float
    """Mean over cells of Spearman's rho between judge and rule scores (NaN when undefined)."""
    judge2_diff: float
    """Mean over cells of the second judge's score minus the judge's (NaN without one)."""
    kappas: tuple[tuple[str, float], ...]
    """Mean kappa per rubric scale, over the cells where it is defined."""
    judge_share: float
    """Seconds judging over the cells' build + model + scoring seconds."""


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _numbers(cells: list[CellResult], name: str) -> list[float]:
    return [float(c.metrics[name]) for c in cells if c.metrics.get(name) is not None]


def judge_rows(results: list[CellResult]) -> list[JudgeRow]:
    judged = [r for r in results if r.judge]
    rows = []
    for suite, task in sorted({(r.suite, r.task) for r in judged}):
        cells = [r for r in judged if (r.suite, r.task) == (suite, task)]
        rule_metric = next((str(c.metrics["judge_rule_metric"]) for c in cells
                            if c.metrics.get("judge_rule_metric")), "")
        scales = sorted({name.removeprefix(KAPPA_PREFIX) for c in cells for name in c.metrics
                         if name.startswith(KAPPA_PREFIX)})
        spent = sum(c.seconds_build + c.seconds_model + c.seconds_score for c in cells)
        rows.append(JudgeRow(
            suite, task, ", ".join(sorted({c.judge for c in cells})), len(cells),
            sum(c.n for c in cells), int(sum(_numbers(cells, "judge_unparsed"))),
            int(sum(_numbers(cells, "judge_retried"))), rule_metric,
            _mean(_numbers(cells, rule_metric)) if rule_metric else math.nan,
            _mean(_numbers(cells, "judge_rule_spearman")),
            _mean(_numbers(cells, "judge_score_diff")),
            tuple((scale, _mean(_numbers(cells, KAPPA_PREFIX + scale))) for scale in scales),
            sum(_numbers(cells, "seconds_judge") + _numbers(cells, "seconds_judge2"))
            / spent if spent else math.nan))
    return rows


def judge_table(rows: list[JudgeRow]) -> tuple[list[str], list[list[str]]]:
    """Header and rows as text, for the markdown and HTML tables."""
    header = ["task", "judge", "scored", "unparsed", "retried", "rule metric",
              "ρ judge~rule", "judge2 − judge", "κ", "judge time"]
    body = []
    for row in rows:
        kappas = ", ".join(f"{scale} {_fmt(value)}" for scale, value in row.kappas) or "–"
        body.append([f"{row.suite} · {row.task}", row.judge, str(row.scored),
                     str(row.unparsed), str(row.retried),
                     f"{row.rule_metric} {_fmt(row.rule)}" if row.rule_metric else "–",
                     _fmt(row.rule_spearman), _fmt(row.judge2_diff, signed=True), kappas,
                     "–" if math.isnan(row.judge_share) else f"{100 * row.judge_share:.0f} %"])
    return header, body


def _fmt(value: float, signed: bool = False) -> str:
    if math.isnan(value):
        return "–"
    return f"{value:+.3f}" if signed else f"{value:.3f}"
