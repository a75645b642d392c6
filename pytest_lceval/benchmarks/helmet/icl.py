"""HELMET's many-shot in-context learning (suite ``icl``; HELMET ``data.py`` ``load_icl``,
``configs/icl*.yaml``): TREC coarse/fine, NLU, BANKING77 and CLINC150 by task x length.

A prompt is HELMET's instruction, demonstrations ``"{text}\\nlabel: {id}"`` separated by blank
lines, the test text and the answer prefix ``label:``. Class names never appear: each test input
gets its own random map from class to integer (HELMET's default, not ``natural_label``), drawn
from a seed of that input, so the model must learn the map from the demonstrations.

Demonstrations come in HELMET's balanced rounds: round r holds one example of every class in a
shuffled order; ``s`` shots are the first ``s`` of ``ceil(s / classes)`` rounds. HELMET fixes
``s`` per length in its configs (e.g. 400 TREC shots at 8k); here ``s`` is the largest count
whose rendered prompt plus the generation budget fits the cell's exact token budget. The demo
draw depends on the round count, as in HELMET, so different lengths show different demos.

Seeds are HELMET's, so the same data gives HELMET's prompts: test inputs, when the test split
has more than N (``--samples``) inputs, are N label-balanced ones from a shuffle seeded by the run
seed (the same at every length, so the lengths pair); each input's label map and demonstrations
come from a seed of its text's SHA-256 plus the run seed, the map a shuffle of HELMET's fixed
class count (``num_labels``). Scoring: ``label:`` + the output (without a chat template, as
``eval.py`` scores it) parsed by HELMET's ``parse_output`` (the text after ``label:``, else the
first line) and exact match after SQuAD normalisation; 20 new tokens, no chat template, no stop
(HELMET's released code; ``--lceval-stop-newline=config`` stops at the first newline, as its
config intends).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from ...foundation.data import DataSource
from ...foundation.grid import Cell
from ...results.records import Case
from ...results.score_metric import LABEL_ACCURACY, ScoreMetric
from ...tasks.base import BuildContext, GenerationTask
from ...tasks.fitting import Fitted, Frame, fit
from ...tasks.metrics import normalize_answer
from ...tasks.packing import Packer
from .icl_data import (
    BANKING77,
    CLINC150,
    NLU,
    TREC_COARSE,
    TREC_FINE,
    Example,
    LabelledSet,
    Layout,
    load,
)
from .output import OUTPUT_PREFIX, helmet_parse_output, helmet_scored
from .pipeline import shuffled

INSTRUCTION = ("Use the provided mapping from the text to label to assign a label to the text. "
               "Only output \"label: {label}\" and nothing else. \n\n")
"""HELMET's user template up to its demonstrations (the trailing space is HELMET's)."""
ANSWER_PREFIX = "label:"
CUE = "\n" + ANSWER_PREFIX
"""How HELMET's ``prompt_template`` ends a raw prompt after the user text."""
DEMO = "{text}\nlabel: {label}"
SEPARATOR = "\n\n"
MAX_NEW_TOKENS = 20
"""HELMET's ``generation_max_length`` for ICL."""
USE_CHAT_TEMPLATE = False
"""HELMET's ``use_chat_template`` for ICL (configs/icl.yaml)."""
STOP_NEW_LINE = True
"""configs/icl.yaml's ``stop_new_line``, which HELMET's released code never reads."""


def balanced(examples: Sequence[Example], shots: int, seed: int) -> list[Example]:
    """HELMET's ``balance_labels``: ``ceil(shots / classes)`` rounds, each one example per class
    (classes in order of first appearance; within a class drawn without replacement until the
    class runs out) in a shuffled order, cut to ``shots``."""
    rng = random.Random(seed)
    by_class: dict[int, list[Example]] = {}
    for example in examples:
        by_class.setdefault(example.label, []).append(example)
    rounds = math.ceil(shots / len(by_class))
    sets: list[list[Example]] = [[] for _ in range(rounds)]
    for members in by_class.values():
        # HELMET's draw, quirk included: it first samples rounds % size indices.
        picks = rng.sample(range(len(members)), rounds % len(members))
        while len(picks) < rounds:
            picks += rng.sample(range(len(members)), min(rounds - len(picks), len(members)))
        for round_, pick in zip(sets, picks, strict=True):
            round_.append(members[pick])
    for round_ in sets:
        rng.shuffle(round_)
    return [example for round_ in sets for example in round_][:shots]


def select_tests(data: LabelledSet, samples: int, seed: int) -> tuple[Example, ...]:
    """HELMET's test selection with ``max_test_samples = samples``: a larger test split is
    shuffled as ``datasets.Dataset.shuffle(seed)`` does and cut to label-balanced rounds."""
    if len(data.test) <= samples:
        return data.test
    return tuple(balanced([data.test[i] for i in shuffled(len(data.test), seed)], samples, seed))


def input_seed(text: str, seed: int) -> int:
    """HELMET's seed of one test input's label map and demonstrations."""
    return (int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) + seed) % 2**31


def label_map(classes: int, seed: int) -> list[int]:
    """The integer each class id is shown as (HELMET: a seeded shuffle of range(classes))."""
    mapping = list(range(classes))
    random.Random(seed).shuffle(mapping)
    return mapping


def parse_label(output: str) -> str:
    """HELMET's ``parse_output`` with prefix ``label:``."""
    return helmet_parse_output(output, ANSWER_PREFIX)


@dataclass(frozen=True)
class Demos:
    """A context of demonstrations and its predicted token count (fitting.Built)."""

    text: str
    tokens: int
    shots: int


