"""Session-end outputs of Task Haystack, written into the run folder:

- ``haystack-resamples.csv`` / ``.json``: one row per (test, resample) with both accuracies, so
  anyone can pair them by resample id and recompute every verdict;
- ``haystack-summary.json`` / ``.md``: pass rate, S-acc and L-acc per length setting (the
  paper's Table 2 layout), and pass rates on ICL-effective vs ICL-ineffective tasks when both
  1-shot and 4-shot were run (its Table 4);
- ``haystack-niah-<setting>.png`` and ``haystack-diagnostic-<setting>-<length>.png``.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...report.finding import cell_label, fixed
from ...report.section import LISTED, SummarySection
from ...results import strict_json
from ...results.cells import CellResult
from .figures import draw_diagnostic, draw_niah
from .metrics import HaystackMetrics, Measured, measured
from .verdict import EXCEL, FAIL, PASS, paired_verdict

PREFIX = "haystack"
RESAMPLE_FIELDS = ("setting", "length_setting", "n_task", "n_shot", "task", "permutation",
                   "stream_index", "depth", "resample", "s_acc", "l_acc", "test_size",
                   "prompt_tokens_mean", "verdict", "t", "p", "nodeid")


@dataclass
class Written:
    paths: list[Path] = field(default_factory=list)
    summary_lines: list[str] = field(default_factory=list)


def resample_rows(results: Iterable[CellResult]) -> list[dict[str, Any]]:
    rows = []
    for result, m in measured(results):
        for resample, l_acc in sorted(m.l_acc_by_resample.items()):
            rows.append({
                "setting": m.setting, "length_setting": m.length_setting,
                "n_task": m.n_task, "n_shot": m.n_shot, "task": result.task,
                "permutation": m.permutation, "stream_index": m.stream_index,
                "depth": result.depth, "resample": int(resample),
                "s_acc": m.s_acc_by_resample[resample], "l_acc": l_acc,
                "test_size": m.test_size,
                "prompt_tokens_mean": round(result.input_tokens_mean, 1),
                "verdict": m.verdict, "t": m.t, "p": m.p, "nodeid": result.nodeid,
            })
    return rows


def _group(cells: Iterable[Measured]) -> dict[tuple[str, str], list[Measured]]:
    groups: dict[tuple[str, str], list[Measured]] = defaultdict(list)
    for cell in cells:
        groups[(cell.metrics.setting, cell.metrics.length_setting)].append(cell)
    return groups


def summarize(cells: list[Measured]) -> dict[str, Any]:
    """Pass rate over (task, permutation) pairs, S-acc over tasks, L-acc over tasks x
    permutations, each task's accuracy the mean over its resamples."""
    verdicts = [m.verdict for _, m in cells]
    single_by_task = {r.task: m.s_acc for r, m in cells}
    return {
        "tests": len(cells), "tasks": len(single_by_task),
        "pass_rate": sum(v != FAIL for v in verdicts) / len(verdicts),
        "fail": verdicts.count(FAIL), "pass": verdicts.count(PASS), "excel": verdicts.count(EXCEL),
        "s_acc": _mean(single_by_task.values()),
        "l_acc": _mean(m.l_acc for _, m in cells),
        "ood_rate": _mean(m.ood_rate for _, m in cells),
        "prompt_tokens_mean": _mean(r.input_tokens_mean for r, _ in cells),
        "prompt_tokens_max": max(r.input_tokens_max for r, _ in cells),
    }


def icl_effective(cells: Iterable[Measured], low: int = 1, high: int = 4) -> dict[str, bool]:
    """Per task: is its Single-task accuracy at ``high`` shots significantly better than at
    ``low`` shots (paired by resample)? Empty unless both were run (paper §5.3)."""
    by_shot: dict[int, dict[str, dict[str, float]]] = defaultdict(dict)
    for result, m in cells:
        by_shot[m.n_shot][result.task] = m.s_acc_by_resample
    effective = {}
    for task in sorted(set(by_shot[low]) & set(by_shot[high])):
        more, fewer = by_shot[high][task], by_shot[low][task]
        shared = set(more) & set(fewer)
        if len(shared) >= 2:
            verdict = paired_verdict({int(r): more[r] for r in shared},
                                     {int(r): fewer[r] for r in shared})
            effective[task] = verdict.verdict == EXCEL
    return effective


