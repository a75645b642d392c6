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
three shuffled orders), queries in a seeded order, so every length asks the same queries. The
candidates are label-balanced (``helmet_rerank_data``); the length decides how many (k).

Scoring. The output is parsed as HELMET does (``parse_ranking``); an output without any id scores
0 and is counted in the cell's ``unparsed`` metric. NDCG@10 is trec_eval's ``ndcg_cut.10``
through pytrec_eval, as HELMET computes it, with the case's candidates and their grades as the
qrels; trec_eval's gain is the grade itself (linear), not 2^grade - 1.

HELMET's config: no chat template, 2 shots, a 200-token budget, generation stopped at a newline.
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import pytrec_eval

from ..data import DataError, DataSource
from ..grid import Cell, case_seed
from ..records import Case
from ..score_metric import NDCG_AT_10, ScoreMetric
from .base import BuildContext, CellDoesNotFit, GenerationTask
from .fitting import Frame, fit, window
from .helmet_rerank_data import PERMUTATIONS, Candidate, Listing, RerankData, load, missing
from .packing import Packer
from .recall_common import answer_separator

INSTRUCTION = (
    "You are provided with a list of documents, each indicated by their ID. Rank each document "
    "based on their relevance to the question in descending order from most relelvant to least "
    "relevant texts. Include all documents in the rankings. Write your answer using the unique "
    "IDs, with the following format:\nRanking: ID3 > ID1 > ID2")
ANSWER_PREFIX = "Ranking:"
SEPARATOR = "\n\n"
DEMO_SIZES = (10, 5, 3)
"""Candidates per demonstration: HELMET's ten, fewer only where two demonstrations of ten would
take more than ``DEMO_SHARE`` of a cell (below HELMET's smallest length)."""
DEMO_SHARE = 0.5
MIN_CANDIDATES = 5
"""The fewest candidates a test query may be shown: a cell that cannot hold them is skipped."""
NDCG = "ndcg_cut.10"
_CHAIN = re.compile(r"\d+(?:\s*>\s*\d+)*")


def passage(candidate: Candidate) -> str:
    """HELMET's passage line (with the title when the data has one)."""
    if candidate.title is not None:
        return f"[ID: {candidate.pid}] Document (Title: {candidate.title}): {candidate.text}"
    return f"[ID: {candidate.pid}] Document: {candidate.text}"


def passages(listing: Listing) -> str:
    return SEPARATOR.join(passage(c) for c in listing.candidates)


def gold_ranking(listing: Listing) -> list[str]:
    """Ids by grade, best first; ties keep the shown order (HELMET's stable sort)."""
    return [c.pid for c in sorted(listing.candidates, key=lambda c: c.grade, reverse=True)]


def demonstration(listing: Listing) -> str:
    return (f"{passages(listing)}{SEPARATOR}Query: {listing.query}\n"
            f"{ANSWER_PREFIX} {' > '.join(gold_ranking(listing))}{SEPARATOR}")


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
    """trec_eval's NDCG@10 of one query (pytrec_eval; linear gain)."""
    evaluator = pytrec_eval.RelevanceEvaluator({"q": dict(qrels)}, {NDCG})
    return float(evaluator.evaluate({"q": dict(ranking)})["q"]["ndcg_cut_10"])


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
    max_new_tokens: int = 200
    stop: tuple[str, ...] = ("\n",)
    shots: int = 2

    def build(self, cell: Cell, context: BuildContext) -> list[Case]:
        data = load(context.data)
        order = sorted(data.qids)
        random.Random(case_seed(context.seed, self.name, "queries")).shuffle(order)
        if cell.samples > len(order) * PERMUTATIONS:
            raise DataError(f"{self.name}: {cell.samples} samples asked, but {data.source} has "
                            f"{len(order)} queries x {PERMUTATIONS} permutations")
        return [self._case(cell, context, data, order[index // PERMUTATIONS], index)
                for index in range(cell.samples)]

    def score(self, output: str, case: Case) -> float:
        ranking = parse_ranking(output)
        return 0.0 if ranking is None else ndcg_at_10(case.meta["qrels"], ranking)

    def missing_data(self, data: DataSource) -> str | None:
        """What the data directory lacks (generation_suite.NeedsData): no cells without it."""
        return missing(data)

    def cell_metrics(self, outputs: Sequence[str], cases: Sequence[Case]) -> dict[str, float]:
        """Outputs with no ranking in them (scored 0), counted per cell, so that a model that
        does not rank is told from one that ranks badly."""
        return {"unparsed": float(sum(parse_ranking(output) is None for output in outputs))}

    def _case(self, cell: Cell, context: BuildContext, data: RerankData, qid: str,
              index: int) -> Case:
        permutation = index % PERMUTATIONS
        packer = Packer(context, lambda text: SEPARATOR + text)
        demos = self._demos(cell, context, data, qid)
        frame = Frame(INSTRUCTION + SEPARATOR + "".join(demonstration(d) for d in demos),
                      f"{SEPARATOR}Query: {data.query(qid)}",
                      answer_separator(context.renderer) + ANSWER_PREFIX)
        what = f"{self.name} at {cell.length} tokens (query {qid})"
        costs = self._costs(packer, data.order(qid, permutation, context.seed), cell, frame,
                            context, what)
        least = min(MIN_CANDIDATES, len(costs))

        def build(budget: int) -> _Context:
            n = max(bisect.bisect_right(costs, budget), least)
            listing = data.shown(qid, permutation, n, context.seed)
            return _Context(listing, passages(listing), costs[n - 1])

        fitted = fit(frame, build, context.renderer, cell.length, self.max_new_tokens,
                     costs[least - 1], what,
                     granularity=max(b - a for a, b in itertools.pairwise([0, *costs])))
        listing = fitted.context.listing
        return Case(
            index=index, prompt=fitted.rendered, gold=tuple(gold_ranking(listing)),
            prompt_tokens=fitted.prompt_tokens, depth=_best_depth(listing),
            max_new_tokens=self.max_new_tokens, stop=self.stop,
            chat=context.renderer.chat_source(fitted.prompt),
            meta={"source": data.source, "qid": qid, "permutation": permutation,
                  "k": len(listing.candidates), "demo_qids": [d.qid for d in demos],
                  "demo_candidates": len(demos[0].candidates),
                  "grades_shown": [c.grade for c in listing.candidates],
                  "origins": dict(Counter(c.origin for c in listing.candidates)),
                  "qrels": {c.pid: c.grade for c in listing.candidates},
                  "context_tokens": fitted.context.tokens})

    def _demos(self, cell: Cell, context: BuildContext, data: RerankData,
               qid: str) -> list[Listing]:
        """HELMET's two demonstrations of ten candidates, shrunk (DEMO_SIZES) only where they
        would take more than DEMO_SHARE of the cell."""
        for size in DEMO_SIZES:
            demos = data.demos(qid, self.shots, size, context.seed)
            text = "".join(demonstration(d) for d in demos)
            if len(context.tokenizer.encode(text)) <= DEMO_SHARE * cell.length:
                break
        return demos

    def _costs(self, packer: Packer, order: Sequence[Candidate], cell: Cell, frame: Frame,
               context: BuildContext, what: str) -> list[int]:
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
            total += packer.cost(passage(candidate))
            costs.append(total)
        if total >= need and costs:
            return costs
        raise CellDoesNotFit(
            f"{what}: all {len(order)} candidate passages take about {total} tokens, with "
            f"instructions, demonstrations and the {self.max_new_tokens}-token generation "
            f"budget {overhead + total + self.max_new_tokens} tokens: short of the cell "
            f"length {cell.length}")


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
