"""The main job's model work before and after ``HFBackend.greedy_on_cpu``, side by side in one
process: time per phase, the ratio, and every answer compared byte for byte.

    python bench/bench_main_job.py [--model smollm2] [--calls FILE] [--limit N] [--every N]
    python bench/bench_main_job.py --calls FILE -- suites/test_recall.py --lengths 4k,8k
    python bench/bench_main_job.py --calls FILE --against OTHER_FILE

Two steps, the first skipped when ``--calls`` names a file that exists:

1. **Record**: the README's main job (``pytest suites/ --model=smollm2``, the reduced grid: 44
   cells, 108 cases), or the pytest arguments given after ``--``, runs once in this process,
   with a fresh store under a scratch folder so no stored answer stands in for the model, and
   the backend as configured (``GREEDY_ON_CPU``).
   Every call that reaches the backend is kept (its requests and answers, in its batch) and the
   run's wall time is split by phase: tokenise, render, load (the weights), prefill and decode
   (forward passes over a prompt, and those over one token a row or the next token and its
   lookup draft), model-other (the rest of the backend's
   calls: batching, cache copies, stop strings, decoding text), store, score, report, and the
   rest (pytest, building cases, plugins). The calls go to ``--calls`` when given.
2. **Replay**: the recorded calls, each answered by both sides in the same batch, the side that
   goes first alternating from call to call so that load on a shared machine hits both alike:
   *before* (``model.generate`` on the padded batch, as the backend did before #41) and *after*
   (``hf_greedy.greedy_batch``: each prompt prefilled alone, from a start shared with a prompt
   of this call or the last where it has one; the padded batch decoded over a cache that grows
   in place, each pass checking lookup drafts, with products and attention that suit a few
   rows). Each side's time is split into tokenise, prefill, decode and model-other; the ratio is
   after / before. Each side keeps its own Task Haystack prefix cache from call to call (rank is
   the same code on both sides), as the run's one backend did. Every answer of the two sides is
   compared (text, prompt and output tokens; a ranking's scores), and each side's with the
   answer the recorded run stored. Before the replay and again after its table, two lines say
   where it ran: the host (processor, torch's CPU capability and threads, MKL's and oneDNN's
   versions, torch's and transformers') and the CPU decoder's probe (``decoder_probe``: which
   of its shortcuts are off on this host, and why).

With ``--against``, two recorded runs (say one made with ``GREEDY_ON_CPU`` off, one with it on)
are compared instead of a replay: their time per phase, and every answer, matched by request.

Both steps run with torch's idle threads waiting as the plugin makes them wait
(``foundation/cpu_wait.py``: asleep at once unless the environment says otherwise), so that the
before side is the main job as a user runs it; ``OMP_WAIT_POLICY=ACTIVE python bench/...`` times
both sides spinning instead.

The numbers are wall seconds, and *model CPU* the process's CPU seconds (all its threads) over
each side's calls: on a machine whose cores others use, the ratios are the numbers to read (both
sides saw the same load, call by call), the CPU one the steadier, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from pytest_lceval.foundation.cpu_wait import sleep_when_idle

# torch's threads wait as the plugin makes them wait in the main job (set before torch loads;
# OMP_WAIT_POLICY or GOMP_SPINCOUNT in the environment wins, as it does for the plugin)
sleep_when_idle()

import torch
import transformers

from pytest_lceval.models.base import Renderer
from pytest_lceval.models.hf import HFBackend
from pytest_lceval.models.hf_text import HFText
from pytest_lceval.models.presets import load_preset
from pytest_lceval.models.registry import LoadOptions
from pytest_lceval.results.records import GenerateRequest, Prompt, RankRequest
from pytest_lceval.run.evaluation import Evaluator
from pytest_lceval.run.model_usage import read_usage
from pytest_lceval.store.database import Store

ROOT = Path(__file__).resolve().parent.parent
STORE_METHODS = ("get_answers", "put_answers", "claim", "renew_claims", "release_claims",
                 "count_answers", "get_shared", "put_shared")
TOKENISER_METHODS = ("_batch", "count_many", "offsets")


class Phases:
    """Wall seconds per phase, each phase's own: a phase entered inside another (tokenise
    inside render) stops the outer one's clock until it ends. One stack per thread: the run's
    lookahead threads take turns, never running at once."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.side = ""
        """Prefix of every phase name ('before/', 'after/') while a replay side runs."""
        self._stacks: dict[int, list[tuple[str, float]]] = defaultdict(list)

    def enter(self, name: str) -> None:
        stack, now = self._stacks[threading.get_ident()], time.perf_counter()
        if stack:
            outer, since = stack[-1]
            self.seconds[outer] += now - since
        stack.append((self.side + name, now))

    def leave(self) -> None:
        stack, now = self._stacks[threading.get_ident()], time.perf_counter()
        name, since = stack.pop()
        self.seconds[name] += now - since
        if stack:
            stack[-1] = (stack[-1][0], now)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.enter(name)
        try:
            yield
        finally:
            self.leave()

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        """Time every call of ``owner.attribute`` (a class's method, or an object's) as ``name``."""
        inner = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name):
                return inner(*args, **kwargs)
        setattr(owner, attribute, timed)

    def watch_forward(self, model: Any) -> None:
        """Forward passes over one token a row, and those of ``greedy_batch``'s decode (the
        next token and its lookup draft, while its products are a decode pass's), are decode;
        the rest prefill."""
        def before(_: Any, args: Any, kwargs: dict[str, Any]) -> None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            products = getattr(model, "_lceval_products", None)
            decoding = products is not None and products.decoding
            one = ids is not None and ids.shape[1] == 1
            self.enter("decode" if one or decoding else "prefill")

        model.register_forward_pre_hook(before, with_kwargs=True)
        model.register_forward_hook(lambda *_: self.leave())


