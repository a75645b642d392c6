"""The run's verdict in brief: ``summary.md`` (short enough for a PR comment) and ``summary.json``.

One data model (:class:`RunSummary`) is built from the results and rendered three ways: the
markdown here, the badges (``badge.py``) and the HTML report's tables (``html.py``), so the
numbers can never disagree between them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..foundation.grid import format_length, parse_length
from ..models.model_args import args_text
from ..results import strict_json
from ..results.cells import CellResult, Judgement
from ..results.sample_log import SAMPLES_DIR, logged
from ..results.score_metric import range_text
from ..results.whole_file import write_whole
from ..verdicts.baseline.pooled import regressions
from ..verdicts.effective.length import EffectiveRow
from ..verdicts.effective.rows import effective_rows
from ..verdicts.verdict import INCOMPLETE, GateResult, RunVerdict, decide
from .finding import BASELINE, FAILING_STATUSES, OwnFinding, cell_label
from .findings import worst_cells
from .judged import JudgeRow, judge_rows, judge_table
from .section import SummarySection

SUMMARY_MD = "summary.md"
SUMMARY_JSON = "summary.json"
WORST_SHOWN = 5
"""Rows of the worst-cells table: a PR comment should be read, not scrolled."""
DELTAS_SHOWN = 8
"""Rows of the comparison table in summary.md beyond the failing ones."""
FAILING_SHOWN = 20
"""Failing comparison rows listed in summary.md and on the terminal before 'and N more'."""
REASON_CHARS = 140
COMPARISON_STATUSES = ("regressed", "unpaired", "other-judge", "small-drop", "improved",
                       "inconclusive", "unchanged", "not-compared")
"""In the order a reviewer acts on them: the comparison's failures first (a significant drop,
cells that could not be paired), then what moved significantly, then what moved without
evidence; cells whose every case scored the same, and cells not compared, are only counted."""
COUNTED_ONLY = frozenset({"unchanged", "not-compared"})


@dataclass(frozen=True)
class Tally:
    """Cell outcomes of a suite (or of the whole run)."""

    name: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def judged(self) -> int:
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float:
        """Share of judged (not skipped) cells that passed; NaN when none was judged."""
        return self.passed / self.judged if self.judged else math.nan


@dataclass(frozen=True)
class CellRow:
    """One cell as the summary tables show it."""

    nodeid: str
    suite: str
    label: str
    """The test's parameter id, e.g. 'json_kv-8k-50'."""
    score: float
    ci_low: float
    ci_high: float
    n: int
    outcome: str
    reason: str
    failed: tuple[str, ...] = ()
    """Criteria that failed the cell (their messages are in ``reason``)."""
    metric: str = ""
    """What the score is, with its range: 'ndcg@10 (0–1)'."""
    why: str = ""
    """Why it ranks where it does, by the verdict that decides it (``findings.judge_cell``):
    'FAIL, LongScore -100.0%, score 0.0%', 'regressed against base: ...'."""

    @property
    def verdict(self) -> str:
        """Short enough for a table cell: the failed criteria, or the outcome."""
        if self.outcome != "failed":
            return self.outcome
        return "FAIL: " + (", ".join(self.failed) if self.failed else self.reason)


@dataclass(frozen=True)
class LengthRow:
    """A suite's score at one length, as HELMET reports a category: the mean over tasks of
    each task's mean over its cases (depths pooled), so a task with a depth axis weighs as
    much as one without. Every length of a suite averages the same tasks (those measured at
    all its lengths), so the row-to-row change is the model's and not the task mix's."""

    suite: str
    length: int
    score: float
    tasks: int
    n: int
    """Cases scored at this length, over those tasks."""
    seconds_per_case: float
    """Model seconds per case (near 0 for answers already in the store)."""
    left_out: tuple[str, ...] = ()
    """Tasks of the suite measured at some of its lengths but not at all, not averaged."""
    metrics: str = ""
    """The metrics the tasks' scores are on, e.g. 'string_match_all, subem (0–1)'."""


def metrics_label(results: list[CellResult]) -> str:
    """The distinct metrics of ``results``, with their range when they share one."""
    names = sorted({r.metric for r in results if r.metric})
    ranges = {range_text(r.metric_range) for r in results if r.metric}
    if not names:
        return ""
    return ", ".join(names) + (f" ({ranges.pop()})" if len(ranges) == 1 else "")


