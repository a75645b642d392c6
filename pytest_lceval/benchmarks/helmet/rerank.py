"""HELMET's passage re-ranking (MS MARCO / TREC DL): task x length, scored by NDCG@10.

Prompt, in HELMET's words (its typo "relelvant" kept, since the model reads it)::

    You are provided with a list of documents, each indicated by their ID. Rank each document
    ... with the following format:
    Ranking: ID3 > ID1 > ID2

    [ID: 7067032] Document: <demo passage>          (x10, two demonstrations)
    ...
    Query: <demo query>
    Ranking: 7067032 > ...

    [ID: 8612909] Document: <passage>              (as many as fit the cell: k)
    ...

    Query: <query>
    Ranking:

Cases. Case ``i`` asks query ``i // 3`` in permutation ``i % 3`` (HELMET asks every query in
three shuffled orders), so every length asks the same queries. On HELMET's files the queries and
demonstrations are HELMET's (``helmet_asked``, ``helmet_demos``), and a cell at one of HELMET's
lengths shows HELMET's row of the file for that length as it is (its context cut as HELMET's
``tokenize`` cuts an overflowing prompt); elsewhere, and on the substitute, the candidates are
label-balanced (``rerank_data``) and the length decides how many (k).

Scoring. The output, after ``Ranking:`` when the prompt ended with it (as ``eval.py`` scores it),
is parsed as HELMET does (``parse_ranking``); an output without any id scores 0 and is counted in
the cell's ``unparsed`` metric. NDCG@10 is trec_eval's ``ndcg_cut.10`` through pytrec_eval,
rounded to 5 decimals, as HELMET computes it, with the case's candidates and their grades as the
qrels; trec_eval's gain is the grade itself (linear), not 2^grade - 1.

HELMET's config: no chat template, 2 shots, a 200-token budget; its released code never stops at
a newline (``--lceval-stop-newline=config`` does, as the config's ``stop_new_line`` intends).
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pytrec_eval

from ...foundation.data import DataError, DataSource
from ...foundation.grid import Cell, case_seed
from ...models.scoring import ScoringModel
from ...results.records import Case, Prompt
from ...results.score_metric import NDCG_AT_10, ScoreMetric
from ...tasks.base import BuildContext, CellDoesNotFit, GenerationTask
from ...tasks.fitting import Frame, fit, window
from ...tasks.packing import Packer
from .output import OUTPUT_PREFIX, helmet_scored
from .pipeline import context_that_fits
from .rerank_data import (
    PERMUTATIONS,
    Candidate,
    HelmetFiles,
    Listing,
    Substitute,
    helmet_asked,
    helmet_demos,
    load,
    missing,
)

INSTRUCTION = (
    "You are provided with a list of documents, each indicated by their ID. Rank each document "
    "based on their relevance to the question in descending order from most relelvant to least "
    "relevant texts. Include all documents in the rankings. Write your answer using the unique "
    "IDs, with the following format:\nRanking: ID3 > ID1 > ID2")
ANSWER_PREFIX = "Ranking:"
CUE = "\n" + ANSWER_PREFIX
"""How HELMET's ``prompt_template`` ends a raw prompt after the user text."""
SEPARATOR = "\n\n"
DEMO_SIZES = (10, 5, 3)
"""Candidates per demonstration: HELMET's ten, fewer only where two demonstrations of ten would
take more than ``DEMO_SHARE`` of a cell (below HELMET's smallest length)."""
DEMO_SHARE = 0.5
MIN_CANDIDATES = 5
"""The fewest candidates a test query may be shown: a cell that cannot hold them is skipped."""
NDCG = "ndcg_cut.10"
_CHAIN = re.compile(r"\d+(?:\s*>\s*\d+)*")


