"""100-LongBench's length-controllable tasks (suite ``longbench100``; paper §3.1, A.2, A.3;
reference code github:uservan/100-LongBench, ``utils/data_utils.py``).

Every context is made of whole articles from the pool (``articles.py``): the answer-bearing ones
plus distractors, shuffled and packed until the prompt is just under the cell's length
(``packing.py``). Each article is numbered and laid out as the reference lays out that task's
articles; the reference's inserted lines (key-value pairs, penguin counts) are paragraphs of
their own between articles. Cases are deterministic in (task, length, sample index, seed). The
tasks place their key information at random, as the reference does, so they do not sweep depth;
each case records the depth it got and its chance level (``meta["chance"]``: the score of a
uniform guess among the answers the prompt allows).

- ``kv_retrieval``: three chained UUID pairs (v1 = k2, v2 = k3) as "The value of k is v."
  paragraphs before three articles; always asks the first key; the last UUID of the answer must
  equal its value.
- ``counting_stars``: "The little penguin counted N ★" before four articles; five numbered
  options ("unanswerable" first); the answer's first number must be the right option's.
- ``passage_retrieval``: the summary of one whole document; name its passage.
- ``passage_count``: whole articles, each repeated 1-3 times, shuffled; count the unique ones.
- ``single_doc_qa_yesno``: the judge-free variant of single-doc QA: a boolq yes/no question about
  one numbered passage, with the prior-knowledge filter (``probe``). The reference's open, judged
  QA and summary tasks (``judged_tasks.py``) are ``AboutArticles`` tasks too, with their own
  questions.
"""

from __future__ import annotations

import itertools
import random
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ...foundation.data import ESSAY_FOLDER, DataSource, Fallbacks
from ...foundation.grid import Cell, case_seed
from ...results.records import Case, Prompt
from ...results.score_metric import NUMBER_ACCURACY, ScoreMetric
from ...tasks.base import BuildContext, CellDoesNotFit
from ...tasks.packing import Fitted, Packer, Passage, depth_of
from .articles import QA_FOLDER, ArticlePool, load_pool
from .prior_knowledge import KnownFilter, exclude_known
from .text import (
    COUNT_PROMPT,
    KV_PAIR,
    KV_PROMPT,
    KV_QUESTION,
    QA_INSTRUCTION,
    QA_PROBE_PROMPT,
    QA_PROMPT,
    RETRIEVAL_PROMPT,
    STAR,
    STARS_PROMPT,
    STARS_QUESTION,
    UNANSWERABLE,
    YES_NO_INPUT,
    first_number,
    last_uuid,
    numbered_options,
    star_options,
    yes_or_no,
)

if TYPE_CHECKING:
    from ...run.evaluation import Evaluator

KV_PAIRS = 3
STARS = 4
DRAWS = 50
"""Draws of a KV or stars context before a cell is said not to fit (see among_articles)."""
MAX_COPIES = 3
"""Passage count: each article appears 1..MAX_COPIES times, as in the reference."""

Scorer = Callable[[str, Case], float]
"""Score 0..1 of one answer to one case (a judge can be one)."""


@dataclass(frozen=True)
class Draw:
    """What one case is built from."""

    rng: random.Random
    index: int
    pool: ArticlePool
    packer: Packer
    budget: int
    """Prompt tokens allowed (the cell's length less the generation budget)."""
    context: BuildContext