class DemoFill:
    """The demonstrations of one test input for any budget: the most shots whose predicted
    tokens fit. Whole rounds are measured (memoised, since fitting asks several budgets) and
    searched from a guess; the last, partial round is cut by its running cost."""

    def __init__(self, data: LabelledSet, seed: int, mapping: list[int], packer: Packer) -> None:
        self.data = data
        self.seed = seed
        self.mapping = mapping
        self.packer = packer
        self._rounds: dict[int, tuple[list[Example], list[int]]] = {}

    def cost(self, example: Example) -> int:
        """Predicted tokens of a demonstration with its separator."""
        return (self.packer.cost(f"{SEPARATOR}{example.text}\n{ANSWER_PREFIX}")
                + self.packer.cost(f" {self.mapping[example.label]}"))

    def line(self, example: Example) -> str:
        return DEMO.format(text=example.text, label=self.mapping[example.label])

    def demos(self, shots: int) -> Demos:
        chosen, running = self._round(math.ceil(shots / self.data.train_classes))
        text = SEPARATOR.join(self.line(example) for example in chosen[:shots])
        return Demos(text, running[shots - 1], shots)

    def __call__(self, budget: int) -> Demos:
        """The most shots (at least one) whose predicted cost is within ``budget``."""
        classes = self.data.train_classes
        rounds = self._whole_rounds(budget)
        _, running = self._round(rounds + 1)
        partial = sum(1 for cost in running if cost <= budget)
        return self.demos(max(partial, rounds * classes, 1))

    def _round(self, rounds: int) -> tuple[list[Example], list[int]]:
        """The demonstrations of ``rounds`` whole rounds and their running predicted cost."""
        if rounds not in self._rounds:
            chosen = balanced(self.data.train, rounds * self.data.train_classes, self.seed)
            running, total = [], 0
            for example in chosen:
                total += self.cost(example)
                running.append(total)
            self._rounds[rounds] = chosen, running
        return self._rounds[rounds]

    def _fits(self, rounds: int, budget: int) -> bool:
        return rounds == 0 or self._round(rounds)[1][-1] <= budget

    def _whole_rounds(self, budget: int) -> int:
        """The most whole rounds within ``budget``: gallop from the one-round estimate, then
        bisect (a round's cost varies little, so the estimate is close)."""
        guess = max(1, budget // max(self._round(1)[1][-1], 1))
        if self._fits(guess, budget):
            low, step = guess, 1
            while self._fits(low + step, budget):
                low, step = low + step, step * 2
            high = low + step
        else:
            low, high = 0, guess
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if self._fits(middle, budget) else (low, middle)
        return low


@dataclass(frozen=True)
class IclTask:
    """One ICL data set; cells differ by length only."""

    metric: ClassVar[ScoreMetric] = LABEL_ACCURACY
    name: str
    layout: Layout
    num_labels: int
    """HELMET's class count for the set, which its label map shuffles (``load_icl``)."""
    uses_depth: bool = False
    use_chat_template: bool = USE_CHAT_TEMPLATE
    stop_new_line: bool = STOP_NEW_LINE
    max_new_tokens: int = MAX_NEW_TOKENS

    def missing_data(self, data: DataSource) -> str | None:
        if data.folder(self.layout.folder) is not None:
            return None
        return f"{self.layout.folder}/ ({self.layout.files}) in --lceval-data"

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        data = load(context.data, self.layout, self.name)
        tests = select_tests(data, cell.samples, context.seed)
        return [self._case(cell, context, data, index, example)
                for index, example in enumerate(tests)]

    def score(self, output: str, case: Case) -> float:
        label = parse_label(helmet_scored(output, case.meta))
        return float(normalize_answer(label) == normalize_answer(case.gold[0]))

    def _case(self, cell: Cell, context: BuildContext, data: LabelledSet, index: int,
              example: Example) -> Case:
        # Seeded by the test text, as HELMET's per-input seed: the same input gets the same map
        # and demos at every length (up to the number of rounds).
        seed = input_seed(example.text, context.seed)
        mapping = label_map(self.num_labels, seed)
        fill = DemoFill(data, seed, mapping, Packer(context, lambda text: text))
        frame = Frame(INSTRUCTION, SEPARATOR + example.text, CUE)
        longest = max(data.train, key=lambda e: len(e.text))
        fitted: Fitted[Demos] = fit(
            frame, fill, context.renderer, cell.length, self.max_new_tokens,
            fill.demos(1).tokens, f"{self.name} at {cell.length} tokens", fill.cost(longest))
        classes = data.train_classes
        meta = {"source": data.source, "shots": fitted.context.shots,
                "whole_rounds": fitted.context.shots // classes, "classes": classes,
                "chance": round(1 / classes, 6), "label_name": data.classes[example.label],
                "context_tokens": fitted.context.tokens,
                OUTPUT_PREFIX: "" if context.renderer.uses_template else ANSWER_PREFIX}
        return Case(index=index, prompt=fitted.rendered, gold=(str(mapping[example.label]),),
                    prompt_tokens=fitted.prompt_tokens, depth=None,
                    max_new_tokens=self.max_new_tokens,
                    chat=context.renderer.chat_source(fitted.prompt), meta=meta)


# HELMET's dataset names without their shot counts ("clinic150" is HELMET's spelling).
TASKS: tuple[GenerationTask, ...] = (
    IclTask("icl_trec_coarse", TREC_COARSE, 6),
    IclTask("icl_trec_fine", TREC_FINE, 50),
    IclTask("icl_nlu", NLU, 68),
    IclTask("icl_banking77", BANKING77, 77),
    IclTask("icl_clinic150", CLINC150, 151),
)
