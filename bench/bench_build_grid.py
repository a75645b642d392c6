"""Seconds to build the full recall grid's cases (issue #14, item 6: 9 tasks x 5 lengths up to
128k x 6 depths x 100 samples in under 60 s on 2 cores), so that a GPU fed by lookahead never
waits on the CPU. The default grid is the whole recall suite: its 12 tasks.

Usage: ``python bench/bench_build_grid.py [--processes 2] [--samples 100] [--tasks ...]``

Every case of the grid is built, as a run builds them: each cell (task, length, depth) with its
samples, cells in the grid's order, in ``--processes`` worker processes that take whole tasks
from a queue (a task's cells share its filler streams and corpus, as in one pytest worker).
A task without a depth axis (multi-value, multi-query, vt, cwe, fwe) has one cell per length.
Timed: from the first build to the last, after each worker has loaded the tokenizer (printed
apart). Tokenizer: SmolLM2's (the smollm2 preset's folder); ``--model gemma3-270m`` (or a
tokenizer folder) for another. The cases are checked as they come:
each prompt plus its generation budget within the cell's window (recall: 99-100 % of the
length; other suites: at most the length).
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path

from pytest_lceval.builtin_suites import builtin_task, builtin_tasks
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell, format_length, parse_length
from pytest_lceval.tasks.base import BuildContext, GenerationTask
from pytest_lceval.tasks.fitting import window

TARGET_SECONDS = 60.0
DEPTHS = (0.0, 20.0, 40.0, 60.0, 80.0, 100.0)
COSTLIEST = ("niah_multikey_2", "json_kv", "niah_multikey_3", "cwe", "fwe")
"""Tasks whose cases draw and count their own filler or word lists."""
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

_context: BuildContext | None = None


@dataclass(frozen=True)
class Built:
    task: str
    cases: int
    seconds: float
    outside: int
    """Cases whose prompt plus generation budget fell outside the cell's window."""


def _load(data: Path, model: str, loaded: Barrier) -> None:
    """Each worker loads the tokenizer once, before the clock starts."""
    global _context
    from pytest_lceval.models.hf_text import load_hf_text
    from pytest_lceval.models.presets import SOURCES, preset_directory

    text = load_hf_text(str(preset_directory(model)) if model in SOURCES else model)
    source = DataSource(data if (data / "pg_essays").is_dir() else None)
    _context = BuildContext(text, text.renderer, source, 42)
    loaded.wait()


def _build(job: tuple[str, str, tuple[int, ...], int]) -> Built:
    suite, name, lengths, samples = job
    assert _context is not None
    task = builtin_task(name)
    started = time.perf_counter()
    cases = outside = 0
    for cell in cells(suite, task, lengths, samples):
        for case in task.build(cell, _context):
            low, high = window(cell.length) if suite == "recall" else (0, cell.length)
            outside += not low <= case.prompt_tokens + case.max_new_tokens <= high
            cases += 1
    return Built(name, cases, time.perf_counter() - started, outside)


def cells(suite: str, task: GenerationTask, lengths: tuple[int, ...], samples: int
          ) -> list[Cell]:
    depths: tuple[float | None, ...] = DEPTHS if task.uses_depth else (None,)
    return [Cell(suite, task.name, length, depth, samples)
            for length in lengths for depth in depths]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--lengths", default="8k,16k,32k,64k,128k")
    parser.add_argument("--suite", default="recall",
                        help="the suite whose tasks to build (rag, cite, icl, ...: HELMET's "
                             "need their data in --data)")
    parser.add_argument("--tasks", default="",
                        help="the suite's tasks, comma-separated (default: all of them)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--model", default="smollm2",
                        help="a preset (smollm2, gemma3-270m) or a tokenizer folder")
    args = parser.parse_args()
    lengths = tuple(parse_length(text) for text in args.lengths.split(","))
    known = [task.name for task in builtin_tasks(args.suite)]
    names = [name for name in args.tasks.split(",") if name] or known
    if unknown := sorted(set(names) - set(known)):
        parser.error(f"--tasks: unknown {args.suite} task(s) {', '.join(unknown)}; known: "
                     f"{', '.join(known) or 'none (--suite unknown)'}")
    data = DataSource(args.data if (args.data / "pg_essays").is_dir() else None)
    for name in list(names):
        missing = getattr(builtin_task(name), "missing_data", lambda _: None)(data)
        if missing:
            print(f"  {name}: skipped, {missing}")
            names.remove(name)
    total = sum(len(cells(args.suite, builtin_task(name), lengths, args.samples)) for name in names)
    print(f"{args.suite} grid: {len(names)} tasks x lengths "
          f"{', '.join(map(format_length, lengths))} x {len(DEPTHS)} depths (1 for a task "
          f"without a depth axis) x {args.samples} samples "
          f"= {total * args.samples:,} cases, in {args.processes} processes; tokenizer: "
          f"{args.model}")
    loading = time.perf_counter()
    spawn = multiprocessing.get_context("spawn")
    loaded = spawn.Barrier(args.processes + 1)
    with spawn.Pool(args.processes, _load, (args.data, args.model, loaded)) as pool:
        loaded.wait()
        print(f"  workers ready (Python, transformers, tokenizer): "
              f"{time.perf_counter() - loading:.1f} s, not counted")
        started = time.perf_counter()
        # The costliest tasks first, so no worker is left with one long task at the end.
        order = sorted(names, key=lambda name: COSTLIEST.index(name) if name in COSTLIEST
                       else len(COSTLIEST))
        results = []
        jobs = [(args.suite, name, lengths, args.samples) for name in order]
        for built in pool.imap_unordered(_build, jobs):
            results.append(built)
            print(f"  {built.task:<16} {built.cases:>6,} cases in {built.seconds:6.1f} s "
                  f"({built.seconds / built.cases * 1000:.2f} ms a case)", flush=True)
        wall = time.perf_counter() - started
    cases = sum(built.cases for built in results)
    outside = sum(built.outside for built in results)
    busy = sum(built.seconds for built in results)
    print(f"built {cases:,} cases in {wall:.1f} s on {args.processes} processes "
          f"({busy:.1f} s of work, {busy / wall:.2f} processes busy on average)"
          + (f"; target {TARGET_SECONDS:.0f} s: {'met' if wall <= TARGET_SECONDS else 'MISSED'}"
             if args.suite == "recall" else ""))
    print(f"cases outside their cell's {'99-100 % window' if args.suite == 'recall' else 'length'}"
          f": {outside}")


if __name__ == "__main__":
    main()