def length_rows(results: list[CellResult]) -> list[LengthRow]:
    scored = [r for r in results if r.length > 0 and r.measured and r.scores]
    rows = []
    for suite in sorted({r.suite for r in scored}):
        cells = [r for r in scored if r.suite == suite]
        lengths = sorted({r.length for r in cells})
        tasks_at = {n: {r.task for r in cells if r.length == n} for n in lengths}
        common = set.intersection(*tasks_at.values())
        left_out = tuple(sorted(set.union(*tasks_at.values()) - common))
        for length in lengths:
            mine = [r for r in cells if r.length == length and r.task in common]
            by_task: dict[str, list[float]] = {}
            for cell in mine:
                by_task.setdefault(cell.task, []).extend(cell.scores)
            if not by_task:
                continue
            n = sum(len(scores) for scores in by_task.values())
            rows.append(LengthRow(
                suite, length, sum(sum(v) / len(v) for v in by_task.values()) / len(by_task),
                len(by_task), n, sum(c.seconds_model for c in mine) / n, left_out,
                metrics_label(mine)))
    return rows


@dataclass(frozen=True)
class DeltaRow:
    """One cell compared with the saved run (the baseline judgement's properties)."""

    nodeid: str
    suite: str
    label: str
    status: str
    baseline: float = math.nan
    current: float = math.nan
    difference: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan
    mde: float = math.nan
    n: int = 0
    metric: str = ""
    outcome: str = ""
    """The cell's outcome in this run."""
    baseline_outcome: str = ""
    """The cell's outcome in the saved run ('' when unknown)."""

    @property
    def failing(self) -> bool:
        return self.status in FAILING_STATUSES


def delta_order(row: DeltaRow) -> tuple[int, float, str]:
    """Reviewer's order (COMPARISON_STATUSES), the largest change first within a status."""
    rank = COMPARISON_STATUSES.index(row.status) if row.status in COMPARISON_STATUSES \
        else len(COMPARISON_STATUSES)
    change = math.inf if math.isnan(row.difference) else \
        (-row.difference if row.status == "improved" else row.difference)
    return rank, change, row.nodeid


@dataclass(frozen=True)
class RunSummary:
    run: str
    model: str
    seed: int | None
    total: Tally
    suites: list[Tally]
    worst: list[CellRow]
    """At most WORST_SHOWN cells, worst first by the verdict that decides each
    (``findings.worst_cells``: regressions, a suite's own FAILs, LongScore's failures, other
    failures, drops); the lowest scores only when no cell failed or dropped."""
    deltas: list[DeltaRow]
    """Every compared cell, in the reviewer's order (``delta_order``)."""
    verdict: RunVerdict
    """The run's one verdict (verdicts/verdict.py): the headline and the gates render it."""
    baseline: str | None = None
    delta_counts: dict[str, int] = field(default_factory=dict)
    lengths: list[LengthRow] = field(default_factory=list)
    judged: list[JudgeRow] = field(default_factory=list)
    """Per judged task: the judge's scored and unreadable cases, agreement and time."""
    samples: str = ""
    """Where every case was logged (--lceval-log-samples); "" when it was not."""
    effective: list[EffectiveRow] = field(default_factory=list)
    """Claimed window vs effective context length, per suite then its tasks."""
    bad_cells: int = 0
    """Cells worth a look (failed, regressed, dropped), listed in ``worst`` or not."""
    sections: list[SummarySection] = field(default_factory=list)
    """What the plugins' own verdicts add (``pytest_lceval_summary_section``)."""

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def gates(self) -> tuple[GateResult, ...]:
        """Suite-level verdicts (pytest_lceval_suite_verdict), suite by suite."""
        return self.verdict.gates

    @property
    def failing_deltas(self) -> list[DeltaRow]:
        """The comparison's failures (regressed first), in the reviewer's order."""
        return [d for d in self.deltas if d.failing]

    def failed_before(self, suite: str | None = None) -> int:
        """Cells that failed in this run and had failed in the saved run too."""
        return sum(d.outcome == d.baseline_outcome == "failed"
                   and (suite is None or d.suite == suite) for d in self.deltas)


def tally(name: str, results: list[CellResult]) -> Tally:
    counts = Counter(r.outcome for r in results)
    return Tally(name, counts["passed"], counts["failed"], counts["skipped"])


def _model_label(result: CellResult) -> str:
    """The model as the summary names it: its spec, and the config overrides it ran with
    (--lceval-model-args), so that a variant's report never reads as the base model's."""
    return f"{result.model} ({args_text(result.model_args)})" if result.model_args \
        else result.model