@dataclass(frozen=True)
class Layout:
    """A built case before it becomes a Case: the fitted prompt and what it asks for."""

    prompt: Prompt
    fitted: Fitted
    gold: tuple[str, ...]
    depth: float | None
    chance: float
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class LongBenchTask(ABC):
    """What the tasks share: the case loop, the budget, the context format."""

    metric: ClassVar[ScoreMetric] = NUMBER_ACCURACY
    """The reference's ``acc_score``; a task scored otherwise declares its own."""
    fallbacks: ClassVar[Fallbacks] = ((ESSAY_FOLDER, "its prose articles are self-made"),
                                      (QA_FOLDER, "its question articles are self-made"))
    """The pool's articles (``articles.py``) come from the fixtures without these folders."""
    name: str
    max_new_tokens: int
    """The reference's generation budget (``config/dataset2maxlen.json``)."""
    entry: str = "Passage {number}: {text}\n"
    """How a numbered article appears in the context, in the reference's layout for the task."""
    uses_depth: bool = False
    stop: tuple[str, ...] = ()
    """None: the reference generates its whole budget and scores the first line."""
    use_chat_template: bool = False
    """The reference runs local models on the raw prompt (``HFModel`` sets
    ``use_chat_template=False`` and tokenizes the prompt as it is), so ``--chat-template auto``
    renders these tasks without the model's template (``chat_choice``); ``on`` applies it."""

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        return self.cases(cell, context, self.layout)

    def cases(self, cell: Cell, context: BuildContext, layout_of: Callable[[Draw], Layout]
              ) -> list[Case]:
        """The cell's cases, each laid out by ``layout_of`` from its own seeded draw."""
        pool = self.pool(context.data)
        budget = cell.length - self.max_new_tokens
        cases = []
        for index in range(cell.samples):
            rng = random.Random(case_seed(context.seed, self.name, cell.length, cell.depth, index))
            layout = layout_of(Draw(rng, index, pool, Packer(context, self.unit), budget,
                                    context))
            cases.append(Case(
                index, layout.fitted.text, layout.gold, layout.fitted.tokens, layout.depth,
                self.max_new_tokens, self.stop, context.renderer.chat_source(layout.prompt),
                meta={"source": pool.source, "passages": len(articles(layout.fitted.passages)),
                      "chance": layout.chance, "order": order(layout.fitted.passages),
                      **layout.meta}))
        return cases

    def pool(self, data: DataSource) -> ArticlePool:
        """The articles the task's contexts are made of."""
        return load_pool(data)

    @abstractmethod
    def layout(self, draw: Draw) -> Layout:
        """One case's context and question, fitted to ``draw.budget`` prompt tokens."""

    @abstractmethod
    def score(self, output: str, case: Case) -> float:
        """Score 0..1 of one answer."""

    # -- helpers shared by the tasks ----------------------------------------------------------

    def unit(self, text: str) -> str:
        """How an article appears in the context, for cost estimates: its trailing whitespace
        moved to the front, where the previous article's sits in a context (a tokenizer that
        merges whitespace into the next word would count it twice at the end)."""
        entry = self.entry.format(number=10, text=text)
        body = entry.rstrip()
        return entry[len(body):] + body

    @staticmethod
    def line_cost(draw: Draw, lines: Sequence[str]) -> int:
        """Tokens that inserted lines add to a context, paragraph breaks included."""
        return sum(len(draw.context.tokenizer.encode(f"\n\n{line}")) for line in lines)

    def context_text(self, passages: Sequence[Passage]) -> str:
        """Articles numbered from 1 in the task's layout; inserted lines (``article`` -1) as
        paragraphs of their own, unnumbered, as the reference writes them."""
        parts, number = [], 0
        for passage in passages:
            if passage.article < 0:
                parts.append(f"\n\n{passage.text}\n\n")
            else:
                number += 1
                parts.append(self.entry.format(number=number, text=passage.text))
        return "".join(parts)

    def renderer_for(self, draw: Draw, prompt: Callable[[Sequence[Passage]], Prompt]) -> \
            Callable[[Sequence[Passage]], str]:
        return lambda passages: draw.context.renderer.render(prompt(passages))

    def among_articles(self, draw: Draw, lines: Sequence[str], in_order: bool,
                       render: Callable[[Sequence[Passage]], str]) -> Fitted:
        """Articles packed beside ``lines`` (key-value pairs, penguin counts), each line before
        a different one. As the reference, a context with fewer than one article per line plus
        one is drawn again (its ``if len(choices) < ...: continue``); after ``DRAWS`` tries the
        cell does not fit."""
        packer = draw.packer
        room = packer.room(render, [], draw.budget, self.line_cost(draw, lines))
        least = len(lines) + 1
        for _ in range(DRAWS):
            candidates = list(distractors(draw.rng, draw.pool))
            found = packer.fill(candidates, room)
            if len(found) >= least:
                fitted = packer.fit(interleave(draw.rng, found, lines, in_order), render,
                                    draw.budget, spares(candidates, found))
                if len(articles(fitted.passages)) >= least and separate(fitted.passages):
                    return fitted
        raise CellDoesNotFit(f"{DRAWS} draws of articles never put {least} beside the "
                             f"{len(lines)} inserted lines in {room} tokens (budget "
                             f"{draw.budget})")