class Recorder:
    """A pytest plugin: the main job's backend calls and its time per phase."""

    def __init__(self, phases: Phases) -> None:
        self.phases = phases
        self.calls: list[dict[str, Any]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_lceval_make_backend(self, spec: Any, options: LoadOptions) -> Any:
        backend = yield
        if isinstance(backend, HFBackend):
            for kind in ("generate", "rank"):
                self._record(backend, kind)
        return backend

    def _record(self, backend: HFBackend, kind: str) -> None:
        answer = getattr(backend, kind)

        def recorded(requests: Any) -> Any:
            if "model" not in vars(backend):  # the first call loads the weights
                with self.phases.phase("load"):
                    self.phases.watch_forward(backend.model)
            with self.phases.phase("model-other"):
                answers = answer(requests)
            self.calls.append({"kind": kind, "requests": [asdict(r) for r in requests],
                               "answers": [_comparable(a) for a in answers]})
            return answers
        setattr(backend, kind, recorded)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self) -> Any:
        with self.phases.phase("report"):
            return (yield)


def record(model: str, job: list[str]) -> tuple[list[dict[str, Any]], dict[str, float], float,
                                               float]:
    """(calls, seconds per phase, wall seconds, model seconds from the run's usage counts) of
    ``pytest`` on ``job`` (the main job: the suites folder)."""
    phases = Phases()
    for method in TOKENISER_METHODS:
        phases.wrap(HFText, method, "tokenise")
    phases.wrap(Renderer, "render", "render")
    phases.wrap(Evaluator, "score", "score")
    for method in STORE_METHODS:
        phases.wrap(Store, method, "store")
    recorder = Recorder(phases)
    with tempfile.TemporaryDirectory(prefix="lceval-main-job-") as scratch:
        started = time.perf_counter()
        code = pytest.main([*job, "-q", "-p", "no:randomly", "-p",
                            "no:cacheprovider", "--model", model, "--lceval-store",
                            f"{scratch}/store.sqlite", "--lceval-out", scratch, "--lceval-run",
                            "main"], plugins=[recorder])
        wall = time.perf_counter() - started
        if code not in (0, 1):  # the weak model fails cells (exit 1): a verdict, not a failure
            sys.exit(f"the main job stopped with exit code {code}")
        model_seconds = read_usage(Path(scratch) / "main")["model"].seconds
    return recorder.calls, dict(phases.seconds), wall, model_seconds


def _comparable(answer: Any) -> dict[str, Any]:
    """An answer as stored (JSON), less its seconds (a timing, not part of the answer)."""
    fields = asdict(answer)
    fields.pop("seconds")
    loaded: dict[str, Any] = json.loads(json.dumps(fields))
    return loaded


