"""Seconds per Task Haystack query: prefix reuse vs full-prompt scoring, same model and workload.

    python bench/bench_prefix_reuse.py [--model smollm2] [--data DIR] [--tasks main16]
                                       [--shots 1] [--queries 400] [--full-queries 3]

Workload: the recall stream of permutation 0, resample 0 (16 tasks x 1 shot on the public data,
the offline pack otherwise) and its queries, taken round-robin over the tasks.

- prefix reuse: every query as ``RankRequest(stream, instruction + input)`` in one backend call;
  the backend computes the stream once and scores the suffixes on its cache (on SmolLM2, 16 at a
  time packed in one row). The timing includes
  that one prefix computation, shared by ``--queries`` queries (a full run shares it among
  n_task x test size queries, so it is cheaper still; the projection line says by how much).
- full prompt: the first ``--full-queries`` of the same queries as ``RankRequest("", whole
  prompt)``, one per call, so nothing is reused.

The agreement line compares the predictions of the two paths on the shared queries.
Reports go straight to the backend (no store), so reruns measure the same work.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

from pytest_lceval.benchmarks.task_haystack.config import OFFLINE_PACK
from pytest_lceval.benchmarks.task_haystack.data import (
    available_tasks,
    load_task,
    resolve_task_names,
)
from pytest_lceval.benchmarks.task_haystack.prompts import StreamSpec, lifelong, permutations
from pytest_lceval.models.base import Backend
from pytest_lceval.models.registry import LoadOptions, load_backend
from pytest_lceval.results.records import RankRequest


def workload(data: Path | None, tasks: str, shots: int, count: int) -> list[RankRequest]:
    root = data / "llicl" if data is not None and (data / "llicl").is_dir() else OFFLINE_PACK
    names = resolve_task_names("all" if root == OFFLINE_PACK else tasks, available_tasks(root))
    stream = tuple(load_task(root, name) for name in permutations(names, 1, seed=42)[0])
    spec = StreamSpec("recall", stream, resample=0, n_shot=shots)
    per_task = [lifelong(spec, task).requests(task, task.test_cases(count)) for task in stream]
    mixed = [r for group in itertools.zip_longest(*per_task) for r in group if r is not None]
    return mixed[:count]


def timed(backend: Backend, requests: list[RankRequest]) -> tuple[float, list[int]]:
    started = time.perf_counter()
    rankings = backend.rank(requests)
    return time.perf_counter() - started, [r.choice for r in rankings]


def flop_ceiling(backend: Backend, prefix: int, suffix: int) -> float:
    """Full-prompt FLOPs over one suffix's FLOPs (the ratio if both ran at the same FLOP rate):
    per token 2 x non-embedding parameters for the matrix products, plus 4 x context x layers x
    heads x head size for attention. Only for backends that expose a transformers model."""
    model = getattr(backend, "model", None)
    if model is None:
        return float("nan")
    config = model.config
    weights = sum(p.numel() for name, p in model.named_parameters() if "embed" not in name)
    width = config.num_attention_heads * getattr(
        config, "head_dim", config.hidden_size // config.num_attention_heads)

    def flops(start: int, count: int) -> float:
        contexts = count * start + count * (count + 1) / 2
        return 2.0 * weights * count + 4.0 * width * config.num_hidden_layers * contexts

    return flops(0, prefix + suffix) / flops(prefix, suffix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--tasks", default="main16")
    parser.add_argument("--shots", type=int, default=1)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--full-queries", type=int, default=3)
    args = parser.parse_args()

    backend = load_backend(args.model, LoadOptions())
    requests = workload(args.data, args.tasks, args.shots, args.queries)
    prefix_tokens = backend.renderer.count(requests[0].prefix)
    suffix_tokens = sum(len(backend.tokenizer.encode(r.suffix)) for r in requests) / len(requests)
    print(f"model {backend.spec}: stream prefix {prefix_tokens} tokens, suffixes "
          f"{suffix_tokens:.0f} tokens on average, {len(requests)} queries")

    first, first_choices = timed(backend, requests[:1])  # the prefix and one suffix
    rest, rest_choices = timed(backend, requests[1:])  # suffixes only, on the cached prefix
    reuse_choices = first_choices + rest_choices
    reuse = (first + rest) / len(requests)
    per_suffix = rest / max(len(requests) - 1, 1)
    full_requests = [RankRequest("", r.prefix + r.suffix, r.options)
                     for r in requests[: args.full_queries]]
    full_seconds = 0.0
    full_choices: list[int] = []
    for request in full_requests:
        seconds, choices = timed(backend, [request])
        full_seconds += seconds
        full_choices += choices
    full = full_seconds / len(full_requests)
    agree = sum(a == b for a, b in zip(full_choices, reuse_choices, strict=False))

    print(f"prefix reuse : {reuse:8.3f} s/query ({len(requests)} queries on one prefix: "
          f"prefix+first {first:.2f} s, then {per_suffix:.3f} s per query)")
    print(f"full prompt  : {full:8.3f} s/query ({len(full_requests)} queries)")
    print(f"ratio        : {full / reuse:8.1f}x")
    print(f"ceilings     : {(prefix_tokens + suffix_tokens) / suffix_tokens:8.1f}x in tokens, "
          f"{flop_ceiling(backend, prefix_tokens, round(suffix_tokens)):.1f}x in FLOPs, if each "
          "suffix is computed whole (a suffix token attends over the whole prefix; suffixes "
          "that share their instruction compute it once, which goes past both)")
    for n in (args.queries, 1600):
        projected = (first - per_suffix + n * per_suffix) / n
        print(f"projected at {n:5d} queries per prefix: {full / projected:6.1f}x")
    print(f"agreement    : {agree}/{len(full_choices)} identical predictions on the shared queries")


if __name__ == "__main__":
    main()