def passage(candidate: Candidate, titled: bool) -> str:
    """HELMET's passage line, with the title when the asked listing's first passage has one
    (HELMET picks one template per test query, for its demonstrations too)."""
    if not titled:
        return f"[ID: {candidate.pid}] Document: {candidate.text}"
    if candidate.title is None:
        raise DataError(f"passage {candidate.pid} has no title, but the asked query's passages "
                        f"have titles, so HELMET's template needs one")
    return f"[ID: {candidate.pid}] Document (Title: {candidate.title}): {candidate.text}"


def titled(listing: Listing) -> bool:
    return bool(listing.candidates) and listing.candidates[0].title is not None


def passages(listing: Listing, titles: bool) -> str:
    return SEPARATOR.join(passage(c, titles) for c in listing.candidates)


def gold_ranking(listing: Listing) -> list[str]:
    """Ids by grade, best first; ties keep the shown order (HELMET's stable sort)."""
    return [c.pid for c in sorted(listing.candidates, key=lambda c: c.grade, reverse=True)]


def demonstration(listing: Listing, titles: bool) -> str:
    return (f"{passages(listing, titles)}{SEPARATOR}Query: {listing.query}\n"
            f"{ANSWER_PREFIX} {' > '.join(gold_ranking(listing))}{SEPARATOR}")


def head(demos: Sequence[Listing], titles: bool) -> str:
    """The user text before the passages: instruction and demonstrations."""
    return INSTRUCTION + SEPARATOR + "".join(demonstration(d, titles) for d in demos)


def parse_ranking(output: str) -> dict[str, float] | None:
    """HELMET's parse: drop brackets, colons and "id", take the longest "n > n > ..." chain;
    ids score by rank (first = highest), a repeat keeps its first place. None when the output
    holds no number at all (HELMET then ranks the whole text as one id, which scores 0)."""
    cleaned = re.sub(r"[\[\]:]", "", output).lower().replace("id", "")
    chains = _CHAIN.findall(cleaned)
    if not chains:
        return None
    ids = [part.strip() for part in max(chains, key=len).split(">")]
    ranking: dict[str, float] = {}
    for position, pid in enumerate(ids):
        ranking.setdefault(pid, float(len(ids) - position))
    return ranking


def ndcg_at_10(qrels: Mapping[str, int], ranking: Mapping[str, float]) -> float:
    """trec_eval's NDCG@10 of one query (pytrec_eval; linear gain), rounded to 5 decimals as
    HELMET's ``calculate_retrieval_metrics`` rounds it."""
    evaluator = pytrec_eval.RelevanceEvaluator({"q": dict(qrels)}, {NDCG})
    return round(float(evaluator.evaluate({"q": dict(ranking)})["q"]["ndcg_cut_10"]), 5)


@dataclass(frozen=True)
class _Context:
    """The candidates shown, their text and predicted token count (fitting.Built)."""

    listing: Listing
    text: str
    tokens: int