def build_summary(results: list[CellResult]) -> dict[str, Any]:
    cells = measured(results)
    effective = icl_effective(cells)
    table = []
    for (setting, length), group in sorted(_group(cells).items(), key=lambda kv: _order(kv[1])):
        row = {"setting": setting, "length_setting": length, **summarize(group)}
        if effective:
            for name, flag in (("icl_effective", True), ("icl_ineffective", False)):
                part = [c for c in group if effective.get(c.result.task) is flag]
                row[name] = {"tasks": len({c.result.task for c in part}),
                             "pass_rate": summarize(part)["pass_rate"] if part else None}
        table.append(row)
    first = results[0]
    pack = cells[0].metrics if cells else None  # the session's; refused cells lack it
    return {
        "model": first.model, "fingerprint": first.fingerprint, "source": first.source,
        "offline_pack": pack is not None and pack.offline_pack,
        "reduced_defaults": pack.reduced_defaults if pack else "",
        "skipped": sum(r.outcome == "skipped" for r in results),
        "refused": sum(r.outcome == "failed" and HaystackMetrics.of(r) is None
                       for r in results),
        "rows": table, "icl_effective": effective, "tests": test_rows(cells),
    }


def test_rows(cells: list[Measured]) -> list[dict[str, Any]]:
    """One row per test (task x permutation, per setting and length), in the order of the
    Table-2 rows, then task and permutation: what each verdict rests on."""
    ordered = sorted(cells, key=lambda c: (*_order([c]), c.result.task, c.metrics.permutation))
    return [{"test": cell_label(r.nodeid), "setting": m.setting,
             "length_setting": m.length_setting, "task": r.task, "permutation": m.permutation,
             "stream_index": m.stream_index, "s_acc": m.s_acc, "l_acc": m.l_acc, "t": m.t,
             "p": m.p, "verdict": m.verdict} for r, m in ordered]


def _order(cells: list[Measured]) -> tuple[str, int, int]:
    metrics = cells[0].metrics
    return metrics.setting, metrics.n_task, metrics.n_shot


def markdown(summary: dict[str, Any]) -> str:
    lines = [f"# Task Haystack: {summary['model']}", ""]
    if summary["offline_pack"]:
        lines += [f"Offline self-made task pack ({summary['source']}), reduced defaults: "
                  f"{summary['reduced_defaults'] or 'none'}. Not comparable with the paper.", ""]
    lines += ["## Per test", "", "Task x permutation: Single-task (S-acc) and Lifelong (L-acc) "
              "accuracy, each the mean over resamples, and the paired t-test of Lifelong against "
              "Single-task over resamples (FAIL: t < 0, p < 0.05; EXCEL: t > 0, p < 0.05).", "",
              "| setting | length | task | permutation | stream index | S-acc | L-acc | t | p | "
              "verdict |", "|---|---|---|--:|--:|--:|--:|--:|--:|---|"]
    for test in summary["tests"]:
        verdict = f"**{FAIL}**" if test["verdict"] == FAIL else test["verdict"]
        index = "–" if test["stream_index"] is None else test["stream_index"]
        lines.append(f"| {test['setting']} | {test['length_setting']} | {test['task']} | "
                     f"{test['permutation']} | {index} | {100 * test['s_acc']:.1f} | "
                     f"{100 * test['l_acc']:.1f} | {fixed(test['t'], 2)} | "
                     f"{fixed(test['p'], 3)} | {verdict} |")
    lines += ["", "## Per setting and length (the paper's Table 2)", "",
              "| setting | length | tasks | tokens (mean) | S-acc | L-acc | pass | fail / pass / "
              "excel |", "|---|---|---|---|---|---|---|---|"]
    for row in summary["rows"]:
        lines.append(
            f"| {row['setting']} | {row['length_setting']} | {row['tasks']} | "
            f"{row['prompt_tokens_mean']:.0f} | {100 * row['s_acc']:.1f} | "
            f"{100 * row['l_acc']:.1f} | {100 * row['pass_rate']:.1f} | "
            f"{row['fail']} / {row['pass']} / {row['excel']} |")
    if summary["icl_effective"]:
        lines += ["", "ICL-effective tasks (4-shot S-acc significantly above 1-shot): "
                  + (", ".join(t for t, e in summary["icl_effective"].items() if e) or "none"), ""]
        for row in summary["rows"]:
            eff, ineff = row["icl_effective"], row["icl_ineffective"]
            lines.append(f"- {row['setting']} {row['length_setting']}: pass rate "
                         f"{_percent(eff['pass_rate'])} on {eff['tasks']} ICL-effective, "
                         f"{_percent(ineff['pass_rate'])} on {ineff['tasks']} ineffective tasks")
    lines += ["", f"Skipped tests: {summary['skipped']}; refused tasks: {summary['refused']}.",
              "Per-resample accuracies: haystack-resamples.csv (pair by resample id to recompute "
              "every verdict with scipy.stats.ttest_rel)."]
    return "\n".join(lines) + "\n"


