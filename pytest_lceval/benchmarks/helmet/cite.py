"""HELMET's generation with citations (suite ``cite``): ALCE's ASQA and QAMPARI, task x length.

The prompt is HELMET's (``data.py`` ``load_alce``): two demonstrations drawn from its prompt file
(read from the data directory beside ALCE's file; the substitute builds one in its format),
each with its five documents and its cited answer, then the instruction, the question and the
numbered documents ``Document [k](Title: ...): ...``. HELMET fixes the number of documents per
length (30 at 8k ... 700 at 128k) and cuts the context's end to fit; here the documents are taken
in retrieval order while the rendered prompt plus the 300-token generation budget fits the cell,
so the count follows the tokenizer. HELMET's cite config uses the chat template; without one the
prompt ends in "Answer:" as HELMET's completion prompt does, and the output is scored after
"Answer:" as HELMET's ``eval.py`` scores it.

Which questions, with which demonstrations, as HELMET chooses them: the first N of the file in
the order of ``Dataset.shuffle(seed)`` (``load_data``), and for each the pair the global
``random.sample`` gave its row after ``random.seed(seed)`` (``demo_draws``); the same at every
length. The substitute holds the last 200 questions of that order out as its demonstrations'
pool.

Correctness is the case score (ASQA: STR-EM; QAMPARI: recall-5). Citation recall and precision
need an entailment scorer (``cite_plugin``, ``--lceval-cite-nli``): ``cell_metrics`` (the
suite's ``CountsOutputs`` hook) records them per cell when one is set, with HELMET's Cite number
(their mean with correctness), and records them as None with ``citation_scorer: "absent"`` when
not. As ALCE, a citation is checked against the question's retrieved documents whether the
prompt showed them or not. The scorer is never a model under test: the plugin offers it as the
scoring model ``NLI_SCORER`` and the task gets it, behind the store, in ``cell_metrics``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from ...foundation.data import DataSource
from ...foundation.grid import Cell, case_seed
from ...models.scoring import ScoringModel
from ...results.records import Case, Prompt
from ...results.score_metric import RECALL_AT_5, STR_EM, ScoreMetric
from ...tasks.base import BuildContext, CellDoesNotFit, GenerationTask
from ...tasks.packing import depth_of
from .cite_data import (
    DEMO_POOL,
    SUBSTITUTE,
    Demos,
    load_alce,
    load_demos,
    load_nq,
    missing,
    source_of,
    substitute_demos,
)
from .cite_metrics import (
    Document,
    Entailment,
    citation_scores,
    clean_output,
    qampari_claims,
    qampari_scores,
    sentences,
    str_em,
)
from .output import OUTPUT_PREFIX, helmet_scored
from .pipeline import shuffled

SHOTS = 2
"""HELMET's ``shots: 2``, drawn per case from the prompt file's four demonstrations."""
MAX_NEW_TOKENS = 300
"""HELMET's ``generation_max_length`` for ALCE; ``stop_new_line: false``, so no stop string."""
USE_CHAT_TEMPLATE = True
"""HELMET's ``use_chat_template`` for cite (configs/cite.yaml)."""
ANSWER = "Answer:"
"""HELMET's ``system_template`` for ALCE."""
ANSWER_PREFIX = f"\n\n{ANSWER}"
"""HELMET's completion prompt ends so (``prompt_template``) when no chat template is used."""
HEADLINE = "helmet_cite"
"""HELMET's Cite number for the cell (``scripts/collect_results.py``): the mean of correctness
(STR-EM or recall-5), citation recall and citation precision; None without a scorer."""
NO_SCORER_NOTE = ("citation recall/precision not measured: no entailment scorer; pass "
                  "--lceval-cite-nli=hf:/path/to/nli-model")

NLI_SCORER = "cite_nli"
"""The scoring model's name (``cite_plugin`` offers it from --lceval-cite-nli); also its role in
the run's usage counts."""


