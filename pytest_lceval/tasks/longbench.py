"""100-LongBench's length-controllable tasks (suite ``longbench100``; paper §3.1, A.2, A.3).

Every context is made of whole articles from the pool (``articles.py``): the answer-bearing ones
plus distractors, shuffled and packed until the prompt is just under the cell's length
(``packing.py``). Cases are deterministic in (task, length, sample index, seed). The tasks place
their key information at random, as the paper does, so they do not sweep depth; each case records
the depth it got.

- ``kv_retrieval``: three chained key-value pairs (v1 = k2, v2 = k3) hidden in three articles;
  name the value of one key.
- ``counting_stars``: "The little penguin counted N ★" after four articles; pick the sequence of
  counts among options made by swapping, altering and reordering it.
- ``passage_retrieval``: given a news headline, name the numbered passage (its excerpt) it heads.
- ``passage_count``: how many unique paragraphs, with some repeated.
- ``single_doc_qa``: a yes/no question about one numbered passage (boolq), with the
  prior-knowledge filter: each question is also asked with no context (``probe``).
Judged multi-doc QA and summarisation come with the judge.
"""

from __future__ import annotations

import random
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..grid import Cell, case_seed
from ..metrics import string_match_all
from ..records import Case, Prompt
from .articles import ArticlePool, load_pool
from .base import BuildContext, CellDoesNotFit, GenerationTask, register_all
from .longbench_text import (
    COUNT_PROMPT,
    KV_PROMPT,
    LETTERS,
    QA_PROBE_PROMPT,
    QA_PROMPT,
    RETRIEVAL_PROMPT,
    STARS_PROMPT,
    chosen_option,
    first_number,
    listing,
    star_options,
    yes_or_no,
)
from .packing import Fitted, Packer, Passage, depth_of, insert_sentence
from .recall_common import answer_separator

SUITE = "longbench100"
SEPARATOR = "\n\n"
PARAGRAPH_CHARS = 1000
"""Least characters of a passage-count paragraph (about 250 tokens)."""

@dataclass(frozen=True)
class Layout:
    """A built case before it becomes a Case: the fitted prompt and what it asks for."""

    prompt: Prompt
    fitted: Fitted
    gold: tuple[str, ...]
    depth: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class LongBenchTask(ABC):
    """What the five tasks share: the case loop, the budget, the context format."""

    name: str
    max_new_tokens: int
    label: str = ""
    """Passages are numbered ('Passage 3:') when the question refers to them; '' = no labels."""
    suite: str = SUITE
    uses_depth: bool = False
    stop: tuple[str, ...] = ("\n",)

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        pool = load_pool(context.data)
        budget = cell.length - self.max_new_tokens
        cases = []
        for index in range(cell.samples):
            rng = random.Random(case_seed(context.seed, self.name, cell.length, cell.depth, index))
            layout = self.layout(rng, pool, Packer(context, self.unit), budget, context)
            cases.append(Case(
                index, layout.fitted.text, layout.gold, layout.fitted.tokens, layout.depth,
                self.max_new_tokens, self.stop, context.renderer.chat_source(layout.prompt),
                meta={"source": pool.source, "passages": len(layout.fitted.passages),
                      **layout.meta}))
        return cases

    @abstractmethod
    def layout(self, rng: random.Random, pool: ArticlePool, packer: Packer, budget: int,
               context: BuildContext) -> Layout:
        """One case's context and question, fitted to ``budget`` prompt tokens."""

    @abstractmethod
    def score(self, output: str, case: Case) -> float:
        """Accuracy (0 or 1) of one answer."""

    # -- helpers shared by the tasks ----------------------------------------------------------

    def unit(self, text: str, number: int = 10) -> str:
        """How a passage appears in the context, its separator included (for cost estimates)."""
        return f"{SEPARATOR}{self.label} {number}:\n{text}" if self.label else SEPARATOR + text

    def context_text(self, passages: Sequence[Passage]) -> str:
        return "".join(self.unit(p.text, i + 1) for i, p in enumerate(passages)).lstrip()

    def renderer_for(self, context: BuildContext,
                     prompt: Callable[[Sequence[Passage]], Prompt]) -> \
            Callable[[Sequence[Passage]], str]:
        return lambda passages: context.renderer.render(prompt(passages))


def answered(context: BuildContext, user: str, prefix: str) -> Prompt:
    """The prompt with its answer prefix placed as the recall tasks place theirs."""
    return Prompt(user, answer_separator(context.renderer) + prefix)


def distractors(rng: random.Random, pool: ArticlePool, exclude: int = -1) -> Iterator[Passage]:
    """Every pool article but ``exclude``, in a random order."""
    order = [i for i in range(len(pool.articles)) if i != exclude]
    rng.shuffle(order)
    return (Passage(pool.articles[i].text, i) for i in order)


