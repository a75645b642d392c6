"""Seconds to build one 128k-token recall case with a real BPE tokenizer (target: 0.2 s), and how
much faster that is than fitting by re-tokenising the whole prompt at every step.

Usage: ``python bench/bench_build_case.py [--length 131072] [--repeats 3]``

Ours: the corpus is tokenised once per tokenizer (the first build pays for it), contexts are
sized by adding the pieces' token counts, and the rendered prompt is measured once or twice.
Naive: a binary search over how many characters of haystack (or how many JSON pairs) to keep,
rendering and counting the whole prompt at every step, as many NIAH scripts do. Both run here,
on the same tokenizer, corpus and renderer (SmolLM2's, chat template included).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pytest_lceval.benchmarks.ruler.json_kv import INSTRUCTION
from pytest_lceval.benchmarks.ruler.niah import Wording
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.foundation.data import DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.hf_text import HFText, load_hf_text
from pytest_lceval.models.presets import preset_directory
from pytest_lceval.tasks.base import BuildContext
from pytest_lceval.tasks.fitting import Frame, window

TARGET_SECONDS = 0.2
DATA = Path("/work/shared/data")


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def binary_search(count: Callable[[int], int], high: int, limit: int) -> int:
    """The largest n in [0, high] with count(n) <= limit; count is monotone in n."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if count(middle) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def naive_niah(renderer: Renderer, texts: tuple[str, ...], length: int, depth: float) -> int:
    """Binary search over haystack characters, re-tokenising the whole prompt at every step."""
    wording = Wording("number", multi=False)
    needle = " " + wording.needle("tall-river", "1234567")
    frame = Frame(wording.instruction() + "\n", "\n" + wording.question(["tall-river"]),
                  wording.prefix(["tall-river"]))
    corpus = "\n\n".join(texts)
    corpus = corpus * (length * 6 // len(corpus) + 1)

    def total(chars: int) -> int:
        haystack = corpus[:chars]
        cut = haystack.rfind(". ", 0, int(chars * depth / 100)) + 1
        context = haystack[:cut] + needle + haystack[cut:]
        return renderer.count(renderer.render(frame.prompt(context))) + 20

    return binary_search(total, len(corpus), length)


def naive_json(renderer: Renderer, length: int, depth: float) -> int:
    """Binary search over the number of pairs, re-tokenising the whole prompt at every step."""
    rng = random.Random(0)
    pairs = [f'"{uuid.UUID(int=rng.getrandbits(128), version=4)}": '
             f'"{uuid.UUID(int=rng.getrandbits(128), version=4)}"' for _ in range(length // 40)]
    frame = Frame("JSON data:\n{", f'}}\n\n{INSTRUCTION}\n\nKey: "k"', "Corresponding value:")

    def total(count: int) -> int:
        chosen = pairs[:count]
        chosen.insert(round(len(chosen) * depth / 100), '"k": "v"')
        context = ",\n ".join(chosen)
        return renderer.count(renderer.render(frame.prompt(context))) + 50

    return binary_search(total, len(pairs), length)


def measure(name: str, text: HFText, data: DataSource, length: int, repeats: int,
            naive: Callable[[], object]) -> None:
    """Time one task's builds (cold, warm new cases, same case at another depth) and the naive
    fit, side by side."""
    task = builtin_task(name)
    cases = []

    def build(seed: int, depth: float) -> None:
        context = BuildContext(text, text.renderer, data, seed)
        cases.extend(task.build(Cell("recall", name, length, depth, 1), context))

    first = timed(lambda: build(0, 50.0))
    new = statistics.median(timed(lambda s=s: build(s, 50.0)) for s in range(1, repeats + 1))
    other_depth = timed(lambda: build(0, 25.0))
    count = statistics.median(timed(lambda: text.prompt_ids(cases[0].prompt))
                              for _ in range(repeats))
    naive_seconds = timed(naive)
    case = cases[0]
    print(f"{name}: {case.total_tokens} tokens, depth {case.depth:.2f}%\n"
          f"  first build {first:.3f} s (corpus tokenisation included)\n"
          f"  warm, new case {new:.3f} s (target {TARGET_SECONDS} s: "
          f"{'met' if new <= TARGET_SECONDS else 'missed'}); same case at another depth "
          f"{other_depth:.3f} s; one tokenisation of the final prompt alone {count:.3f} s\n"
          f"  naive {naive_seconds:.3f} s: {naive_seconds / new:.1f}x the warm new case")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=131072)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    text = load_hf_text(str(preset_directory("smollm2")))
    data = DataSource(DATA if (DATA / "pg_essays").is_dir() else None)
    texts, source = data.essays()
    print(f"tokenizer: SmolLM2 (chat template {'on' if text.renderer.uses_template else 'off'})"
          f"; essays: {source}; length {args.length}, accepted totals {window(args.length)}")
    # The naive search tokenises every prompt whole (HFText.count would reuse the counts of
    # paragraphs it has seen, which is this project's, not a naive script's).
    whole = Renderer(text.renderer.template, lambda prompt: len(text.prompt_ids(prompt)))
    measure("niah_single_2", text, data, args.length, args.repeats,
            lambda: naive_niah(whole, texts, args.length, 50.0))
    measure("json_kv", text, data, args.length, args.repeats,
            lambda: naive_json(whole, args.length, 50.0))


if __name__ == "__main__":
    main()