@dataclass(frozen=True)
class CiteTask:
    name: str
    kind: str
    """'asqa' (a long answer scored by STR-EM) or 'qampari' (a list scored by recall-5)."""
    alce_file: str
    demo_file: str
    uses_depth: bool = False
    use_chat_template: bool = USE_CHAT_TEMPLATE
    max_new_tokens: int = MAX_NEW_TOKENS

    @property
    def metric(self) -> ScoreMetric:
        """Correctness as ALCE measures it for the kind of answer."""
        return STR_EM if self.kind == "asqa" else RECALL_AT_5

    def missing_data(self, data: DataSource) -> str | None:
        return missing(data, self.alce_file, self.demo_file)

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        path, source = source_of(context.data, self.alce_file, self.demo_file)
        pool = load_nq(path) if source == SUBSTITUTE else None
        questions = pool.questions if pool is not None else load_alce(path, self.kind)
        order = shuffled(len(questions), context.seed)
        if pool is not None:  # the substitute's demonstrations come from held-out questions
            order, held_out = order[:-DEMO_POOL], order[-DEMO_POOL:]
            demos = substitute_demos(self.kind, pool, held_out,
                                     case_seed(context.seed, self.name, "demos"))
        else:
            demos = load_demos(path.parent / self.demo_file)
        if cell.samples > len(order):
            raise CellDoesNotFit(f"{cell.samples} samples asked, {path} has {len(order)} "
                                 f"test questions")
        draws = demo_draws(len(questions), demos.demos, context.seed)
        cases = []
        for index, chosen in enumerate(order[:cell.samples]):
            rng = random.Random(case_seed(context.seed, self.name, index))
            shots = draws[chosen]
            question = questions[chosen]
            if pool is None:
                documents, gold = list(question.documents), None
            else:
                gold, others = pool.documents(rng, chosen)
                documents = [gold, *others]
            frame = _Frame(demos, shots, question.question, context.renderer.uses_template)

            def render(docs: Sequence[Document], frame: _Frame = frame) -> str:
                return context.renderer.render(frame.prompt(docs))

            shown, rendered, tokens = _fit(render, documents, gold, rng.random(), context,
                                           cell.length - self.max_new_tokens)
            depth = None if gold is None else depth_of(
                demos.context(shown), demos.document(shown.index(gold) + 1, gold))
            first_aliases = tuple(reading[0] for reading in question.readings)
            shown_ids = {id(document) for document in shown}
            cases.append(Case(
                index, rendered, first_aliases, tokens, depth, self.max_new_tokens, (),
                context.renderer.chat_source(frame.prompt(shown)),
                meta={"source": source, "passages": len(shown), "question": question.question,
                      "readings": question.readings,
                      # ALCE checks a citation [k] against the k-th retrieved document, shown
                      # or not (eval_alce.py reads the record's whole ``docs``)
                      "documents": (*shown, *(document for document in documents
                                              if id(document) not in shown_ids)),
                      OUTPUT_PREFIX: "" if context.renderer.uses_template else ANSWER,
                      "prompt_file": demos,
                      "demos": tuple(demos.demos.index(shot) for shot in shots)}))
        return cases

    def score(self, output: str, case: Case) -> float:
        readings = case.meta["readings"]
        if self.kind == "asqa":
            return str_em(helmet_scored(output, case.meta), readings)
        return qampari_scores(helmet_scored(output, case.meta), readings).recall_top5

    def cell_metrics(self, outputs: Sequence[str], cases: Sequence[Case],
                     scoring: Mapping[str, ScoringModel]) -> dict[str, Any]:
        """Per-cell numbers beside the mean score: QAMPARI's precision, and citation recall
        and precision by the ``NLI_SCORER`` scoring model (or why they are absent)."""
        metrics: dict[str, Any] = {}
        if self.kind == "qampari":
            metrics["qampari_precision"] = fmean(
                qampari_scores(helmet_scored(output, case.meta), case.meta["readings"]).precision
                for output, case in zip(outputs, cases, strict=True)) if cases else None
        nli = scoring.get(NLI_SCORER)
        if nli is None:
            return {**metrics, "citation_recall": None, "citation_precision": None,
                    HEADLINE: None, "citation_scorer": "absent", "citation_note": NO_SCORER_NOTE}
        scorer = Entailment(nli)
        judged = [citation_scores(self.claims(output, case), case.meta["documents"], scorer)
                  for output, case in zip(outputs, cases, strict=True)]
        answered = [scores for scores in judged if scores is not None]
        # ALCE's means over the answers that make a claim; 0 when none does
        recall = fmean(s.recall for s in answered) if answered else 0.0
        precision = fmean(s.precision for s in answered) if answered else 0.0
        correctness = fmean(self.score(output, case)
                            for output, case in zip(outputs, cases, strict=True)) if cases else 0.0
        return {**metrics, "citation_scorer": scorer.label, "citation_answers": len(answered),
                "citation_recall": recall, "citation_precision": precision,
                HEADLINE: fmean((correctness, recall, precision))}

    def claims(self, output: str, case: Case) -> list[str]:
        """The answer's claims as ALCE cuts them: sentences (ASQA) or list items (QAMPARI)."""
        text = clean_output(helmet_scored(output, case.meta))
        if self.kind == "asqa":
            return sentences(text)
        return qampari_claims(case.meta["question"], text)


