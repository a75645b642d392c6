"""Cold run vs warm rerun of the same recall cells with the smollm2 preset (targets: warm answers
at least 100x faster than cold ones, and the whole warm run at least 20x faster than the cold one).

Usage: ``python bench/bench_store_reuse.py [--lengths 1k] [--samples 3] [--model smollm2]``
or ``python bench/bench_store_reuse.py --main-job`` (the README's main job, ``pytest suites/``
with its defaults: every suite, about 7 minutes cold on 2 cores).

Both runs are real pytest processes (``suites/test_recall.py`` on a few cells, or with
``--main-job`` the whole ``suites/`` folder as the README runs it) sharing one fresh store: the cold
run computes every answer, the warm run finds every answer stored. Two ratios are printed:
*answer time* (seconds in the model's store-and-backend calls over the run, store lookups
included, from the run's ``model-usage`` counts: what the store saves) and *whole run* (the
processes' wall time, which also pays for Python, pytest, the plugins and the tokenizer: a warm
run never loads the weights, so this is what a rerun of a finished run costs). A third process,
the same command with ``--collect-only``, gives the start-up that every run pays before its first
cell: the floor under the warm run's time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_lceval.run.model_usage import read_usage

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "suites" / "test_recall.py"
SUITES = ROOT / "suites"
TARGET = 100.0
"""Answer time, cold / warm."""
WHOLE_RUN_TARGET = 20.0
"""Whole run (process wall time), cold / warm."""


def run(name: str, folder: Path, options: argparse.Namespace,
        *extra: str) -> tuple[float, list[dict]]:
    """One pytest process; (wall seconds, its results rows: none for --collect-only)."""
    cells = [] if options.main_job else [
        "--lceval-threshold", "0", "--lceval-tasks", options.tasks, "--lengths", options.lengths,
        "--depths", options.depths, "--samples", str(options.samples)]
    command = [sys.executable, "-m", "pytest", str(SUITES if options.main_job else SUITE), "-q",
               "-p", "no:randomly", "-p", "no:cacheprovider", "--model", options.model,
               "--lceval-store", str(folder / "store.sqlite"), "--lceval-out", str(folder),
               "--lceval-run", name, *cells, *extra]
    # Idle OpenMP threads sleep instead of spinning: on a shared CPU spinning makes torch up to
    # 10x slower, which would flatter the ratio.
    env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    # The main job's weak model fails some cells (exit 1): a verdict, not a broken run.
    if done.returncode not in ((0, 1) if options.main_job else (0,)):
        sys.exit(f"{name} run failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr}")
    results = folder / name / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().split("\n")
            if line.strip()] if results.exists() else []
    return wall, rows


def answer_seconds(folder: Path, name: str) -> float:
    """Seconds the run spent answering (store lookups and backend calls), over its processes."""
    return read_usage(folder / name)["model"].seconds


def total(rows: list[dict], *fields: str) -> float:
    return sum(row[field] for row in rows for field in fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tasks", default="niah_single_1,json_kv")
    parser.add_argument("--lengths", default="1k")
    parser.add_argument("--depths", default="0,50,100")
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--main-job", action="store_true",
                        help="time the README's main job (pytest suites/ with its defaults) "
                             "instead of the recall cells above")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lceval-bench-") as scratch:
        folder = Path(scratch)
        cold_wall, cold = run("cold", folder, options)
        warm_wall, warm = run("warm", folder, options)
        startup_wall, _ = run("startup", folder, options, "--collect-only")
        cold_answer, warm_answer = answer_seconds(folder, "cold"), answer_seconds(folder, "warm")
    cases = int(total(cold, "n"))
    reached = int(total(warm, "model_requests"))
    what = "main-job" if options.main_job else "recall"
    print(f"store reuse: {len(cold)} {what} cells, {cases} cases, model {options.model}; "
          f"the warm run sent {reached} requests to the model (expected 0)")
    print(f"{'':14}{'cold':>12}{'warm':>12}{'ratio':>10}")
    for label, cold_s, warm_s in (
            ("answer time", cold_answer, warm_answer),
            ("whole run", cold_wall, warm_wall)):
        print(f"{label:14}{cold_s:>11.3f}s{warm_s:>11.3f}s{cold_s / max(warm_s, 1e-9):>9.0f}x")
    print(f"start-up (--collect-only: Python, pytest, plugins, collection) {startup_wall:.3f}s; "
          f"the warm run's rest (tokenizer, cells, reports) {warm_wall - startup_wall:.3f}s")
    for label, ratio, target in (
            ("answer-time", cold_answer / max(warm_answer, 1e-9), TARGET),
            ("whole-run", cold_wall / warm_wall, WHOLE_RUN_TARGET)):
        verdict = "meets" if ratio >= target and reached == 0 else "MISSES"
        print(f"{label} ratio {ratio:.1f}x {verdict} the target of {target:.0f}x")


if __name__ == "__main__":
    main()
