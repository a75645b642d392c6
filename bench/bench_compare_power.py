"""The comparison gate's error rates, measured against what it promises.

Usage: ``python bench/bench_compare_power.py [--repeats 1000] [--drop 0.10] [--seed 0]``

Many repetitions of two experiments, each on synthetic per-case 0/1 scores of one suite
(12 tasks, cells of a few cases each, as the recall suite's grid):

- **A/A**: the same model twice with different seeds. Each case has a chance p_i of being
  answered (p_i uniform in 0.15..1: a model that samples); each run draws every case's score
  from it afresh. The gates should fail at most at their nominal alpha (0.05) together: the
  suite gate, the task gate, and either of them (the family-wise rate).
- **drop**: the second run's model lost ``--drop`` points on every case (p_i - drop). The suite
  gate should fail with at least the power the plan line promises for that drop
  (``stats.planned_power`` at the suite's share of alpha: from the baseline's per-case
  variance and the number of paired cases, the same numbers the plan line reads), averaged
  over the repetitions.

A second model answers deterministically (greedy decoding: p_i is 0 or 1, 75 % of cases 1):
its A/A runs are identical, and its drop turns a share drop / 0.75 of its answered cases wrong.

The gates are the plugin's own (``verdicts/baseline/pooled.decide``): pooled McNemar per suite
and per task, weighted Holm over the suite (half of alpha) and its tasks (the other half).
Printed: per grid and model, the plan's detectable drop, the measured false-fail rates against
alpha, and the measured power against the nominal one, side by side.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pytest_lceval.verdicts.baseline.pooled import (
    SUITE_GATE,
    TASK_GATE,
    Pairs,
    decide,
    levels_alpha,
)
from pytest_lceval.verdicts.stats import ALPHA, planned_detectable_drop, planned_power

TASKS = 12
GRIDS = ((2, 2), (2, 10), (4, 10))
"""(cells per task, cases per cell): the reduced CPU grid (2 lengths, 2 cases), then 10 cases
per cell, then 4 cells of 10."""
MIN_DROP = 0.05


def latent(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    """Each case's chance of being answered."""
    if kind == "sampled":
        return rng.uniform(0.15, 1.0, n)
    return (rng.random(n) < 0.75).astype(float)


def run_scores(rng: np.random.Generator, chance: np.ndarray) -> np.ndarray:
    return (rng.random(len(chance)) < chance).astype(float)


def dropped(chance: np.ndarray, kind: str, drop: float) -> np.ndarray:
    """The model that lost ``drop`` points on every case."""
    if kind == "sampled":
        return np.clip(chance - drop, 0.0, 1.0)
    return chance * (1.0 - drop / 0.75)


def gates(base: np.ndarray, current: np.ndarray, cells: int, cases: int) -> dict[str, bool]:
    """Which gates failed on one pair of runs (scores laid out task by task)."""
    per_task = cells * cases
    tasks = {f"t{t}": Pairs(list(base[t * per_task:(t + 1) * per_task]),
                            list(current[t * per_task:(t + 1) * per_task]), cells)
             for t in range(TASKS)}
    found = {g.criterion: not g.passed for g in decide("base", "suite", tasks, MIN_DROP)}
    return {SUITE_GATE: found[SUITE_GATE], TASK_GATE: found.get(TASK_GATE, False)}


def experiment(rng: np.random.Generator, kind: str, cells: int, cases: int, repeats: int,
               drop: float) -> dict[str, float]:
    n = TASKS * cells * cases
    aa = {SUITE_GATE: 0, TASK_GATE: 0, "either": 0}
    power_hits, nominal, detectable = 0, 0.0, 0.0
    for _ in range(repeats):
        chance = latent(rng, kind, n)
        base = run_scores(rng, chance)
        failed = gates(base, run_scores(rng, chance), cells, cases)
        for name in (SUITE_GATE, TASK_GATE):
            aa[name] += failed[name]
        aa["either"] += failed[SUITE_GATE] or failed[TASK_GATE]
        power_hits += gates(base, run_scores(rng, dropped(chance, kind, drop)), cells,
                            cases)[SUITE_GATE]
        variance, suite_alpha = float(base.var()), levels_alpha(TASKS)[0]
        nominal += planned_power(variance, n, drop, suite_alpha)
        detectable += planned_detectable_drop(variance, n, suite_alpha)
    return {"n": n, "suite": aa[SUITE_GATE] / repeats, "tasks": aa[TASK_GATE] / repeats,
            "either": aa["either"] / repeats, "power": power_hits / repeats,
            "nominal": nominal / repeats, "detectable": detectable / repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1000)
    parser.add_argument("--drop", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{TASKS} tasks, {args.repeats} repetitions per row, alpha {ALPHA}, drop "
          f"{args.drop:g}, --lceval-min-drop {MIN_DROP}")
    print(f"{'model':8} {'cells x cases':>13} {'N':>5} {'plan: detects':>13} | "
          f"{'A/A false-fail: suite':>21} {'tasks':>6} {'either':>6} {'nominal':>7} | "
          f"{'power at drop':>13} {'nominal':>7}")
    started = time.perf_counter()
    for kind in ("sampled", "greedy"):
        for cells, cases in GRIDS:
            r = experiment(rng, kind, cells, cases, args.repeats, args.drop)
            print(f"{kind:8} {f'{cells} x {cases}':>13} {r['n']:5d} {r['detectable']:13.3f} | "
                  f"{r['suite']:21.3f} {r['tasks']:6.3f} {r['either']:6.3f} {ALPHA:7.3f} | "
                  f"{r['power']:13.3f} {r['nominal']:7.3f}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