def paragraphs(articles: Iterator[Passage]) -> Iterator[Passage]:
    """Articles merged into paragraphs of at least PARAGRAPH_CHARS, so that the unique count
    stays a count a reader could do (news excerpts alone would make hundreds)."""
    text, first = "", -1
    for passage in articles:
        text, first = (f"{text} {passage.text}", first) if text else (passage.text, passage.article)
        if len(text) >= PARAGRAPH_CHARS:
            yield Passage(text, first)
            text = ""


def _cost(packer: Packer, passages: Sequence[Passage]) -> int:
    return sum(packer.cost(passage.text) for passage in passages)


def _random_key(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _require(passages: list[Passage], what: str, budget: int) -> list[Passage]:
    if not passages:
        raise CellDoesNotFit(f"no article fits {what} within the budget of {budget} tokens")
    return passages


class KVRetrieval(LongBenchTask):
    def layout(self, rng: random.Random, pool: ArticlePool, packer: Packer, budget: int,
               context: BuildContext) -> Layout:
        keys = [_random_key(rng) for _ in range(4)]
        # Chained: each pair's value is the next pair's key (v1 = k2, v2 = k3).
        pairs = list(zip(keys, keys[1:], strict=False))
        sentences = [f'Key-value pair: {{"{key}": "{value}"}}.' for key, value in pairs]
        asked = rng.randrange(len(pairs))
        key, value = pairs[asked]

        def prompt(passages: Sequence[Passage]) -> Prompt:
            return answered(context, KV_PROMPT.format(context=self.context_text(passages),
                                                      key=key),
                            f'The value of the key "{key}" is')

        render = self.renderer_for(context, prompt)
        reserve = sum(packer.cost(sentence) for sentence in sentences)
        passages = _require(packer.fill(distractors(rng, pool),
                                        packer.room(render, [], budget, reserve)),
                            "beside the key-value pairs", budget)
        slots = rng.sample(range(len(passages)), min(len(sentences), len(passages)))
        slots += [rng.randrange(len(passages)) for _ in range(len(sentences) - len(slots))]
        for sentence, slot in zip(sentences, slots, strict=True):
            passages[slot] = insert_sentence(passages[slot], sentence, rng)
        fitted = packer.fit(passages, render, budget)
        return Layout(prompt(fitted.passages), fitted, (value,),
                      depth_of(self.context_text(fitted.passages), sentences[asked]),
                      {"key": key})

    def score(self, output: str, case: Case) -> float:
        return string_match_all(output, case.gold)


class CountingStars(LongBenchTask):
    def layout(self, rng: random.Random, pool: ArticlePool, packer: Packer, budget: int,
               context: BuildContext) -> Layout:
        counts = rng.sample(range(1, 100), 4)
        options = star_options(rng, counts)
        correct = LETTERS[options.index(counts)]
        choices = "\n".join(f"{LETTERS[i]}. {listing(o)}" for i, o in enumerate(options))
        sentences = [f"The little penguin counted {n} ★" for n in counts]

        def prompt(passages: Sequence[Passage]) -> Prompt:
            return answered(context, STARS_PROMPT.format(context=self.context_text(passages),
                                                         options=choices),
                            "The final answer is:")

        render = self.renderer_for(context, prompt)
        reserve = sum(packer.cost(sentence) for sentence in sentences)
        passages = _require(packer.fill(distractors(rng, pool),
                                        packer.room(render, [], budget, reserve)),
                            "beside the penguin sentences", budget)
        slots = sorted(rng.sample(range(len(passages)), min(4, len(passages))))
        slots += [slots[-1]] * (4 - len(slots))  # few passages: the last one takes the rest
        for sentence, slot in zip(sentences, slots, strict=True):
            passages[slot] = insert_sentence(passages[slot], sentence, None)
        fitted = packer.fit(passages, render, budget)
        return Layout(prompt(fitted.passages), fitted, (correct, listing(counts)),
                      meta={"options": [listing(o) for o in options]})

    def score(self, output: str, case: Case) -> float:
        return float(chosen_option(output, case.meta["options"]) == case.gold[0])


class PassageRetrieval(LongBenchTask):
    def layout(self, rng: random.Random, pool: ArticlePool, packer: Packer, budget: int,
               context: BuildContext) -> Layout:
        article_index = rng.choice(pool.news)
        article = pool.articles[article_index]
        gold = Passage(article.text, article_index, pinned=True)

        def prompt(passages: Sequence[Passage]) -> Prompt:
            return answered(context, RETRIEVAL_PROMPT.format(
                context=self.context_text(passages), summary=article.title),
                "The answer is Passage")

        return _with_gold(self, rng, pool, packer, budget, gold, prompt,
                          self.renderer_for(context, prompt), {"title": article.title})

    def score(self, output: str, case: Case) -> float:
        return float(first_number(output) == int(case.gold[0]))


class PassageCount(LongBenchTask):
    def layout(self, rng: random.Random, pool: ArticlePool, packer: Packer, budget: int,
               context: BuildContext) -> Layout:
        def prompt(passages: Sequence[Passage]) -> Prompt:
            return answered(context, COUNT_PROMPT.format(context=self.context_text(passages)),
                            "The final answer is:")

        render = self.renderer_for(context, prompt)
        room = packer.room(render, [], budget)
        articles = distractors(rng, pool)
        # Unique paragraphs fill 50-80 % of the room, repeats of them most of the rest, and
        # articles never used close the gap that whole paragraphs leave.
        unique = _require(packer.fill(paragraphs(articles), round(room * rng.uniform(0.5, 0.8)),
                                      patience=0), "beside the instructions", budget)
        repeats = [rng.choice(unique) for _ in range(3 * len(unique))]
        passages = packer.fill(repeats, room - _cost(packer, unique), unique)
        passages = packer.fill(articles, room - _cost(packer, passages), passages)
        rng.shuffle(passages)
        fitted = packer.fit(passages, render, budget)
        distinct = len({p.text for p in fitted.passages})
        return Layout(prompt(fitted.passages), fitted, (str(distinct),),
                      meta={"repeated": len(fitted.passages) - distinct})

    def score(self, output: str, case: Case) -> float:
        return float(first_number(output) == int(case.gold[0]))


class SingleDocQA(LongBenchTask):
    """Yes/no accuracy on a boolq passage among distractors. ``probe`` asks the question with
    no context, for the evaluator's prior-knowledge filter (``prior_knowledge.py``)."""

    def layout(self, rng: random.Random, pool: ArticlePool, packer: Packer, budget: int,
               context: BuildContext) -> Layout:
        article_index = rng.choice(pool.qa)
        article = pool.articles[article_index]
        gold = Passage(article.text, article_index, pinned=True)

        def prompt(passages: Sequence[Passage]) -> Prompt:
            number = next(i + 1 for i, p in enumerate(passages) if p.pinned)
            return answered(context, QA_PROMPT.format(
                context=self.context_text(passages), number=number, question=article.question),
                "Answer:")

        layout = _with_gold(self, rng, pool, packer, budget, gold, prompt,
                            self.renderer_for(context, prompt), {"question": article.question})
        meta = {**layout.meta, "passage_number": int(layout.gold[0])}
        return Layout(layout.prompt, layout.fitted, (article.answer,), layout.depth, meta)

    def probe(self, case: Case, context: BuildContext) -> Case:
        prompt = answered(context, QA_PROBE_PROMPT.format(question=case.meta["question"]),
                          "Answer:")
        text = context.renderer.render(prompt)
        return Case(case.index, text, case.gold, context.renderer.count(text), None,
                    self.max_new_tokens, self.stop, context.renderer.chat_source(prompt),
                    meta={"probe_of": case.index})

    def score(self, output: str, case: Case) -> float:
        return float(yes_or_no(output) == case.gold[0])


def _with_gold(task: LongBenchTask, rng: random.Random, pool: ArticlePool, packer: Packer,
               budget: int, gold: Passage, prompt: Callable[[Sequence[Passage]], Prompt],
               render: Callable[[Sequence[Passage]], str], meta: dict[str, Any]) -> Layout:
    """One gold article among distractors at a random position; the gold answer is its number."""
    passages = _require(packer.fill(distractors(rng, pool, exclude=gold.article),
                                    packer.room(render, [gold], budget)),
                        "beside the gold article", budget)
    passages.insert(rng.randrange(len(passages) + 1), gold)
    fitted = packer.fit(passages, render, budget)
    number = fitted.passages.index(gold) + 1
    return Layout(prompt(fitted.passages), fitted, (str(number),),
                  depth_of(task.context_text(fitted.passages), task.unit(gold.text, number)
                           .lstrip()), meta)


TASKS = [
    KVRetrieval("kv_retrieval", max_new_tokens=48),
    CountingStars("counting_stars", max_new_tokens=24),
    PassageRetrieval("passage_retrieval", max_new_tokens=8, label="Passage"),
    PassageCount("passage_count", max_new_tokens=8, label="Paragraph"),
    SingleDocQA("single_doc_qa", max_new_tokens=8, label="Passage"),
]
register_all(list[GenerationTask](TASKS))
