"""Seconds to build the full recall grid's cases on this machine (issue #14, item 6: 9 tasks x
5 lengths up to 128k x 6 depths x 100 samples in under 60 s on 2 cores), so that a GPU fed
by lookahead never waits on the CPU.

Usage: ``python bench/bench_build_grid.py [--samples 2] [--lengths 8k,16k,32k,64k,128k]``

Building every one of the 27,000 cases takes long on 2 cores, so the bench builds ``--samples``
cases of each task at each length (depth 50 %: a case's cost does not depend on its depth),
takes the median seconds per case, and multiplies by the grid's 6 depths x 100 samples; the
line says that the total is an estimate from those cases. It also prints the share of the time
the tokenizer spends counting final prompts, which bounds what any change to the fitting
outside the tokenizer could save. Tokenizer: SmolLM2's (the smollm2 preset's folder).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from pathlib import Path

from pytest_lceval.data import DataSource
from pytest_lceval.grid import Cell, format_length, parse_length
from pytest_lceval.models.hf_text import load_hf_text
from pytest_lceval.models.presets import preset_directory
from pytest_lceval.tasks.base import BuildContext, tasks_of_suite

TARGET_SECONDS = 60.0
GRID_DEPTHS = 6
GRID_SAMPLES = 100
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--lengths", default="8k,16k,32k,64k,128k")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    lengths = [parse_length(text) for text in args.lengths.split(",")]
    text = load_hf_text(str(preset_directory("smollm2")))
    data = DataSource(args.data if (args.data / "pg_essays").is_dir() else None)
    tasks = [task for task in tasks_of_suite("recall") if task.uses_depth]
    print(f"recall grid: {len(tasks)} tasks with a depth ({', '.join(t.name for t in tasks)}) x "
          f"lengths {', '.join(format_length(n) for n in lengths)} x {GRID_DEPTHS} depths x "
          f"{GRID_SAMPLES} samples = {len(tasks) * len(lengths) * GRID_DEPTHS * GRID_SAMPLES:,}"
          f" cases; essays: {data.essays()[1]}")
    profile = cProfile.Profile()
    estimate, built = 0.0, 0.0
    for length in lengths:
        per_case: list[float] = []
        for task in tasks:
            context = BuildContext(text, text.renderer, data, 42)
            task.build(Cell("recall", task.name, length, 50.0, 1), context)  # corpus tokenised
            for sample in range(args.samples):
                cell = Cell("recall", task.name, length, 50.0, 1)
                context = BuildContext(text, text.renderer, data, 1000 + sample)
                started = time.perf_counter()
                profile.runcall(task.build, cell, context)
                per_case.append(time.perf_counter() - started)
        built += sum(per_case)
        median = statistics.median(per_case)
        seconds = median * len(tasks) * GRID_DEPTHS * GRID_SAMPLES
        estimate += seconds
        print(f"  {format_length(length):>5}: {median * 1000:7.1f} ms a case (median of "
              f"{len(per_case)}), {seconds:8.1f} s for the grid's cases at this length")
    rows = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    tokenizer = sum(row[2] for key, row in rows.items() if "encode_batch" in key[2])
    print(f"full grid, estimated from those cases: {estimate:.0f} s on one process "
          f"({estimate / 2:.0f} s if two processes split it perfectly); target "
          f"{TARGET_SECONDS:.0f} s: {'met' if estimate / 2 <= TARGET_SECONDS else 'MISSED'}")
    print(f"tokenizer counting prompts: {tokenizer / max(built, 1e-9):.0%} of the build time")


if __name__ == "__main__":
    main()
