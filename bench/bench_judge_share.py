"""The judge's share of a judged suite's wall time, with a fast judge on loopback (issue #13's
target: judging adds at most 20 % to the suite's wall time).

Usage: ``python bench/bench_judge_share.py [--suites longqa,summ] [--tasks narrativeqa,multi_lexsum]
[--lengths 2k] [--samples 3] [--judge-max-tokens 128] [--no-prefill] [--continuous-batching]
[--model smollm2] [--data DIR]``

A `transformers serve` process on 127.0.0.1 serves the smollm2 preset's folder as the judge
(``openai:FOLDER``; started here, killed at the end). Each suite is one real ``pytest suites/``
process over a fresh store, so the model and the judge both do all their work, timed by the wall
clock. Per suite it prints the wall time, the seconds inside the model (the cells'
``seconds_model``), the seconds inside the judge (the ``seconds_judge`` that the judge panel
records per judged cell), the judge's share of the wall time and what judging added to the rest
(judge / (wall - judge)), which the target bounds. The judge is as slow as the model here (the
same 135M model on the same two cores), so the target, set for a fast judge, is hardest to meet;
its replies are begun at their JSON (``--lceval-judge-prefill``) because it never reaches the
format on its own.

The default keeps to the judged task of each suite (NarrativeQA; Multi-LexSum, the summary task
with the shortest outputs) and a short judge reply, so that it runs in about ten minutes on two
CPU cores: ``--tasks ''`` runs whole suites, ``--samples 1`` or ``--suites longqa`` shrinks it.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.20
"""The most judging may add to a judged suite's wall time."""


def run_suite(suite: str, folder: Path, judge: list[str],
              options: argparse.Namespace) -> tuple[float, list[dict[str, Any]], str]:
    """One pytest process over ``suite``; (wall seconds, its results rows, its last lines)."""
    command = [sys.executable, "-m", "pytest", str(ROOT / "suites" / f"test_{suite}.py"), "-q",
               "-p", "no:randomly", "-p", "no:cacheprovider", "--model", options.model,
               "--lceval-data", str(options.data), "--lceval-store", str(folder / "store.sqlite"),
               "--lceval-out", str(folder), "--lceval-run", suite, "--lceval-threshold", "0",
               "--lengths", options.lengths, "--samples", str(options.samples), *judge,
               *(["--lceval-tasks", options.tasks] if options.tasks else [])]
    # Idle OpenMP threads sleep instead of spinning: the judge server and the model share the
    # CPU, and spinning threads would slow whichever is working.
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    results = folder / suite / "results.jsonl"
    if done.returncode not in (0, 1) or not results.exists():  # 1: a cell failed its threshold
        sys.exit(f"{suite} run failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr}")
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return wall, rows, "\n".join(done.stdout.strip().splitlines()[-1:])


def report(suite: str, wall: float, rows: list[dict[str, Any]]) -> str:
    judged = [row for row in rows if "seconds_judge" in row["metrics"]]
    model = sum(row["seconds_model"] for row in rows)
    judge = sum(row["metrics"]["seconds_judge"] for row in judged)
    requests = sum(row["metrics"]["judge_requests"] for row in judged)
    unparsed = sum(row["metrics"]["judge_unparsed"] for row in judged)
    added = judge / (wall - judge) if wall > judge else float("inf")
    verdict = "met" if added <= TARGET else "missed"
    failed = "".join(f"\n  {row['outcome']}: {row['task']}: {row['reason']}" for row in rows
                     if row["outcome"] != "passed")
    return (f"{suite}: {len(rows)} cells ({len(judged)} judged, {requests} judge requests, "
            f"{unparsed} unparsed)\n"
            f"  wall {wall:.1f} s, model {model:.1f} s, judge {judge:.1f} s\n"
            f"  judge share {judge / wall:.1%} of the wall time; judging added {added:.1%} to "
            f"the other {wall - judge:.1f} s (target <= {TARGET:.0%}): {verdict}{failed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", default="longqa,summ")
    parser.add_argument("--tasks", default="narrativeqa,multi_lexsum",
                        help="--lceval-tasks of every suite run ('' = whole suites)")
    parser.add_argument("--lengths", default="2k")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--judge-max-tokens", type=int, default=128)
    parser.add_argument("--prefill", action=argparse.BooleanOptionalAction, default=True,
                        help="--lceval-judge-prefill: replies begun at their JSON (SmolLM2 "
                             "never reaches the format on its own)")
    parser.add_argument("--continuous-batching", action=argparse.BooleanOptionalAction,
                        default=False, help="the judge server batches concurrent requests "
                                            "(transformers serve --continuous-batching; on "
                                            "2 CPU cores it made the judge 5x slower)")
    parser.add_argument("--data", type=Path, default=Path(
        os.environ.get("LCEVAL_DATA", ROOT.parent / "shared" / "data")))
    options = parser.parse_args()

    sys.path.insert(0, str(ROOT / "tests"))
    from served import Served  # the tests' loopback `transformers serve`

    from pytest_lceval.models.presets import preset_directory

    folder = preset_directory("smollm2")
    with tempfile.TemporaryDirectory(prefix="bench-judge-") as scratch:
        served = Served(folder, Path(scratch), ("--continuous-batching",)
                        if options.continuous_batching else ())
        started = time.perf_counter()
        served.start()
        print(f"judge: transformers serve {folder.name} at {served.url}"
              f"{' with continuous batching' if options.continuous_batching else ''}, up in "
              f"{time.perf_counter() - started:.1f} s; max {options.judge_max_tokens} tokens a "
              f"reply")
        judge = ["--lceval-judge", f"openai:{folder}", "--lceval-judge-base-url", served.url,
                 "--lceval-judge-max-tokens", str(options.judge_max_tokens),
                 *(["--lceval-judge-prefill"] if options.prefill else [])]
        print(f"model {options.model}, lengths {options.lengths}, {options.samples} samples, "
              f"tasks {options.tasks or 'all'}")
        try:
            for suite in options.suites.split(","):
                wall, rows, last = run_suite(suite, Path(scratch) / suite, judge, options)
                print(report(suite, wall, rows))
                print(f"  pytest: {last}")
        finally:
            served.kill()


if __name__ == "__main__":
    main()