def verdict_section(results: list[CellResult]) -> SummarySection | None:
    """summary.md's Task Haystack block: the pass rate per setting and length (Table 2's), and
    every FAIL with the accuracies and the paired t-test that failed it, most negative t first;
    None when no cell reached a verdict."""
    cells = measured(results)
    if not cells:
        return None
    rows = build_summary(results)["rows"]
    fails = sorted((c for c in cells if c.metrics.verdict == FAIL),
                   key=lambda c: (c.metrics.t, c.result.nodeid))
    lines = ["Lifelong ICL against Single-task ICL, paired t-test over resamples (FAIL: "
             "Lifelong significantly worse, p < 0.05); per test: `haystack-summary.md`.", "",
             "| setting | length | tests | pass rate | FAIL | S-acc | L-acc |",
             "|---|---|--:|--:|--:|--:|--:|"]
    lines += [f"| {row['setting']} | {row['length_setting']} | {row['tests']} | "
              f"{100 * row['pass_rate']:.1f}% | {row['fail']} | {100 * row['s_acc']:.1f} | "
              f"{100 * row['l_acc']:.1f} |" for row in rows]
    if fails:
        lines += ["", "FAIL, most negative t first:", "",
                  "| test | S-acc | L-acc | t | p |", "|---|--:|--:|--:|--:|"]
        lines += [f"| `{cell_label(c.result.nodeid)}` | {100 * c.metrics.s_acc:.1f} | "
                  f"{100 * c.metrics.l_acc:.1f} | {fixed(c.metrics.t, 2)} | "
                  f"{fixed(c.metrics.p, 3)} |"
                  for c in fails[:LISTED]]
        if len(fails) > LISTED:
            lines.append(f"\nand {len(fails) - LISTED} more in summary.json "
                         f"(`sections.{PREFIX}`).")
    return SummarySection(PREFIX, "Task Haystack", tuple(lines), {
        "rows": rows,
        "fail": [{"nodeid": c.result.nodeid, "task": c.result.task,
                  "setting": c.metrics.setting, "length_setting": c.metrics.length_setting,
                  "permutation": c.metrics.permutation, "s_acc": c.metrics.s_acc,
                  "l_acc": c.metrics.l_acc, "t": c.metrics.t, "p": c.metrics.p}
                 for c in fails]})


def write_reports(run_dir: Path, results: list[CellResult]) -> Written:

    written = Written()
    rows = resample_rows(results)
    run_dir.mkdir(parents=True, exist_ok=True)
    csv_path = run_dir / f"{PREFIX}-resamples.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=RESAMPLE_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    json_path = run_dir / f"{PREFIX}-resamples.json"
    json_path.write_text(strict_json.dumps(rows, indent=1), encoding="utf-8")
    summary = build_summary(results)
    (run_dir / f"{PREFIX}-summary.json").write_text(strict_json.dumps(summary, indent=1),
                                                   encoding="utf-8")
    (run_dir / f"{PREFIX}-summary.md").write_text(markdown(summary), encoding="utf-8")
    written.paths += [csv_path, json_path, run_dir / f"{PREFIX}-summary.json",
                      run_dir / f"{PREFIX}-summary.md"]
    by_setting: dict[str, list[Measured]] = defaultdict(list)
    for (setting, length), cells in _group(measured(results)).items():
        if cells[0].result.depth is None:
            continue
        by_setting[setting].extend(cells)
        written.paths.append(draw_diagnostic(
            cells, run_dir / f"{PREFIX}-diagnostic-{setting}-{length}.png"))
    for setting, cells in by_setting.items():
        written.paths.append(draw_niah(cells, run_dir / f"{PREFIX}-niah-{setting}.png"))
    for row in summary["rows"]:
        written.summary_lines.append(
            f"haystack {row['setting']} {row['length_setting']}: pass rate "
            f"{100 * row['pass_rate']:.1f}% ({row['fail']} fail, {row['excel']} excel of "
            f"{row['tests']}), S-acc {100 * row['s_acc']:.1f}, L-acc {100 * row['l_acc']:.1f}, "
            f"~{row['prompt_tokens_mean']:.0f} tokens")
    if summary["offline_pack"]:
        written.summary_lines.append(
            "haystack: offline self-made task pack with reduced defaults "
            f"({summary['reduced_defaults'] or 'none'}); pass --lceval-data for the real tasks")
    return written


def _mean(values: Iterable[float]) -> float:
    items = [v for v in values if not math.isnan(v)]
    return sum(items) / len(items) if items else math.nan


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"