def _requests(call: dict[str, Any]) -> list[GenerateRequest] | list[RankRequest]:
    if call["kind"] == "rank":
        return [RankRequest(r["prefix"], r["suffix"], tuple(r["options"]))
                for r in call["requests"]]
    return [GenerateRequest(r["prompt"], r["max_new_tokens"], tuple(r["stop"]),
                            Prompt(**r["chat"]) if r["chat"] else None)
            for r in call["requests"]]


def host() -> str:
    """The processor and the libraries whose kernels decide which of the CPU decoder's splits
    round as the whole computation does (``decoder_probe``)."""
    config = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", config)
    onednn = re.search(r"MKL-DNN v([\w.]+)", config)
    cpuinfo = Path("/proc/cpuinfo")
    names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text() if cpuinfo.exists()
                       else "", re.MULTILINE)
    return (f"host: {names[0] if names else platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores, torch CPU capability "
            f"{torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads; "
            f"MKL {mkl.group(1) if mkl else 'none'}, oneDNN {onednn.group(1) if onednn else 'none'}"
            f"; torch {torch.__version__}, transformers {transformers.__version__}")


def replay(model: str, calls: list[dict[str, Any]],
           sides: tuple[str, ...] = ("before", "after")) -> tuple[dict[str, float], list[str],
                                                                  str]:
    """(seconds per side and phase, a line per answer that differs, the CPU decoder probe's
    line)."""
    backend = load_preset(model, LoadOptions())
    if not isinstance(backend, HFBackend):
        sys.exit(f"--model {model} is not an hf backend: nothing to compare")
    assert backend.model is not None  # the weights load (a GGUF file converts) and the CPU
    probed = backend.notes[0] if backend.notes else "probe: not run (not the CPU decoder)"
    print(probed, flush=True)  # decoder's probe runs, before the clocks
    phases = Phases()
    phases.wrap(backend.text, "_batch", "tokenise")
    phases.watch_forward(backend.model)
    differ: list[str] = []
    last_prefix: dict[str, Any] = {"before": None, "after": None}
    cpu_seconds: dict[str, float] = defaultdict(float)
    for number, call in enumerate(calls):
        requests = _requests(call)
        answered: dict[str, list[dict[str, Any]]] = {}
        for side in sides if number % 2 == 0 else sides[::-1]:
            backend.greedy_on_cpu = side == "after"
            backend._last_prefix = last_prefix[side]  # each side reuses only its own prefix
            phases.side = f"{side}/"
            cpu = time.process_time()
            with phases.phase("model-other"):
                answers = getattr(backend, call["kind"])(requests)
            cpu_seconds[side] += time.process_time() - cpu
            last_prefix[side] = backend._last_prefix
            answered[side] = [_comparable(a) for a in answers]
        phases.side = ""
        for index, stored in enumerate(call["answers"]):
            mine = [answers[index] for answers in answered.values()]
            if any(answer != stored for answer in mine):
                # "sides": before and after disagree; "stored": they agree, the run did not
                where = "sides" if any(answer != mine[0] for answer in mine) else "stored"
                differ.append(f"{where}: call {number} answer {index}: stored {stored!r}, "
                              + ", ".join(f"{side} {answers[index]!r}"
                                          for side, answers in answered.items()))
        print(f"  call {number + 1}/{len(calls)} ({call['kind']}, {len(requests)} requests): "
              f"before {_total(phases.seconds, 'before'):.1f} s, after "
              f"{_total(phases.seconds, 'after'):.1f} s so far, {len(differ)} answers differ",
              flush=True)
    return {**phases.seconds, **{f"cpu/{side}": value for side, value in cpu_seconds.items()}}, \
        differ, probed


def _total(seconds: dict[str, float], side: str) -> float:
    return sum(value for name, value in seconds.items() if name.startswith(f"{side}/"))