def summarize(run: str, results: list[CellResult],
              suite_verdicts: dict[str, list[Judgement]] | None = None,
              samples: str = "", effective: list[EffectiveRow] | None = None,
              verdict: RunVerdict | None = None, verdicts: Sequence[OwnFinding] = (),
              sections: Sequence[SummarySection] = ()) -> RunSummary:
    """The run's summary around its ``verdict``; without one (a report drawn from a run folder
    alone), the verdict of its cells and ``suite_verdicts``. ``verdicts``: the plugins'
    readings of their own verdicts (``pytest_lceval_finding``), which rank the worst cells;
    ``sections``: what those verdicts add to the summary."""
    if verdict is None:
        verdict = decide(results, [GateResult(suite, judgement)
                                   for suite, found in sorted((suite_verdicts or {}).items())
                                   for judgement in found])
    suites = sorted({r.suite for r in results})
    worst = worst_cells(results, verdicts)
    bad = [finding for finding in worst if finding.bad]
    deltas = sorted((row for r in results if (row := _delta(r)) is not None), key=delta_order)
    baselines = {j.properties.get("baseline") for r in results for j in r.judgements
                 if j.criterion == BASELINE}
    return RunSummary(
        run=run,
        model=", ".join(sorted({_model_label(r) for r in results})),
        seed=results[0].seed if results else None,
        total=tally("all", results),
        suites=[tally(s, [r for r in results if r.suite == s]) for s in suites],
        worst=[_row(f.result, f.why) for f in (bad or worst)[:WORST_SHOWN]],
        deltas=deltas,
        verdict=verdict,
        baseline=", ".join(sorted(str(b) for b in baselines)) or None,
        delta_counts=dict(Counter(d.status for d in deltas)),
        lengths=length_rows(results),
        judged=judge_rows(results),
        samples=samples,
        effective=effective or [],
        bad_cells=len(bad),
        sections=sorted(sections, key=lambda section: section.key),
    )


def _row(result: CellResult, why: str) -> CellRow:
    return CellRow(result.nodeid, result.suite, cell_label(result.nodeid), result.score,
                   result.ci_low, result.ci_high, result.n, result.outcome, result.reason,
                   tuple(j.criterion for j in result.judgements if not j.passed),
                   result.metric_label, why)


def _delta(result: CellResult) -> DeltaRow | None:
    found = [j.properties for j in result.judgements if j.criterion == BASELINE]
    if not found:
        return None
    p = found[0]

    def get(key: str) -> float:
        value = p.get(key)
        return math.nan if value is None else float(value)

    return DeltaRow(
        result.nodeid, result.suite, cell_label(result.nodeid),
        status=str(p.get("baseline_status", "not-compared")),
        baseline=get("baseline_score"), current=get("baseline_score") + get("baseline_diff"),
        difference=get("baseline_diff"), ci_low=get("baseline_ci_low"),
        ci_high=get("baseline_ci_high"), p_value=get("baseline_p"), mde=get("baseline_mde"),
        n=int(p.get("baseline_n", 0)), metric=result.metric_label, outcome=result.outcome,
        baseline_outcome=str(p.get("baseline_outcome", "")),
    )


# -- rendering ------------------------------------------------------------------------------


def percent(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.0f}%"


def number(value: float, signed: bool = False) -> str:
    if math.isnan(value):
        return "–"
    if math.isinf(value):
        return "∞"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def pvalue(value: float) -> str:
    if math.isnan(value):
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def detectable(row: DeltaRow) -> str:
    """The minimum detectable drop; 'none at N=3' where the exact test can reject nothing."""
    return f"none at N={row.n}" if math.isinf(row.mde) else number(row.mde)


def interval(row: DeltaRow) -> str:
    return f"{number(row.ci_low, True)} to {number(row.ci_high, True)}"


def comparison_headline(summary: RunSummary, suite: str | None = None,
                        code: bool = True) -> str:
    """'2 regressed against `base` (recall: niah_single_1, vt)': what the comparison's gates
    found regressed (a suite's tasks, or the suite as a whole), whatever the cells' own rows
    say, and how many cells could not be paired; '' without a baseline. ``code`` quotes the
    name as markdown code."""
    if not summary.baseline:
        return ""
    found = gate_regressions(summary, suite)
    unpaired = sum(d.failing and d.status != "regressed" for d in summary.deltas
                   if suite is None or d.suite == suite)
    name = f"`{summary.baseline}`" if code else summary.baseline
    named = "; ".join(f"{where}: {', '.join(tasks)}" if tasks else where
                      for where, tasks in sorted(found.items()))
    text = f"{regressed_count(found)} regressed against {name}" + \
        (f" ({named})" if named else "")
    return text + (f" ({unpaired} could not be compared)" if unpaired else "")


