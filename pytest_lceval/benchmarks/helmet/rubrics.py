"""HELMET's judge rubrics (its GPT-4o judge scripts), declared by name for the judge
(``judge.rubrics.declare``):

- ``helmet_qa`` (NarrativeQA): fluency 0/1 x correctness 0-3, over 3; the output is read as
  HELMET's ``parse_output`` reads it (after "Answer:", newlines as spaces).
- ``helmet_summary_{legal,book,document}``: fluency 0/1, recall of the key points and precision
  of the sentences against the expert summary; F1 of recall and precision, times fluency.

A case whose reply could not be read is left out of the mean, as HELMET does (``missing``
None). Asked in this project's words (``judge/prompts.py``) unless the run hands them HELMET's
own (``--lceval-helmet-judge-prompts``, ``judge_prompts_plugin``), which they fill as the
scripts do.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...judge import prompts
from ...judge.rubrics import FLUENCY, SUPPORTED_SENTENCES, declare
from ...results.records import Case
from ...results.score_metric import ScoreMetric
from ...tasks.judged import Ask, Field, Ratings, Rubric
from .output import helmet_parse_output, helmet_scored


def helmet_answer(output: str, prefix: str = "Answer:") -> str:
    """The judge script's ``parse_output`` (``eval_gpt4_longqa.py``): HELMET's, on the output
    with its newlines made spaces."""
    return helmet_parse_output(output.replace("\n", " "), prefix)


class HelmetQA(Rubric):
    name = "helmet_qa"
    metric = ScoreMetric("judge:helmet_qa", "a judge's fluency (0/1) x correctness (0-3), / 3 "
                                            "(HELMET's GPT-4o rubric)")
    scales = (FLUENCY, Field("correctness", 0, 3))

    def asks(self, output: str, case: Case, keypoints: Sequence[str]) -> list[Ask]:
        answer = helmet_answer(helmet_scored(output, case.meta))
        if self.texts:  # eval_gpt4_longqa.py's own prompt, filled as the script fills it
            prompt = self.texts["judge_prompt"].format(
                question=case.meta["question"], correct_answers=list(case.gold),
                parsed_output=answer)
        else:
            prompt = prompts.QA.format(question=case.meta["question"], answers=list(case.gold),
                                       output=answer, example='{"fluency": 1, "correctness": 3}')
        return [Ask("answer", prompt, self.scales)]

    def score(self, ratings: Sequence[Ratings], case: Case,
              keypoints: Sequence[str]) -> float:
        (rating,) = ratings
        return rating["fluency"] * rating["correctness"] / 3


class HelmetSummary(Rubric):
    """``kind`` picks the words that tell the judge what was summarised (legal, book,
    document)."""

    needs_keypoints = True
    scales = (FLUENCY,)

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"helmet_summary_{kind}"
        self.metric = ScoreMetric(
            f"judge:{self.name}", "a judge's fluency (0/1) x F1 of key-point recall and "
                                  "sentence precision against the expert summary (HELMET's "
                                  "GPT-4o rubric)")

    def asks(self, output: str, case: Case, keypoints: Sequence[str]) -> list[Ask]:
        text = helmet_scored(output, case.meta).strip()
        listed = "\n".join(f"{i}. {point}" for i, point in enumerate(keypoints, 1))
        words = self._helmets if self.texts else self._ours
        fluency, recall, precision = words(text, listed, case.gold[0])
        return [Ask("fluency", fluency, (FLUENCY,)),
                Ask("recall", recall, (Field("recall", 0, len(keypoints)),)),
                Ask("precision", precision, SUPPORTED_SENTENCES)]

    def _ours(self, text: str, listed: str, expert: str) -> tuple[str, str, str]:
        subject = prompts.subject(self.kind)
        return (prompts.FLUENCY.format(output=text),
                prompts.RECALL.format(subject=subject, keypoints=listed, output=text,
                                      example='{"recall": 2}'),
                prompts.PRECISION.format(subject=subject, reference=expert, output=text,
                                         example='{"precision": 2, "sentence_count": 3}'))

    def _helmets(self, text: str, listed: str, expert: str) -> tuple[str, str, str]:
        """eval_gpt4_summ.py's own prompts, filled as the script fills them: the legal ones for
        Multi-LexSum, the ``_book`` ones (∞Bench Sum's) for every other summary."""
        book = "" if self.kind == "legal" else "_book"
        return (self.texts[f"fluency_prompt{book}"].format(text=text),
                self.texts[f"recall_prompt{book}"].format(keypoints=listed, summary=text),
                self.texts[f"precision_prompt{book}"].format(expert_summary=expert,
                                                             summary=text))

    def score(self, ratings: Sequence[Ratings], case: Case,
              keypoints: Sequence[str]) -> float:
        fluency, recall, precision = ratings
        r = recall["recall"] / len(keypoints) if keypoints else 0.0
        p = (precision["precision"] / precision["sentence_count"]
             if precision["sentence_count"] else 0.0)
        return fluency["fluency"] * 2 * r * p / (r + p) if r + p else 0.0


QA = HelmetQA()
SUMMARY_LEGAL = HelmetSummary("legal")
SUMMARY_BOOK = HelmetSummary("book")
SUMMARY_DOCUMENT = HelmetSummary("document")
declare(QA, SUMMARY_LEGAL, SUMMARY_BOOK, SUMMARY_DOCUMENT)
