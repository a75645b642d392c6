"""The judge's instructions, written for this project after the rubrics of HELMET (appendix
tables; ``scripts/eval_gpt4_longqa.py``, ``scripts/eval_gpt4_summ.py``) and 100-LongBench
(``utils/metrics.py``): the same scales, the same fields in the same JSON reply, the same
reference material shown to the judge; the wording and the worked examples are this project's
(docs/fidelity.md). Placeholders are filled with ``str.format``.
"""

from __future__ import annotations

_ROLE = ("You are an impartial grader. You judge one piece of text written by a system "
         "against reference material, following the rubric below exactly.\n\n")

_REASON_THEN_JSON = ("First explain your assessment briefly, step by step. Then, on the last "
                     "line, give the scores as a JSON object exactly like this: {example}\n\n")

QA = _ROLE + """The text answers a question about a document you are not shown. You are given the
question and the correct answers instead: an answer that matches one of them deserves full marks.

Rubric
Fluency:
- 0: the answer is incoherent, repeats itself (even in other words), is cut off, or is gibberish.
  A coherent answer that repeats itself or is unfinished still gets 0.
- 1: the answer is coherent, does not repeat itself, and is grammatical.
Correctness:
- 0: the answer agrees with none of the correct answers.
- 1: the answer agrees with part of a correct answer (say the question asks for a place and a
  year, and only the year is right).
- 2: the answer fully agrees with a correct answer but adds unrelated information. Details that
  are relevant to the question, even if the correct answers lack them, are not unrelated.
- 3: the answer fully agrees with a correct answer and says only what is relevant. A longer
  answer is fine: "They sail to the island of Skye" earns 3 against the correct answer "Skye".

""" + _REASON_THEN_JSON + """Question: {question}
Correct answers: {answers}
Answer: {output}
"""

QA_GRADED_FLUENCY = _ROLE + """The text answers a question about a document you are not
shown. You are given the question and a correct answer instead: an answer that matches it
deserves full marks.

Rubric
Fluency:
- 0: the answer is incoherent.
- 1: the answer is coherent and grammatical but repeats itself.
- 2: the answer is coherent, does not repeat itself, and is grammatical.
Correctness:
- 0: the answer does not agree with the correct answer.
- 1: the answer agrees with part of the correct answer (say the question asks for a place and a
  year, and only the year is right).
- 2: the answer fully agrees with the correct answer but adds unrelated information. Details that
  are relevant to the question are not unrelated.
- 3: the answer fully agrees with the correct answer and says only what is relevant. A longer
  answer is fine: "They sail to the island of Skye" earns 3 against the correct answer "Skye".

""" + _REASON_THEN_JSON + """Question: {question}
Correct answers: {answers}
Answer: {output}
"""

FLUENCY = _ROLE + """Judge only the fluency of the text: is it coherent, free of repetition,
and grammatical?

Rubric
- 0: incoherent, repetitive (even in other words), incomplete, or gibberish. For example a text
  that is only "Summary:", a text that loops over the same sentence, or a run of stray symbols.
- 1: coherent, not repetitive, fluent and grammatical. A fluent text whose last sentence is cut
  off still gets 1.

Give only the score, with no explanation, as a JSON object exactly like this: {{"fluency": 1}}

Text: "{output}"
"""

_SUBJECTS = {
    "legal": ("a summary of a civil lawsuit, written from the case's legal documents. A good "
              "one describes the background, the parties and the outcome of the case"),
    "book": ("a summary of a novel. A good one covers the plot and the characters of the story"),
    "document": ("a summary of a long document (a report, a transcript or an article)"),
}
"""What the summary summarises, as the judge is told (HELMET words the prompts per data set)."""

RECALL = _ROLE + """The text is {subject}. You are given the key points of an expert-written
summary of the same material.

Rubric
Recall:
- Decide, for each key point, whether the text states its facts (for a key point with several
  facts, whether it states most of them). Paraphrase counts; a point the text contradicts does
  not.
- The score is the number of key points the text states.
- Example: key points "1. The company was sued in 2019." "2. The suit was about unpaid wages."
  "3. The parties settled in 2021." against the text "In 2019 workers sued the company over
  wages it had not paid." states points 1 and 2, so the score is 2: {{"recall": 2}}

""" + _REASON_THEN_JSON + """Key points:
{keypoints}

Text: "{output}"
"""

PRECISION = _ROLE + """The text is {subject}. You are given an expert-written summary of the
same material.

Rubric
Precision:
- Split the text into its sentences. Decide, for each sentence, whether the expert summary
  supports its main facts (minor details the expert summary leaves out do not matter).
- "sentence_count" is the number of sentences of the text; "precision" is the number of them
  that are supported.
- Example: the text "The workers sued in 2019. They asked for back pay. The judge was Jane
  Roe." against an expert summary that mentions the 2019 suit over unpaid wages but no judge
  has 3 sentences of which 2 are supported: {{"precision": 2, "sentence_count": 3}}

""" + _REASON_THEN_JSON + """Expert summary: <start of summary>{reference}<end of summary>

Text: <start of summary>{output}<end of summary>
"""

KEYPOINTS = """Below is an expert-written summary. List its key points: short statements that
each carry one main fact of the summary and can be read on their own. Together they must cover
everything the summary says. Write one per line, numbered "1.", "2.", and so on, and nothing
else.

Summary: <start of summary>{reference}<end of summary>
"""

RETRY = """{prompt}

Your earlier reply was:
<start of reply>{reply}<end of reply>
It could not be used: {problem}. Reply again, ending with the JSON object {example}.
"""
"""The one retry of an unusable reply: the original instructions, the reply and why it failed."""


def subject(kind: str) -> str:
    return _SUBJECTS[kind]