def gate_regressions(summary: RunSummary,
                     suite: str | None = None) -> dict[str, tuple[str, ...]]:
    """What the comparison's gates found regressed (``pooled.regressions``), in ``suite`` or
    in every suite."""
    return {name: tasks for name, tasks in regressions(summary.gates).items()
            if suite is None or name == suite}


def regressed_count(found: Mapping[str, tuple[str, ...]]) -> int:
    """The suites and tasks ``gate_regressions`` found: a suite counts as its tasks, or as
    one when it regressed as a whole."""
    return sum(len(tasks) or 1 for tasks in found.values())


def headline(summary: RunSummary, marks: bool = True, code: bool = True) -> str:
    """One line verdict, led by the comparison when there is one; ``marks`` adds the emoji
    that GitHub shows (browsers without an emoji font show boxes, so the HTML report leaves
    them out)."""
    total = summary.total
    reasons = summary.verdict.reasons()
    before = summary.failed_before()
    if before and summary.verdict.failed:
        reasons = [f"{reason} ({before} also failed in the baseline)"
                   if reason.endswith("cells failed") else reason for reason in reasons]
    verdict = "; ".join(reasons) or "passed"
    compared = comparison_headline(summary, code=code)
    if compared:
        verdict = f"{compared}; {verdict}"
    if marks:
        verdict = ("✅ " if summary.ok else "⚠️ " if summary.verdict.outcome == INCOMPLETE
                   else "❌ ") + verdict
    return (f"pytest-lceval {verdict}: pass rate {percent(total.pass_rate)} "
            f"({total.passed}/{total.judged}), {total.skipped} skipped")


def effective_legend(summary: RunSummary) -> str:
    threshold = summary.effective[0].threshold
    return (f"the longest length at which the score, and the score at every shorter "
            f"length, is at least {threshold:.3f}; a task's score at a length pools its depths, "
            f"a suite's is the mean over its tasks; ≥ when every length measured holds, < when "
            f"the shortest misses")


