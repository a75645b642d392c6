"""100-LongBench's judge rubrics (``eval_trec.py``'s ``qa_model_score`` and
``sum_model_score``), declared by name for the judge (``judge.rubrics.declare``):

- ``longbench_qa``: fluency 0-2 x correctness 0-3, over 6, asked once per correct answer and the
  best kept; the output's first line is judged.
- ``longbench_summary``: fluency 0/1 x precision against the expert summary (no recall), the best
  over the reference summaries; the output's first line is judged.

A case whose reply could not be read scores 0, as the reference scores it (``missing``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...judge import prompts
from ...judge.rubrics import FLUENCY, SUPPORTED_SENTENCES, declare
from ...results.records import Case
from ...results.score_metric import ScoreMetric
from ...tasks.judged import Ask, Field, Ratings, Rubric
from .text import first_line


class LongBenchQA(Rubric):
    name = "longbench_qa"
    metric = ScoreMetric("judge:longbench_qa", "a judge's fluency (0-2) x correctness (0-3), / 6, "
                                               "best over the gold answers (100-LongBench)")
    missing = 0.0
    scales = (Field("fluency", 0, 2), Field("correctness", 0, 3))

    def asks(self, output: str, case: Case, keypoints: Sequence[str]) -> list[Ask]:
        answer = first_line(output)
        return [Ask("answer", prompts.QA_GRADED_FLUENCY.format(
                    question=case.meta["question"], answers=gold, output=answer,
                    example='{"fluency": 2, "correctness": 3}'), self.scales)
                for gold in case.gold]

    def score(self, ratings: Sequence[Ratings], case: Case,
              keypoints: Sequence[str]) -> float:
        return max(r["fluency"] * r["correctness"] / 6 for r in ratings)


class LongBenchSummary(Rubric):
    name = "longbench_summary"
    metric = ScoreMetric("judge:longbench_summary", "a judge's fluency (0/1) x sentence "
                                                    "precision against the reference summary, "
                                                    "best over the references (100-LongBench)")
    missing = 0.0
    scales = (FLUENCY,)

    def asks(self, output: str, case: Case, keypoints: Sequence[str]) -> list[Ask]:
        text = first_line(output).strip()
        subject = prompts.subject("document")
        fluency = Ask("fluency", prompts.FLUENCY.format(output=text), (FLUENCY,))
        return [fluency, *(
            Ask("precision", prompts.PRECISION.format(
                subject=subject, reference=gold, output=text,
                example='{"precision": 2, "sentence_count": 3}'), SUPPORTED_SENTENCES)
            for gold in case.gold)]

    def score(self, ratings: Sequence[Ratings], case: Case,
              keypoints: Sequence[str]) -> float:
        fluency, *precisions = ratings
        return max(fluency["fluency"] * (p["precision"] / p["sentence_count"]
                                         if p["sentence_count"] else 0.0)
                   for p in precisions)


QA = LongBenchQA()
SUMMARY = LongBenchSummary()
declare(QA, SUMMARY)