@dataclass
class RerankTask:
    """See the module docstring."""

    metric: ClassVar[ScoreMetric] = NDCG_AT_10
    name: str = "msmarco_rerank"
    uses_depth: bool = False
    use_chat_template: bool = False
    stop_new_line: bool = True
    """configs/rerank.yaml's ``stop_new_line``, which HELMET's released code never reads."""
    max_new_tokens: int = 200
    shots: int = 2

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        data = load(context.data)
        if isinstance(data, HelmetFiles):
            return self._helmet_cases(cell, context, data)
        order = sorted(data.qids)
        random.Random(case_seed(context.seed, self.name, "queries")).shuffle(order)
        if cell.samples > len(order) * PERMUTATIONS:
            raise DataError(f"{self.name}: {cell.samples} samples asked, but {data.source} has "
                            f"{len(order)} queries x {PERMUTATIONS} permutations")
        return [self._substitute_case(cell, context, data, order[index // PERMUTATIONS], index)
                for index in range(cell.samples)]

    def score(self, output: str, case: Case) -> float:
        ranking = parse_ranking(helmet_scored(output, case.meta))
        return 0.0 if ranking is None else ndcg_at_10(case.meta["qrels"], ranking)

    def missing_data(self, data: DataSource) -> str | None:
        """What the data directory lacks (generation_suite.NeedsData): no cells without it."""
        return missing(data)

    def cell_metrics(self, outputs: Sequence[str], cases: Sequence[Case],
                     scoring: Mapping[str, ScoringModel]) -> dict[str, float]:
        """Outputs with no ranking in them (scored 0), counted per cell, so that a model that
        does not rank is told from one that ranks badly."""
        return {"unparsed": float(sum(parse_ranking(output) is None for output in outputs))}

    def _helmet_cases(self, cell: Cell, context: BuildContext, data: HelmetFiles) -> list[Case]:
        rows, own_file = data.test_rows(cell.length)
        asked = helmet_asked(rows, cell.samples, context.seed)
        if cell.samples > len(asked):
            raise DataError(f"{self.name}: {cell.samples} samples asked, but {data.source} has "
                            f"{len(asked)} rows to ask")
        cases = []
        for index, row in enumerate(asked[:cell.samples]):
            permutation = [r for r in asked if r.qid == row.qid].index(row)
            demos = helmet_demos(data.demo_rows(), asked, row.qid, self.shots)
            if own_file:
                cases.append(self._file_case(cell, context, data.source, row, permutation,
                                             demos, index))
            else:
                cases.append(self._fitted_case(
                    cell, context, data.source, row, permutation, row.candidates,
                    _first(row), _cut(demos), index))
        return cases

    def _substitute_case(self, cell: Cell, context: BuildContext, data: Substitute, qid: str,
                         index: int) -> Case:
        permutation = index % PERMUTATIONS
        listing = data.shown(qid, permutation, 0, context.seed)
        return self._fitted_case(
            cell, context, data.source, listing, permutation,
            data.order(qid, permutation, context.seed),
            lambda n: data.shown(qid, permutation, n, context.seed),
            lambda size: data.demos(qid, self.shots, size, context.seed), index)

    def _file_case(self, cell: Cell, context: BuildContext, source: str, row: Listing,
                   permutation: int, demos: list[Listing], index: int) -> Case:
        """HELMET's row as the file gives it, cut as HELMET cuts an overflowing prompt."""
        titles = titled(row)
        whole = passages(row, titles)

        def prompt(context_text: str) -> Prompt:
            return Prompt(f"{head(demos, titles)}{context_text}{SEPARATOR}Query: {row.query}",
                          cue=CUE)

        shown = context_that_fits(
            context, prompt, whole, cell.length - self.max_new_tokens,
            f"{self.name} at {cell.length} tokens: instructions, demonstrations and query leave "
            f"no room for a passage")
        rendered = context.renderer.render(prompt(shown))
        return self._case(index, rendered, context.renderer.count(rendered), prompt(shown),
                          context, source, row, permutation, demos,
                          {"truncated": shown != whole})

    def _fitted_case(self, cell: Cell, context: BuildContext, source: str, asked: Listing,
                     permutation: int, order: Sequence[Candidate],
                     shown: Callable[[int], Listing],
                     demo_sets: Callable[[int], list[Listing]], index: int) -> Case:
        """As many of ``order``'s candidates as fit the cell (``shown(n)`` arranges the first
        n), after demonstrations of ``demo_sets(size)`` candidates each."""
        qid = asked.qid
        titles = titled(Listing(qid, asked.query, tuple(order[:1])))
        packer = Packer(context, lambda text: SEPARATOR + text)
        demos = self._demos(cell, context, demo_sets, titles)
        frame = Frame(head(demos, titles), f"{SEPARATOR}Query: {asked.query}", CUE)
        what = f"{self.name} at {cell.length} tokens (query {qid})"
        costs = self._costs(packer, order, cell, frame, context, what, titles)
        least = min(MIN_CANDIDATES, len(costs))

        def build(budget: int) -> _Context:
            n = max(bisect.bisect_right(costs, budget), least)
            listing = shown(n)
            return _Context(listing, passages(listing, titles), costs[n - 1])

        fitted = fit(frame, build, context.renderer, cell.length, self.max_new_tokens,
                     costs[least - 1], what,
                     granularity=max(b - a for a, b in itertools.pairwise([0, *costs])))
        return self._case(index, fitted.rendered, fitted.prompt_tokens, fitted.prompt, context,
                          source, fitted.context.listing, permutation, demos,
                          {"context_tokens": fitted.context.tokens})

    def _case(self, index: int, rendered: str, tokens: int, prompt: Prompt,
              context: BuildContext, source: str, listing: Listing, permutation: int,
              demos: list[Listing], extra: dict[str, Any]) -> Case:
        return Case(
            index=index, prompt=rendered, gold=tuple(gold_ranking(listing)),
            prompt_tokens=tokens, depth=_best_depth(listing),
            max_new_tokens=self.max_new_tokens, chat=context.renderer.chat_source(prompt),
            meta={"source": source, "qid": listing.qid, "permutation": permutation,
                  "k": len(listing.candidates), "demo_qids": [d.qid for d in demos],
                  "demo_candidates": len(demos[0].candidates) if demos else 0,
                  "grades_shown": [c.grade for c in listing.candidates],
                  "origins": dict(Counter(c.origin for c in listing.candidates)),
                  "qrels": {c.pid: c.grade for c in listing.candidates},
                  OUTPUT_PREFIX: "" if context.renderer.uses_template else ANSWER_PREFIX,
                  **extra})

    def _demos(self, cell: Cell, context: BuildContext,
               demo_sets: Callable[[int], list[Listing]], titles: bool) -> list[Listing]:
        """HELMET's two demonstrations of ten candidates, shrunk (DEMO_SIZES) only where they
        would take more than DEMO_SHARE of the cell."""
        for size in DEMO_SIZES:
            demos = demo_sets(size)
            text = "".join(demonstration(d, titles) for d in demos)
            if len(context.tokenizer.encode(text)) <= DEMO_SHARE * cell.length:
                break
        return demos

    def _costs(self, packer: Packer, order: Sequence[Candidate], cell: Cell, frame: Frame,
               context: BuildContext, what: str, titles: bool) -> list[int]:
        """Predicted context tokens of the first 1, 2, ... candidates, as far as a cell could
        take; a pool too small to fill the cell skips it with the numbers (a prompt shorter
        than its length would pass for a measurement at that length)."""
        overhead = context.renderer.count(context.renderer.render(frame.prompt("")))
        need = window(cell.length)[0] - overhead - self.max_new_tokens
        costs: list[int] = []
        total = 0
        for candidate in order:
            if total > cell.length:  # more than any fitting round can ask for
                break
            total += packer.cost(passage(candidate, titles))
            costs.append(total)
        if total >= need and costs:
            return costs
        raise CellDoesNotFit(
            f"{what}: all {len(order)} candidate passages take about {total} tokens, with "
            f"instructions, demonstrations and the {self.max_new_tokens}-token generation "
            f"budget {overhead + total + self.max_new_tokens} tokens: short of the cell "
            f"length {cell.length}")


def _first(listing: Listing) -> Callable[[int], Listing]:
    """The listing's first n candidates, for any n."""
    return lambda n: Listing(listing.qid, listing.query, listing.candidates[:n])


def _cut(demos: list[Listing]) -> Callable[[int], list[Listing]]:
    """The demonstrations with their first ``size`` candidates each, for any size."""
    return lambda size: [_first(demo)(size) for demo in demos]


def _best_depth(listing: Listing) -> float | None:
    """Where the first passage of the highest grade sits, in percent of the candidates shown
    (0 = first, 100 = last): the closest thing re-ranking has to a needle's depth."""
    candidates = listing.candidates
    if not candidates:
        return None
    best = max(c.grade for c in candidates)
    position = next(i for i, c in enumerate(candidates) if c.grade == best)
    return 100.0 * position / max(len(candidates) - 1, 1)


TASKS: tuple[GenerationTask, ...] = (RerankTask(),)