def articles(passages: Sequence[Passage]) -> list[Passage]:
    """The numbered articles of a context (inserted lines left out)."""
    return [passage for passage in passages if passage.article >= 0]


def spares(candidates: Sequence[Passage], packed: Sequence[Passage]) -> list[Passage]:
    """The candidates left out of a packed context, in their drawn order."""
    taken = set(packed)
    return [passage for passage in candidates if passage not in taken]


def order(passages: Sequence[Passage]) -> list[int | str]:
    """The context in order: each article's pool index, each inserted line's text."""
    return [passage.article if passage.article >= 0 else passage.text for passage in passages]


def distractors(rng: random.Random, pool: ArticlePool, among: Sequence[int] | None = None,
                exclude: Collection[int] = ()) -> Iterator[Passage]:
    """The pool's articles (or those of ``among``) but ``exclude``, in a random order."""
    order = [i for i in (range(len(pool.articles)) if among is None else among)
             if i not in exclude]
    rng.shuffle(order)
    return (Passage(pool.articles[i].text, i) for i in order)


def interleave(rng: random.Random, passages: list[Passage], lines: Sequence[str],
               in_order: bool) -> list[Passage]:
    """``lines`` as pinned paragraphs, each before a different article chosen at random (the
    reference's ``random.sample`` of positions); ``in_order``: the lines keep their order in the
    context, else their order is random too."""
    positions = rng.sample(range(len(passages)), len(lines))
    if in_order:
        positions.sort()
    before = {position: Passage(line, pinned=True) for line, position in zip(lines, positions,
                                                                              strict=True)}
    return [item for i, passage in enumerate(passages)
            for item in ([before[i]] if i in before else []) + [passage]]


def separate(passages: Sequence[Passage]) -> bool:
    """Every inserted line is directly followed by an article (so no two share one), as the
    reference places them."""
    return all(passage.article >= 0 for previous, passage in itertools.pairwise(passages)
               if previous.article < 0) and (not passages or passages[-1].article >= 0)