@dataclass(frozen=True)
class _Frame:
    """HELMET's prompt around the documents: demonstrations, instruction, question."""

    demos: Demos
    shots: Sequence[dict[str, Any]]
    question: str
    templated: bool

    def prompt(self, documents: Sequence[Document]) -> Prompt:
        demo_text = "".join(self.demos.demonstration(demo) + "\n\n\n" for demo in self.shots)
        user = (f"{demo_text}{self.demos.instruction}\n\nQuestion: {self.question}\n\n"
                f"{self.demos.context(documents)}")
        return Prompt(user, "" if self.templated else ANSWER_PREFIX)


def demo_draws(count: int, demos: Sequence[dict[str, Any]], seed: int
               ) -> list[list[dict[str, Any]]]:
    """The two demonstrations of each of ``count`` questions in file order, as HELMET draws
    them: ``eval.py`` seeds the global ``random`` with the run seed, then ``load_alce`` maps over
    every row of the file, each calling ``random.sample`` of the prompt file's demonstrations
    (so a question's pair depends on its place in the file, not on which questions are asked)."""
    rng = random.Random(seed)
    return [rng.sample(list(demos), SHOTS) for _ in range(count)]


def _fit(render: Callable[[Sequence[Document]], str], documents: list[Document],
         gold: Document | None, place: float, context: BuildContext,
         budget: int) -> tuple[list[Document], str, int]:
    """The documents shown: a prefix of ``documents`` in order (the gold one, first in
    ``documents`` when there is one, moved to ``place`` of the prefix) whose rendered prompt fits
    ``budget`` tokens. Costs are estimated per document, then the prompt is counted and the last
    non-gold document dropped until it fits."""
    fixed = context.renderer.count(render([]))
    room = budget - fixed
    taken: list[Document] = []
    for document in documents:
        cost = len(context.tokenizer.encode(f"\n\nDocument [10](Title: {document.title}): "
                                            f"{document.text}"))
        if cost > room:
            break
        taken.append(document)
        room -= cost
    while True:
        shown = _placed(taken, gold, place)
        if not shown:
            raise CellDoesNotFit(
                f"instructions, {SHOTS} demonstrations and question take {fixed} tokens; no "
                f"{'gold ' if gold is not None else ''}document fits the prompt budget of "
                f"{budget} tokens")
        rendered = render(shown)
        tokens = context.renderer.count(rendered)
        if tokens <= budget:
            return shown, rendered, tokens
        droppable = [i for i, document in enumerate(taken) if document is not gold]
        if not droppable:
            raise CellDoesNotFit(f"the prompt with only the gold document takes {tokens} "
                                 f"tokens; the prompt budget is {budget} tokens")
        taken.pop(droppable[-1])


def _placed(documents: list[Document], gold: Document | None, place: float) -> list[Document]:
    if gold is None or gold not in documents:
        return documents
    others = [document for document in documents if document is not gold]
    position = int(place * (len(others) + 1))
    return [*others[:position], gold, *others[position:]]


ASQA = CiteTask("alce_asqa", "asqa", "asqa_eval_gtr_top2000.json", "asqa_revised.json")
QAMPARI = CiteTask("alce_qampari", "qampari", "qampari_eval_gtr_top2000.json",
                   "qampari_revised.json")
TASKS: tuple[GenerationTask, ...] = (ASQA, QAMPARI)
