"""How torch's idle CPU threads should wait: a decode step's time under each wait setting, on an
idle machine and with one core held by another process (``foundation/cpu_wait.py`` quotes it).

    python bench/bench_cpu_wait.py [--model smollm2] [--tokens 1000] [--steps 30] [--repeats 2]

libgomp reads the setting once, when torch loads, so every measurement is a fresh process with
its environment: ``PASSIVE`` (what the plugin sets), libgomp's default spin, and spins bounded by
``GOMP_SPINCOUNT``. Each decodes two rows of ``--tokens`` random ids greedily with the backend's
CPU path (``hf_greedy.greedy_batch``, without lookup drafts, so that a step is one pass of one
token a row): a step's milliseconds are the difference between a ``--steps`` + 1 token answer
and a 1 token one, divided by ``--steps``. The settings take turns
within each repeat, so drift in the machine's load hits all alike; the table gives each one's
median and its ratio to ``PASSIVE`` under the same condition.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pytest_lceval.foundation.cpu_wait import WAIT_ENVIRONMENT

SETTINGS = {"PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"}, "default spin": {},
            "spin 3000": {"GOMP_SPINCOUNT": "3000"}, "spin 10000": {"GOMP_SPINCOUNT": "10000"}}


def step_ms(model: str, tokens: int, steps: int) -> float:
    """One measurement, in this process (the child's side)."""
    import torch

    from pytest_lceval.models import hf_greedy
    from pytest_lceval.models.presets import load_preset
    from pytest_lceval.models.registry import LoadOptions

    hf_greedy.DRAFT_TOKENS = 0  # one token a pass: --steps passes
    backend = load_preset(model, LoadOptions())
    generator = torch.Generator().manual_seed(0)
    prompts = [torch.randint(100, 20000, (tokens,), generator=generator).tolist()
               for _ in range(2)]

    def answer(budget: int) -> float:
        started = time.perf_counter()
        hf_greedy.greedy_batch(backend.model, prompts, budget, [], backend._pad, [], None,
                     backend._cache_keyword)
        return time.perf_counter() - started

    answer(2)  # warm: the first decode step learns which products to pack as one
    return (answer(steps + 1) - answer(1)) / steps * 1000


@contextmanager
def one_core_held() -> Iterator[None]:
    """Another process spinning on one core for as long as this lasts."""
    holder = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        holder.kill()
        holder.wait()


def measure(options: argparse.Namespace, setting: dict[str, str]) -> float:
    env = {name: value for name, value in os.environ.items() if name not in WAIT_ENVIRONMENT}
    done = subprocess.run([sys.executable, __file__, "--child", "--model", options.model,
                           "--tokens", str(options.tokens), "--steps", str(options.steps)],
                          env={**env, **setting}, capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(step_ms(options.model, options.tokens, options.steps)))
        return
    print(f"{options.model}: ms per decode step, 2 rows over {options.tokens} tokens, "
          f"{os.cpu_count()} cores; median of {options.repeats}")
    for condition in ("idle", "one core held"):
        times: dict[str, list[float]] = {name: [] for name in SETTINGS}
        for _ in range(options.repeats):
            for name, setting in SETTINGS.items():
                if condition == "idle":
                    times[name].append(measure(options, setting))
                else:
                    with one_core_held():
                        times[name].append(measure(options, setting))
        passive = statistics.median(times["PASSIVE"])
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {condition:14}{name:14}{median:>8.1f} ms  {median / passive:>5.2f}x PASSIVE"
                  f"  ({', '.join(f'{value:.1f}' for value in values)})", flush=True)


if __name__ == "__main__":
    main()