def _random_key(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _require(passages: list[Passage], what: str, room: int, budget: int) -> list[Passage]:
    if not passages:
        raise CellDoesNotFit(f"no article fits {what}: {room} tokens are left for articles "
                             f"within the budget of {budget} tokens")
    return passages


class KVRetrieval(LongBenchTask):
    metric: ClassVar[ScoreMetric] = ScoreMetric(
        "accuracy", "1 when the last UUID of the answer is the gold value (100-LongBench's "
                    "kv_retrieval_score)")

    def layout(self, draw: Draw) -> Layout:
        rng = draw.rng
        keys = [_random_key(rng) for _ in range(KV_PAIRS + 1)]
        pairs = [KV_PAIR.format(key=keys[i], value=keys[i + 1]) for i in range(KV_PAIRS)]
        question = KV_QUESTION.format(key=keys[0])

        def prompt(passages: Sequence[Passage]) -> Prompt:
            return Prompt(KV_PROMPT.format(context=self.context_text(passages), input=question))

        fitted = self.among_articles(draw, pairs, False, self.renderer_for(draw, prompt))
        return Layout(prompt(fitted.passages), fitted, (keys[1],),
                      depth_of(self.context_text(fitted.passages), pairs[0]),
                      1 / len(keys), {"key": keys[0]})

    def score(self, output: str, case: Case) -> float:
        return float(last_uuid(output) == case.gold[0])


class CountingStars(LongBenchTask):
    def layout(self, draw: Draw) -> Layout:
        rng = draw.rng
        counts = [rng.randint(1, 100) for _ in range(STARS)]
        options = [UNANSWERABLE, *map(str, star_options(rng, counts))]
        answer = options.index(str(counts)) + 1
        question = STARS_QUESTION.format(options=numbered_options(options))
        stars = [STAR.format(count=count) for count in counts]

        def prompt(passages: Sequence[Passage]) -> Prompt:
            return Prompt(STARS_PROMPT.format(context=self.context_text(passages),
                                              input=question))

        fitted = self.among_articles(draw, stars, True, self.renderer_for(draw, prompt))
        return Layout(prompt(fitted.passages), fitted, (str(answer), str(counts)), None,
                      1 / len(options), {"options": options})

    def score(self, output: str, case: Case) -> float:
        return float(first_number(output) == case.gold[0])


class PassageRetrieval(LongBenchTask):
    """Distractors are summarised documents too, as in the reference."""

    def layout(self, draw: Draw) -> Layout:
        rng, packer, pool = draw.rng, draw.packer, draw.pool
        gold, summary, room = self._gold(draw)

        def prompt(passages: Sequence[Passage]) -> Prompt:
            return Prompt(RETRIEVAL_PROMPT.format(context=self.context_text(passages),
                                                  input=summary))

        candidates = list(distractors(rng, pool, pool.summarised, (gold.article,)))
        passages = packer.fill(candidates, room)
        passages.insert(rng.randrange(len(passages) + 1), gold)
        fitted = packer.fit(passages, self.renderer_for(draw, prompt), draw.budget,
                            spares(candidates, passages))
        return _numbered_gold(self, prompt, fitted, gold, {"summary": summary})

    def _gold(self, draw: Draw) -> tuple[Passage, str, int]:
        """A random summarised document that fits beside its summary (the reference draws among
        documents shorter than the length left), and the room left for distractors."""
        need = []
        for candidate in distractors(draw.rng, draw.pool, draw.pool.summarised):
            summary = draw.pool.articles[candidate.article].summary
            fixed = draw.packer.count(draw.context.renderer.render(Prompt(
                RETRIEVAL_PROMPT.format(context="", input=summary))))
            room = draw.budget - fixed - draw.packer.cost(candidate.text)
            if room >= 0:
                return Passage(candidate.text, candidate.article, pinned=True), summary, room
            need.append(draw.budget - room)
        raise CellDoesNotFit(f"no summarised document fits beside its summary and the "
                             f"instructions: the smallest takes {min(need, default=0)} tokens, "
                             f"the budget is {draw.budget} tokens")

    def score(self, output: str, case: Case) -> float:
        return float(first_number(output) == case.gold[0])


class PassageCount(LongBenchTask):
    def layout(self, draw: Draw) -> Layout:
        rng, packer = draw.rng, draw.packer

        def prompt(passages: Sequence[Passage]) -> Prompt:
            return Prompt(COUNT_PROMPT.format(context=self.context_text(passages)))

        render = self.renderer_for(draw, prompt)
        room = left = packer.room(render, [], draw.budget)
        repeated: list[Passage] = []
        seen: set[str] = set()
        for article in distractors(rng, draw.pool):
            # 1-3 copies as the reference draws them, fewer when only fewer fit: an article is
            # left out only when not even one copy fits, so the prompt ends within one article
            # of its length. A text already drawn (boolq has passages under two questions) is
            # passed over, or the count would hold two "unique" paragraphs that read the same.
            if article.text in seen:
                continue
            seen.add(article.text)
            cost = packer.cost(article.text)
            copies = min(rng.randint(1, MAX_COPIES), left // cost)
            if copies:
                repeated += [article] * copies
                left -= cost * copies
        _require(repeated, "beside the instructions", room, draw.budget)
        rng.shuffle(repeated)
        fitted = packer.fit(repeated, render, draw.budget)
        unique = len({passage.article for passage in fitted.passages})
        return Layout(prompt(fitted.passages), fitted, (str(unique),), None,
                      1 / len(fitted.passages), {"repeated": len(fitted.passages) - unique})

    def score(self, output: str, case: Case) -> float:
        return float(first_number(output) == case.gold[0])


def score_yes_no(output: str, case: Case) -> float:
    """The judge-free scorer: the answer's first 'yes' or 'no' against the gold one."""
    return float(yes_or_no(output) == case.gold[0])


@dataclass(frozen=True)
class Question:
    """What a case asks about some of the pool's articles."""

    text: str
    """The task's input: a question, or a summary's query ("" for none)."""
    answers: tuple[str, ...]
    """The correct answers, or the reference summaries."""
    articles: tuple[int, ...]
    """Pool indices of the articles it is about, pinned in the context."""
    key: int
    """Identifies the question in results (``meta["question_id"]``)."""


@dataclass
class AboutArticles(LongBenchTask):
    """A task that asks about some whole articles (a question's), each pinned at a random place
    among distractors, numbered as the reference numbers passages.

    A case's question depends on the task and the sample index only, never on the length, so
    every length of a task asks the same questions (and the prior-knowledge filter probes the
    same ones). Distractors come from ``fillers`` (None: the whole pool).
    """

    entry: str = "Passage {number}:\n{text}\n\n"
    chance: float = 0.0
    """The score of a uniform guess among the answers the prompt allows."""
    substitute: str = ""
    """What data stands in for the reference's where the data directory lacks it (results say
    so in ``meta["substitute"]``)."""
    shuffle_alone: bool = True
    """Whether the base's passages (``alone``) are shuffled, as the reference's multi-doc
    summary base shuffles its passages; else they keep the question's order."""

    @abstractmethod
    def questions(self, draw: Draw) -> Sequence[Question]:
        """Every question the task can ask, in a fixed order."""

    @abstractmethod
    def prompt(self, asked: Question, passages: Sequence[Passage]) -> Prompt:
        """The prompt about ``asked`` with ``passages`` as its context."""

    def fillers(self, draw: Draw) -> Sequence[int] | None:
        return None

    def layout(self, draw: Draw) -> Layout:
        rng, packer, pool = draw.rng, draw.packer, draw.pool
        asked = self.asked(draw)
        pinned = [Passage(pool.articles[i].text, i, pinned=True) for i in asked.articles]

        def prompt(passages: Sequence[Passage]) -> Prompt:
            return self.prompt(asked, passages)

        render = self.renderer_for(draw, prompt)
        room = packer.room(render, pinned, draw.budget)
        candidates = list(distractors(rng, pool, self.fillers(draw), asked.articles))
        passages = packer.fill(candidates, room)
        for passage in pinned:
            passages.insert(rng.randrange(len(passages) + 1), passage)
        fitted = packer.fit(passages, render, draw.budget, spares(candidates, passages))
        numbers = pinned_numbers(fitted.passages)
        depth = depth_of(self.context_text(fitted.passages),
                         self.entry.format(number=numbers[0], text=pinned[0].text))
        return Layout(prompt(fitted.passages), fitted, asked.answers, depth, self.chance,
                      self.meta(asked, numbers))

    def base_cases(self, cell: Cell, context: BuildContext) -> list[Case]:
        """The base of 100-LongBench's released code (its length-0 files,
        ``generate_dataset_*_base``): each case's question asked about its own passages alone,
        with no distractors, in the task's prompt. ``cell.length`` (0) bounds nothing; the
        questions are those of every other length."""
        return self.cases(cell, context, self.alone)

    def alone(self, draw: Draw) -> Layout:
        asked = self.asked(draw)
        passages = [Passage(draw.pool.articles[i].text, i, pinned=True) for i in asked.articles]
        if self.shuffle_alone:
            draw.rng.shuffle(passages)
        prompt = self.prompt_alone(asked, passages)
        text = draw.context.renderer.render(prompt)
        fitted = Fitted(tuple(passages), text, draw.packer.count(text))
        return Layout(prompt, fitted, asked.answers, None, self.chance,
                      self.meta(asked, pinned_numbers(passages)))

    def prompt_alone(self, asked: Question, passages: Sequence[Passage]) -> Prompt:
        """The prompt of ``alone``: the task's own, unless the reference's base words it
        otherwise."""
        return self.prompt(asked, passages)

    def asked(self, draw: Draw) -> Question:
        questions = self.questions(draw)
        return questions[self.question_order(draw, len(questions))[draw.index % len(questions)]]

    def meta(self, asked: Question, numbers: list[int]) -> dict[str, Any]:
        return {"question": asked.text, "question_id": asked.key, "passage_number": numbers[0],
                "passage_numbers": numbers,
                **({"substitute": self.substitute} if self.substitute else {})}

    def question_order(self, draw: Draw, count: int) -> list[int]:
        """Indices of ``count`` questions in a per-task order (seeded by task, not by length)."""
        order = list(range(count))
        random.Random(case_seed(draw.context.seed, self.name, "questions")).shuffle(order)
        return order


def pinned_numbers(passages: Sequence[Passage]) -> list[int]:
    """The numbers of the pinned articles in a context, in context order."""
    return [i + 1 for i, passage in enumerate(articles(passages)) if passage.pinned]


@dataclass
class SingleDocQA(AboutArticles):
    """A question about numbered passages among distractors, in the reference's prompt (one
    passage for single-doc QA; several for multi-doc QA, whose instruction lists them all).

    ``probe`` asks the question with no context, with the reference's no-context prompt, for the
    evaluator's filter (``prior_knowledge.py``). ``scorer`` is the task's rule metric: the yes/no
    variant's is ``score_yes_no`` and its questions boolq's; the judged tasks
    (``judged_tasks.py``) bring their own questions, a rubric and an open-answer metric.
    """

    metric: ClassVar[ScoreMetric] = ScoreMetric(
        "accuracy", "1 when the answer's first yes or no is the gold one")
    scorer: Scorer = score_yes_no
    question_format: str = YES_NO_INPUT
    chance: float = 0.5

    def questions(self, draw: Draw) -> Sequence[Question]:
        pool = draw.pool
        return [Question(self.question_format.format(question=pool.articles[i].question),
                         (pool.articles[i].answer,), (i,), i) for i in pool.qa]

    def prompt(self, asked: Question, passages: Sequence[Passage]) -> Prompt:
        numbers = ",".join(map(str, pinned_numbers(passages)))
        return Prompt(QA_PROMPT.format(context=self.context_text(passages),
                                       instruction=QA_INSTRUCTION.format(number=numbers),
                                       input=asked.text))

    def probe(self, case: Case, context: BuildContext) -> Case:
        """The question alone; it keeps ``meta["question"]``, which a judge's rubric reads."""
        prompt = Prompt(QA_PROBE_PROMPT.format(input=case.meta["question"]))
        text = context.renderer.render(prompt)
        return Case(case.index, text, case.gold, context.renderer.count(text), None,
                    self.max_new_tokens, self.stop, context.renderer.chat_source(prompt),
                    meta={"probe_of": case.index, "question": case.meta["question"]})

    def filter_cases(self, evaluator: Evaluator, cases: Sequence[Case]) -> KnownFilter:
        """The prior-knowledge filter: a case answered right with no context is left out."""
        return exclude_known(evaluator, self, cases)

    def score(self, output: str, case: Case) -> float:
        return self.scorer(output, case)


def _numbered_gold(task: LongBenchTask, prompt: Callable[[Sequence[Passage]], Prompt],
                   fitted: Fitted, gold: Passage, meta: dict[str, Any]) -> Layout:
    """The layout of a context that holds one gold article; the gold answer is its number."""
    number = fitted.passages.index(gold) + 1
    context = task.context_text(fitted.passages)
    return Layout(prompt(fitted.passages), fitted, (str(number),),
                  depth_of(context, task.entry.format(number=number, text=gold.text)),
                  1 / len(fitted.passages), meta)


TASKS: tuple[LongBenchTask, ...] = (
    KVRetrieval("kv_retrieval", max_new_tokens=64),
    CountingStars("counting_stars", max_new_tokens=32, entry="Passage {number}:\n{text}\n"),
    PassageRetrieval("passage_retrieval", max_new_tokens=32, entry="Passage {number}: {text}\n\n"),
    PassageCount("passage_count", max_new_tokens=32, entry="Paragraph {number}: {text}\n\n"),
    SingleDocQA("single_doc_qa_yesno", max_new_tokens=16),
)
