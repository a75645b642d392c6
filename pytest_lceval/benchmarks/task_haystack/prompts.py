"""Prompts exactly as METHODS §3 and the reference code build them; pure functions of the data.

- Task block p_i = instruction, then the first ``n_shot x n_class`` demonstrations of resample r,
  joined by ``DEMO_SEP``.
- Single-task ICL: p_i, ``DEMO_SEP``, test input.
- Lifelong ICL (recall): p_a1 ``TASK_SEP`` ... p_an ``TASK_SEP`` test instruction ``DEMO_SEP``
  test input. Both conditions take their demonstrations from the same resample r.

Every prompt is split into a :class:`Context` (what all test inputs of one condition share) and
the test input, so that backends with prefix caching compute the long part once. Backends
tokenize the two halves apart, so the seam is placed where that changes nothing: right *before*
a separator. A byte-level BPE (SmolLM2, GPT-2, Llama 3) reads "label\n\nClassify" as
``label`` ``\n`` ``\n`` ``Classify``, but a prefix that ends in "\n\n" as ``label`` ``\n\n``:
a seam after the separator would give the model tokens it never reads in the joined prompt.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ...foundation.grid import case_seed
from ...results.records import RankRequest
from .data import LliclTask

Tokenize = Callable[[str], list[int]]
Detokenize = Callable[[Sequence[int]], str]

TASK_SEP = "\n\n"
"""Between task blocks (the reference code's ``--task_sep``)."""
DEMO_SEP = "\n"
"""Between the instruction and demonstrations of a block (``--demo_sep``)."""

RECALL = "recall"
SETTINGS = ("recall", "replay", "remove", "paraphrase", "random", "repeat", "repeat-shuffle",
            "remove-same-instruction")
"""Controlled settings of the paper's Table 3; recall is Task Haystack proper.
``remove-same-instruction`` is Remove as the paper's Table 3 draws it (the test instruction as
learnt); ``remove`` is Remove as the released ``run_remove.sh`` runs it, with the paraphrase."""
STREAM_SETTINGS = frozenset({"recall", "replay", "remove", "paraphrase",
                             "remove-same-instruction"})
"""Settings whose context is the permuted task stream: only they have a depth."""
REPEAT_SETTINGS = frozenset({"random", "repeat", "repeat-shuffle"})
"""Settings sized by n_repeat copies of the test task's block (the reference's run_repeat.py)."""
SHARED_SETTINGS = frozenset({"recall", "paraphrase"})
"""Settings whose whole context is the same for every test task of a stream, so one prefix
serves all tasks' queries of a (permutation, resample)."""


def query(task: LliclTask, row: Mapping[str, str]) -> str:
    """The test input, e.g. 'Article: ...\\nAnswer:'. Trailing spaces are dropped (cola's
    template ends in 'Label: '): the option's own leading space follows in rank scoring."""
    return task.inference_prompt.format_map(row).rstrip(" ")


def task_block(task: LliclTask, resample: int, n_shot: int, instruction: str | None = None,
               rows: Sequence[Mapping[str, str]] | None = None) -> str:
    """p_i: the instruction and the demonstrations (by default resample r's first rounds)."""
    demos = task.demonstrations(resample, n_shot) if rows is None else rows
    lines = [task.instruction if instruction is None else instruction]
    lines.extend(task.demonstration_prompt.format_map(row) for row in demos)
    return DEMO_SEP.join(lines)


@dataclass(frozen=True)
class Context:
    """What precedes each test input of one condition: ``prefix + head + query``.

    ``prefix`` is shared by many requests (backends reuse its KV cache) and ends with text, not
    a separator; ``head`` starts with the separator and, in Lifelong ICL, holds the test task's
    instruction, repeated in each request's suffix so that every task of a stream shares the
    prefix.
    """

    prefix: str
    head: str = DEMO_SEP

    def request(self, task: LliclTask, row: Mapping[str, str]) -> RankRequest:
        return RankRequest(self.prefix, self.head + query(task, row), task.options)

    def requests(self, task: LliclTask, rows: Sequence[Mapping[str, str]]) -> list[RankRequest]:
        return [self.request(task, row) for row in rows]


def single_task(task: LliclTask, resample: int, n_shot: int) -> Context:
    """The Single-task ICL baseline: p_i then the test input."""
    return Context(task_block(task, resample, n_shot))


def haystack(stream: Sequence[LliclTask], resample: int, n_shot: int) -> str:
    """p_a1 ⊕ ... ⊕ p_an, every block from the same resample."""
    return TASK_SEP.join(task_block(task, resample, n_shot) for task in stream)


@dataclass(frozen=True)
class StreamSpec:
    """One Lifelong condition: the ordered stream, the resample, the shots and the setting."""

    setting: str
    stream: tuple[LliclTask, ...]
    """Tasks in permutation order (every task of the length setting)."""
    resample: int
    n_shot: int
    trial: int = 0
    """Permutation index; seeds the shuffles of repeat-shuffle."""
    seed: int = 0
    repeats: int = 0
    """Copies of the demonstrations in repeat and repeat-shuffle (n_repeat); 0 = one per task
    of the stream, the reference's default before its cap (see repeat_count)."""


def lifelong(spec: StreamSpec, task: LliclTask, prose: str = "") -> Context:
    """The context of test task ``task`` under ``spec.setting`` (paper Table 3).

    recall       stream, then the test instruction                    (Task Haystack)
    paraphrase   stream, then the paraphrased instruction (instruction_2)
    replay       stream, then the test task's block again
    remove       stream without the test task, then the paraphrased instruction (the
                 released scripts/controlled_experiments/run_remove.sh passes
                 --use_paraphrase)
    remove-same-instruction  as remove, with the instruction itself (Table 3's drawing)
    random       ``prose`` (irrelevant text, n_repeat - 1 blocks long), then the block
    repeat       the instruction, then the demonstrations n_repeat times (repeat_count)
    repeat-shuffle  as repeat, every copy after the first shuffled
    """
    setting, r, k = spec.setting, spec.resample, spec.n_shot
    head = TASK_SEP + task.instruction + DEMO_SEP
    if setting in ("recall", "paraphrase"):
        if setting == "paraphrase":
            head = TASK_SEP + task.instruction_2 + DEMO_SEP
        return Context(haystack(spec.stream, r, k), head)
    if setting == "replay":
        return Context(haystack(spec.stream, r, k) + TASK_SEP + task_block(task, r, k))
    if setting in ("remove", "remove-same-instruction"):
        if setting == "remove":
            head = TASK_SEP + task.instruction_2 + DEMO_SEP
        others = [other for other in spec.stream if other.name != task.name]
        return Context(haystack(others, r, k), head)
    if setting == "random":
        return Context(prose + TASK_SEP + task_block(task, r, k))
    if setting in ("repeat", "repeat-shuffle"):
        return Context(task_block(task, r, k, rows=repeated_demonstrations(spec, task)))
    raise ValueError(f"unknown setting {setting!r}; choose from {', '.join(SETTINGS)}")


REPEAT_MAX_TOKENS = 32768
"""The reference's MAX_SEQ_LEN in run_repeat.py: n_repeat is capped so that the repeated block
stays within it."""


def repeat_count(n_task: int, block_tokens: int) -> int:
    """n_repeat of the reference's run_repeat.py: one copy per task, but no more than
    REPEAT_MAX_TOKENS // (tokens of one task block), and at least one."""
    return max(1, min(n_task, REPEAT_MAX_TOKENS // max(block_tokens, 1)))


def repeated_demonstrations(spec: StreamSpec, task: LliclTask) -> list[Mapping[str, str]]:
    """The demonstrations ``spec.repeats`` times (default ``len(stream)``), as the reference
    code's Repeat setting does (the instruction appears once); for repeat-shuffle, copies 2..
    are shuffled, seeded by (seed, task, resample, permutation) so every machine builds the same
    prompt."""
    demos = list(task.demonstrations(spec.resample, spec.n_shot))
    copies = [list(demos)]
    rng = random.Random(case_seed(spec.seed, "repeat-shuffle", task.name, spec.resample,
                                  spec.trial))
    for _ in range((spec.repeats or len(spec.stream)) - 1):
        copy = list(demos)
        if spec.setting == "repeat-shuffle":
            rng.shuffle(copy)
        copies.append(copy)
    return [row for copy in copies for row in copy]


def stream_subset(task_set: Sequence[str], n_task: int, seed: int) -> tuple[str, ...]:
    """The tasks of a Scale-Task length setting, as the reference's run.py picks them: the
    first ``n_task`` of the task set shuffled by ``random.Random(seed).sample`` (its
    ``generate_random_permutations(task_list, len, 1, seed)``), so smaller settings are nested
    in larger ones; the whole set, in its order, when ``n_task`` is its size."""
    if n_task > len(task_set):
        raise ValueError(f"{n_task} tasks asked of a set of {len(task_set)}")
    if n_task == len(task_set):
        return tuple(task_set)
    return tuple(random.Random(seed).sample(list(task_set), len(task_set))[:n_task])


def permutations(tasks: Sequence[str], count: int, seed: int) -> list[tuple[str, ...]]:
    """``count`` permutations of ``tasks`` as the reference's ``create_permutation`` draws them
    (successive ``sample``s of one ``random.Random(seed)``), so with the default seed 42 the
    streams are the paper's; the first k are the same for any count >= k, so
    --haystack-permutations=2 runs the first two of the default five."""
    rng = random.Random(seed)
    return [tuple(rng.sample(list(tasks), len(tasks))) for _ in range(count)]


def depth_percent(index: int, size: int) -> float:
    """Depth of stream position ``index`` of ``size``: 0 % = first block, 100 % = last."""
    return 100.0 * index / (size - 1) if size > 1 else 100.0


def irrelevant_prose(essays: Sequence[str], encode: Tokenize, decode: Detokenize,
                     n_tokens: int) -> str:
    """``n_tokens`` tokens of essay prose for the Random setting, as the reference's
    ``get_irrelevant_context`` makes it: the essays joined as they are, in order, repeated until
    they reach ``n_tokens``, cut at exactly that many tokens (mid-word if it falls there) and
    decoded."""
    if n_tokens <= 0 or not essays:
        return ""
    text = "".join(essays)
    rounds = 1
    while len(ids := _encoded(encode, text * rounds)) < n_tokens:
        rounds += 1
    return decode(ids[:n_tokens])


@functools.lru_cache(maxsize=4)
def _encoded(encode: Tokenize, text: str) -> list[int]:
    """The essays' tokens, kept: every Random cell of a run cuts the same text."""
    return encode(text)
