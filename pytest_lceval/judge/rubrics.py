"""The rubrics: what the judge is asked about one output, and how its ratings make the case's
score.

A rubric (``tasks.judged.Rubric``) turns (output, case) into ``Ask`` objects (one prompt each,
with the fields its reply must hold) and their ratings into a score from 0 to 1. It also says
what a case whose reply could not be read scores (``missing``): HELMET leaves such cases out of
the mean, 100-LongBench scores them 0; either way the cell counts them (``judge_unparsed``).

The rubrics:

- ``helmet_qa`` (NarrativeQA): fluency 0/1 x correctness 0-3, over 3; the output is read as
  HELMET's ``parse_output`` reads it (after "Answer:", newlines as spaces).
- ``helmet_summary_{legal,book,document}``: fluency 0/1, recall of the key points and precision
  of the sentences against the expert summary; F1 of recall and precision, times fluency.
- ``longbench_qa`` (100-LongBench): fluency 0-2 x correctness 0-3, over 6, asked once per correct
  answer and the best kept; the output's first line is judged.
- ``longbench_summary``: fluency 0/1 x precision against the expert summary (no recall), the best
  over the reference summaries; the output's first line is judged.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..results.records import Case
from ..results.score_metric import ScoreMetric
from ..tasks.judged import Ask, Field, Ratings, Rubric
from ..tasks.metrics import helmet_parse_output, helmet_scored
from . import prompts


def helmet_answer(output: str, prefix: str = "Answer:") -> str:
    """The judge script's ``parse_output`` (``eval_gpt4_longqa.py``): HELMET's, on the output
    with its newlines made spaces."""
    return helmet_parse_output(output.replace("\n", " "), prefix)


def first_line(output: str) -> str:
    """100-LongBench's reading of a prediction: its first line after leading newlines."""
    return output.lstrip("\n").split("\n")[0]


FLUENCY = Field("fluency", 0, 1)
SUPPORTED_SENTENCES = (Field("precision", 0, None, at_most="sentence_count"),
                       Field("sentence_count", 0))
"""A precision reply: supported sentences, at most the sentences counted."""


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


RUBRICS: dict[str, Rubric] = {rubric.name: rubric for rubric in (
    HelmetQA(), HelmetSummary("legal"), HelmetSummary("book"), HelmetSummary("document"),
    LongBenchQA(), LongBenchSummary())}