def effective_table(rows: list[EffectiveRow]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the claimed-window table, for markdown and HTML alike."""
    header = ["suite", "task", "claimed window", "effective length", "score by length",
              "baseline"]
    body = []
    for row in rows:
        moved = f"{row.baseline} → {row.effective} ({row.change})" if row.change else ""
        body.append([row.suite, row.task or "(all tasks)",
                     format_length(row.window) if row.window else "–", row.effective,
                     " · ".join(f"{n} {s:.2f}" for n, s in
                                sorted(row.scores.items(), key=lambda item: parse_length(item[0]))),
                     moved])
    return header, body


def delta_counts(counts: Mapping[str, int]) -> str:
    """'3 regressed, 45 inconclusive, 108 unchanged' in the reviewer's order."""
    return ", ".join(f"{counts[s]} {s}" for s in COMPARISON_STATUSES if counts.get(s))


def shown_deltas(deltas: list[DeltaRow], limit: int = DELTAS_SHOWN) -> list[DeltaRow]:
    """The rows a short report lists: every failing one (up to FAILING_SHOWN), then the next
    ones in the reviewer's order up to ``limit`` rows, never an unchanged or uncompared cell."""
    listed = [d for d in deltas if d.status not in COUNTED_ONLY]
    failing = [d for d in listed if d.failing][:FAILING_SHOWN]
    rest = [d for d in listed if not d.failing][:max(0, limit - len(failing))]
    return failing + rest


def _md_cell(text: str) -> str:
    """Keep a value inside its markdown table cell (and out of GitHub's HTML rendering)."""
    text = " ".join(text.split())
    if len(text) > REASON_CHARS:
        text = text[: REASON_CHARS - 1] + "…"
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def to_markdown(summary: RunSummary) -> str:
    lines = [f"### {headline(summary)}", "",
             f"Model `{summary.model}` · seed {summary.seed} · run `{summary.run}`", ""]
    if summary.deltas:
        lines += _comparison_markdown(summary) + [""]
    lines += ["| suite | passed | failed | skipped | pass rate |", "|---|--:|--:|--:|--:|"]
    for t in summary.suites:
        lines.append(f"| {t.name} | {t.passed} | {t.failed} | {t.skipped} | "
                     f"{percent(t.pass_rate)} |")
    if summary.lengths:
        lines += ["", "**Scores by length** (per suite, the mean over the same tasks at every "
                      "length of each task's cases, depths pooled; N cases)", "",
                  "| suite | length | score | metric | tasks | N | model s/case |",
                  "|---|--:|--:|---|--:|--:|--:|"]
        for length in summary.lengths:
            lines.append(f"| {length.suite} | {format_length(length.length)} | "
                         f"{number(length.score)} | {_md_cell(length.metrics)} | "
                         f"{length.tasks} | {length.n} | {length.seconds_per_case:.2f} |")
        for suite, left_out in sorted({(r.suite, r.left_out) for r in summary.lengths
                                       if r.left_out}):
            lines.append(f"\n{suite}: not averaged, as not measured at every length: "
                         f"{_md_cell(', '.join(left_out))}.")
    if summary.effective:
        header, rows = effective_table(summary.effective)
        lines += ["", f"**Claimed window vs effective length** ({effective_legend(summary)})",
                  "", "| " + " | ".join(header) + " |", "|---|---|--:|--:|---|---|"]
        lines += ["| " + " | ".join(_md_cell(text) for text in row) + " |" for row in rows]
    if summary.judged:
        header, rows = judge_table(summary.judged)
        lines += ["", "**Judged tasks** (cases a judge's replies left unreadable are counted, "
                      "never dropped silently)", "", "| " + " | ".join(header) + " |",
                  "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(_md_cell(text) for text in row) + " |" for row in rows]
    if summary.gates:
        lines += ["", "**Suite gates**", "", "| gate | suite | rule | verdict |",
                  "|---|---|---|---|"]
        for gate in summary.gates:
            mark = ("✅" if gate.passed else "❌") + \
                ("" if gate.judgement.applied else " not applied:")
            lines.append(f"| {gate.name} | {gate.suite} | {_md_cell(gate.rule)} | {mark} "
                         f"{_md_cell(gate.judgement.message)} |")
    for section in summary.sections:
        lines += ["", f"**{section.title}**", "", *section.lines]
    if summary.worst:
        lines += ["", "**Worst cells** (ranked by the verdict that decides each: regressions, a "
                      "suite's own FAILs, relative criteria's failures, other failures, drops; the "
                      "lowest scores when none)", "",
                  "| cell | score (95% CI) | metric | N | verdict | why |",
                  "|---|--:|---|--:|---|---|"]
        for row in summary.worst:
            lines.append(f"| {row.suite} · `{_md_cell(row.label)}` | {number(row.score)} "
                         f"({number(row.ci_low)}–{number(row.ci_high)}) | "
                         f"{_md_cell(row.metric)} | {row.n} | {_md_cell(row.verdict)} | "
                         f"{_md_cell(row.why)} |")
        more = summary.bad_cells - WORST_SHOWN
        if more > 0:
            lines.append(f"\n{more} more failed or dropped cells: every cell, with its outcome "
                         f"and reason, is in {SUMMARY_JSON} (`cells`) and the HTML report.")
    if summary.samples:
        lines += ["", summary.samples]
    return "\n".join(lines) + "\n"


def _comparison_markdown(summary: RunSummary) -> list[str]:
    """Regressions first, then improvements, then inconclusive changes; unchanged cells are
    only counted."""
    shown = shown_deltas(summary.deltas)
    lines = [f"**{comparison_headline(summary)}.** Cells: {delta_counts(summary.delta_counts)}"]
    header = ["", "| cell | metric | baseline | now | Δ (95% CI) | p | detectable drop | "
                  "status |", "|---|---|--:|--:|--:|--:|--:|---|"]
    if shown:
        lines += header + [_delta_line(d) for d in shown]
    folded = summary.failing_deltas[FAILING_SHOWN:]
    if folded:  # the terminal's "and N more in summary.md" points here
        lines += ["", f"<details><summary>{len(folded)} more failing cells</summary>", *header,
                  *(_delta_line(d) for d in folded), "", "</details>"]
    hidden = Counter(d.status for d in summary.deltas if d not in shown and not d.failing)
    if hidden:
        lines.append(f"\nNot listed: {delta_counts(hidden)} (every cell in {SUMMARY_JSON} and "
                     f"the HTML report).")
    return lines


def _delta_line(d: DeltaRow) -> str:
    return (f"| {d.suite} · `{_md_cell(d.label)}` | {_md_cell(d.metric)} | "
            f"{number(d.baseline)} | {number(d.current)} | {number(d.difference, True)} "
            f"({interval(d)}) | {pvalue(d.p_value)} | {detectable(d)} | {d.status} |")


def to_json(summary: RunSummary, results: list[CellResult]) -> dict[str, Any]:
    """The summary plus one compact row per cell: for dashboards and scripts."""
    cells = [
        {"nodeid": r.nodeid, "suite": r.suite, "task": r.task, "length": r.length,
         "depth": r.depth, "extra": r.extra, "score": r.score, "metric": r.metric,
         "metric_range": r.metric_range, "metric_about": r.metric_about, "ci_low": r.ci_low,
         "ci_high": r.ci_high, "n": r.n, "outcome": r.outcome, "reason": r.reason,
         "metrics": r.metrics}
        for r in results
    ]
    data = asdict(summary)
    verdict = summary.verdict
    data["verdict"] = {"selected": verdict.selected, "not_run": verdict.not_run,
                       "stopped": verdict.stopped, "lost": list(verdict.lost)}
    data["gates"] = [{"suite": gate.suite, "status": gate.status, **asdict(gate.judgement)}
                     for gate in summary.gates]
    data["ok"] = summary.ok
    data["outcome"] = verdict.outcome
    data["reasons"] = verdict.reasons()
    data["headline"] = headline(summary)
    data["cells"] = cells
    return data


def samples_note(run_dir: Path) -> str:
    """Where the run's cases were logged (--lceval-log-samples), or "" when they were not."""
    files, size = logged(run_dir)
    if not files:
        return ""
    return (f"Every case (prompt as sent, whole output, gold, score, request key) is in "
            f"`{run_dir / SAMPLES_DIR}`: {files} gzipped JSONL "
            f"{'file' if files == 1 else 'files'}, one per cell, {size / 1e6:.1f} MB; each "
            f"results line names its cell's file (`samples_file`).")


def write_summary(run_dir: Path, results: list[CellResult],
                  suite_verdicts: dict[str, list[Judgement]] | None = None,
                  effective: list[EffectiveRow] | None = None,
                  verdict: RunVerdict | None = None, verdicts: Sequence[OwnFinding] = (),
                  sections: Sequence[SummarySection] = ()) -> RunSummary:
    summary = summarize(run_dir.name, results, suite_verdicts, samples_note(run_dir), effective,
                        verdict, verdicts, sections)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_whole(run_dir / SUMMARY_MD, to_markdown(summary))
    write_whole(run_dir / SUMMARY_JSON, strict_json.dumps(to_json(summary, results), indent=1,
                                                          sort_keys=True, default=str))
    return summary


def terminal_lines(summary: RunSummary) -> list[str]:
    """The verdict for the end of the terminal output: each failing comparison (regressions
    first), then the headline, so a CI log ends on the run's verdict."""
    lines = []
    failing = summary.failing_deltas
    for d in failing[:FAILING_SHOWN]:
        lines.append(f"lceval:   {d.status} {d.suite} · {d.label}: {number(d.baseline)} -> "
                     f"{number(d.current)}, Δ {number(d.difference, True)} (95% CI "
                     f"{interval(d)}), p {pvalue(d.p_value)}, N {d.n}")
    if len(failing) > FAILING_SHOWN:
        lines.append(f"lceval:   and {len(failing) - FAILING_SHOWN} more in {SUMMARY_MD}")
    return [*lines, f"lceval: {headline(summary, marks=False, code=False)}"]


RUN_SUMMARY = pytest.StashKey[RunSummary]()
"""This run's summary (controller only, set at session finish) for the terminal's last lines."""


@pytest.hookimpl
def pytest_lceval_verdict_reports(config: pytest.Config, run_dir: Path,
                                  results: list[CellResult],
                                  suite_verdicts: dict[str, list[Judgement]],
                                  verdict: RunVerdict) -> None:
    config.stash[RUN_SUMMARY] = write_summary(
        run_dir, results, suite_verdicts, effective_rows(config, results), verdict,
        [lambda r: config.hook.pytest_lceval_finding(result=r)],
        config.hook.pytest_lceval_summary_section(config=config, results=results))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """After pytest's own short summary: the last lines a CI log shows."""
    summary = config.stash.get(RUN_SUMMARY, None)
    if summary is not None:
        for line in terminal_lines(summary):
            terminalreporter.write_line(line)
