"""ALCE's metrics for answers with [k] citations (HELMET's cite category, ``eval_alce.py``).

Correctness needs no model: ASQA's STR-EM (the share of the question's readings whose short
answers appear in the answer) and QAMPARI's recall-5 and precision over the comma-separated list.
Citation recall and precision need an entailment judge: an :class:`EntailmentScorer`, here the
scoring model ``cite_plugin`` offers from ``--lceval-cite-nli`` (read through the store by
:class:`Entailment`). Without one the citation metrics are None, never 0 or 1, and the results
say so.

ASQA answers are cut into claims as ALCE cuts them: NLTK's Punkt sentences with its English
model (``sentences``, the same splitter RULER's essay haystack uses).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ...models.scoring import ScoringModel
from ...tasks.metrics import normalize_answer
from ...tasks.sentences import sentence_spans

AT_MOST_CITATIONS = 3
"""ALCE's ``--at_most_citations``: only a claim's first three citations are checked."""
MIN_CLAIM_CHARS = 5
"""ALCE ignores sentences shorter than this (a sentencizer's stray "1.")."""

_CITATION = re.compile(r"\[(\d+)")


class EntailmentScorer(Protocol):
    """Whether ``premise`` supports ``hypothesis``: an NLI model, or a judge backend."""

    @property
    def label(self) -> str:
        """What judged, for the results (e.g. 'hf:/models/nli')."""
        ...

    def entails(self, premise: str, hypothesis: str) -> bool: ...


class Entailment:
    """An EntailmentScorer over a scoring model that rates (premise, hypothesis) pairs as
    entailed or not (cite_plugin's classifier, behind the store)."""

    def __init__(self, model: ScoringModel) -> None:
        self.model = model

    @property
    def label(self) -> str:
        return self.model.label

    def entails(self, premise: str, hypothesis: str) -> bool:
        return bool(self.model.score([(premise, hypothesis)])[0])


@dataclass(frozen=True)
class Document:
    title: str
    text: str

    def premise(self) -> str:
        """How ALCE shows a cited document to the NLI model."""
        return f"Title: {self.title}\n{self.text}"


def clean_output(output: str) -> str:
    """ALCE's preprocessing of every output: newlines become spaces, a stray end-of-turn
    marker is dropped."""
    return re.sub(r"\n+", " ", output).replace("<|im_end|>", "")


def remove_citations(text: str) -> str:
    """The answer without its [k] markers, as ALCE scores correctness."""
    return re.sub(r"\[\d+", "", re.sub(r" \[\d+", "", text)).replace(" |", "").replace("]", "")


def sentences(text: str) -> list[str]:
    """ASQA's claims: NLTK's Punkt sentences (ALCE's ``sent_tokenize``) of at least
    MIN_CLAIM_CHARS characters."""
    return [text[start:end] for start, end in sentence_spans(text)
            if len(text[start:end].strip()) >= MIN_CLAIM_CHARS]


def list_items(text: str) -> list[str]:
    """QAMPARI's answer list: comma-separated, a final period or comma dropped."""
    return text.rstrip().rstrip(".").rstrip(",").split(",")


def qampari_claims(question: str, output: str) -> list[str]:
    """QAMPARI's claims: each listed answer after the question, as ALCE checks them."""
    return [f"{question} {item.strip()}" for item in list_items(output)]


def str_em(output: str, readings: Sequence[Sequence[str]]) -> float:
    """ASQA's STR-EM: the share of readings (qa pairs) with a short answer in the output."""
    text = normalize_answer(remove_citations(clean_output(output)))
    found = [any(normalize_answer(answer) in text for answer in answers) for answers in readings]
    return sum(found) / len(found)


@dataclass(frozen=True)
class ListScores:
    recall_top5: float
    precision: float


def qampari_scores(output: str, answers: Sequence[Sequence[str]]) -> ListScores:
    """QAMPARI's recall-5 (hits capped at 5, over at most 5 answers) and precision (listed items
    that equal some alias of some answer, after normalisation)."""
    items = [normalize_answer(item.strip())
             for item in list_items(remove_citations(clean_output(output)))]
    items = [item for item in items if item]
    aliases = [[normalize_answer(alias) for alias in group] for group in answers]
    flat = {alias for group in aliases for alias in group}
    hits = sum(any(alias in items for alias in group) for group in aliases)
    precision = sum(item in flat for item in items) / len(items) if items else 0.0
    return ListScores(min(5, hits) / min(5, len(aliases)), precision)


@dataclass(frozen=True)
class CitationScores:
    recall: float
    precision: float
    claims: int
    citations: int


def citation_scores(claims: Sequence[str], documents: Sequence[Document],
                    scorer: EntailmentScorer) -> CitationScores | None:
    """ALCE's citation recall and precision of one answer; None when it has no claim (ALCE
    leaves such an answer out of the mean).

    Recall: a claim counts when its cited documents (the first AT_MOST_CITATIONS) together
    entail it; a claim with no citation, or one beyond ``documents``, does not. ``documents`` are
    all the question's retrieved documents, shown or not, as ALCE checks them, and a citation
    [0] is the last of them (ALCE's index -1).
    Precision: per citation, of a supported claim with several citations, the citation counts
    unless it neither entails the claim alone nor is needed by the others; of any other claim,
    every citation counts as the claim's support does.
    """
    if not claims:
        return None
    supported = counted = total = 0
    for claim in claims:
        target = remove_citations(claim).strip()
        cited = [int(number) - 1 for number in _CITATION.findall(claim)]
        if not cited or any(i >= len(documents) for i in cited):
            continue
        cited = cited[:AT_MOST_CITATIONS]
        total += len(cited)
        if not _entails(scorer, documents, cited, target):
            continue
        supported += 1
        if len(cited) == 1:
            counted += 1
            continue
        for i in cited:
            rest = list(cited)
            rest.remove(i)
            needed = (_entails(scorer, documents, [i], target)
                      or not _entails(scorer, documents, rest, target))
            counted += needed
    return CitationScores(supported / len(claims), counted / total if total else 0.0,
                          len(claims), total)


def _entails(scorer: EntailmentScorer, documents: Sequence[Document], cited: Sequence[int],
             claim: str) -> bool:
    premise = "\n".join(documents[i].premise() for i in cited)
    return scorer.entails(premise, claim)