def report(calls: list[dict[str, Any]], seconds: dict[str, float], differ: list[str]) -> None:
    answers = sum(len(call["answers"]) for call in calls)
    both = _total(seconds, "before") > 0
    print(f"replay: {len(calls)} backend calls, {answers} answers, each answered "
          + ("before and after in the same batch" if both else "after only"))
    print(f"{'phase':14}{'before':>10}{'after':>10}{'after/before':>14}")
    rows = [(name, seconds.get(f"before/{name}", 0.0), seconds.get(f"after/{name}", 0.0))
            for name in ("tokenise", "prefill", "decode", "model-other")]
    for name, before, after in [*rows, ("model time", _total(seconds, "before"),
                                        _total(seconds, "after")),
                                ("model CPU", seconds.get("cpu/before", 0.0),
                                 seconds.get("cpu/after", 0.0))]:
        ratio = f"{after / before:>13.2f}" if before > 0 else ""
        print(f"{name:14}{before:>9.1f}s{after:>9.1f}s{ratio}")
    sides = sum(line.startswith("sides") for line in differ)
    print(f"identical answers: {answers - sides}/{answers} between the sides, "
          f"{answers - len(differ)}/{answers} also equal to the recorded run's (a difference "
          "from the run alone is a change made since it was recorded, not the sides')")
    for line in differ:
        print("  DIFFERS " + line)


def show_run(name: str, run: dict[str, Any]) -> None:
    print(f"{name}: {run['wall']:.1f} s wall, {run['model']:.1f} s of model time (store lookups "
          f"and backend calls), {len(run['calls'])} backend calls; seconds by phase:")
    for phase, value in sorted(run["phases"].items(), key=lambda item: -item[1]):
        print(f"  {phase:12}{value:>9.1f}s")
    print(f"  {'rest':12}{run['wall'] - sum(run['phases'].values()):>9.1f}s")


def compare(one: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """A line per request whose answers differ between two recorded runs (or is in one only)."""
    def answers(run: dict[str, Any]) -> dict[str, Any]:
        return {json.dumps([call["kind"], request], sort_keys=True): answer
                for call in run["calls"]
                for request, answer in zip(call["requests"], call["answers"], strict=True)}
    first, second = answers(one), answers(other)
    return [f"{key[:120]}...: {first.get(key)!r} vs {second.get(key)!r}"
            for key in sorted(first.keys() | second.keys()) if first.get(key) != second.get(key)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("job", nargs="*", default=[str(ROOT / "suites")],
                        help="what pytest runs in the record step (default: the suites folder, "
                             "the main job); e.g. suites/test_recall.py --lengths 4k,8k for "
                             "another grid")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--calls", type=Path, default=None,
                        help="the recorded run: read when the file exists (no main-job run), "
                             "written after the run otherwise")
    parser.add_argument("--against", type=Path, default=None,
                        help="another recorded run (e.g. made with the other setting): its "
                             "answers are compared with --calls' answer by answer, no replay")
    parser.add_argument("--limit", type=int, default=0,
                        help="replay only the first N calls (a quick look; 0: all)")
    parser.add_argument("--after-only", action="store_true",
                        help="replay the after side alone: only whether its answers equal the "
                             "stored ones, in half the time (no ratio)")
    parser.add_argument("--offset", type=int, default=0,
                        help="with --every, start at this call (--every 4 --offset 1: calls "
                             "1, 5, 9...)")
    parser.add_argument("--every", type=int, default=1,
                        help="replay every Nth call (a sample of every suite where the whole "
                             "replay takes too long: on a busy machine, 2x the run's model time)")
    options = parser.parse_args()
    if options.calls is not None and options.calls.exists():
        run = json.loads(options.calls.read_text())
    else:
        calls, phases, wall, model_seconds = record(options.model, options.job)
        run = {"calls": calls, "phases": phases, "wall": wall, "model": model_seconds}
        if options.calls is not None:
            options.calls.write_text(json.dumps(run))
    show_run(str(options.calls or "main job"), run)
    if options.against is not None:
        other = json.loads(options.against.read_text())
        show_run(str(options.against), other)
        differ = compare(run, other)
        answers = sum(len(call["answers"]) for call in run["calls"])
        print(f"model time {other['model'] / run['model']:.2f} of --calls'; identical answers: "
              f"{answers - len(differ)}/{answers}")
        for line in differ:
            print("  DIFFERS " + line)
        return
    selected = run["calls"][options.offset:: options.every]
    selected = selected[: options.limit] if options.limit else selected
    print(host(), flush=True)
    seconds, differ, probed = replay(options.model, selected,
                                     ("after",) if options.after_only else ("before", "after"))
    report(selected, seconds, differ)
    print(host())
    print(probed)


if __name__ == "__main__":
    main()
