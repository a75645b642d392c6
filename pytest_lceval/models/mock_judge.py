"""``mock:judge``: a deterministic judge for the plugin's own tests. It reads the prompts of
``judge/prompts.py`` and rates by word overlap: an answer holding a correct answer is correct,
a text that repeats a sentence is not fluent, a key point (or sentence) is present (supported)
when most of its words are in the text (expert summary). It writes key points as the reference
summary's sentences.

``mode=garbage`` answers every prompt without scores; ``mode=retry`` answers a first prompt
without scores and its retry properly; ``mode=strict`` rates correctness 3 only for an exact
answer (a judge that disagrees with the default one, for agreement tests).
"""

from __future__ import annotations

import json
import re

from ..foundation.answer_text import normalize_answer

JUDGE_MODES = ("", "garbage", "retry", "strict")
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")
_SUMMARY = re.compile(r"<start of summary>(.*?)<end of summary>", re.DOTALL)


def judge_reply(prompt: str, mode: str) -> str:
    """The reply to one judge prompt."""
    retry = "Your earlier reply was:" in prompt
    if mode == "garbage" or (mode == "retry" and not retry):
        return "I am not able to grade this text."
    if retry:
        prompt = prompt[:prompt.index("Your earlier reply was:")]
    if "List its key points" in prompt:
        (reference,) = _SUMMARY.findall(prompt)
        return "\n".join(f"{i}. {s}" for i, s in enumerate(_sentences(reference), 1))
    if "Judge only the fluency" in prompt:
        return json.dumps({"fluency": _fluent(_quoted_text(prompt))})
    if "Key points:" in prompt:
        points = re.findall(r"^\d+\. (.*)$", prompt.split("Key points:")[-1], re.MULTILINE)
        text = _quoted_text(prompt)
        found = sum(_covered(point, text) for point in points)
        return f"Counting the points the text states.\n{json.dumps({'recall': found})}"
    if "Expert summary:" in prompt:
        reference, text = _SUMMARY.findall(prompt)[-2:]
        sentences = _sentences(text)
        supported = sum(_covered(sentence, reference) for sentence in sentences)
        return json.dumps({"precision": supported, "sentence_count": len(sentences)})
    return _rate_answer(prompt, strict=mode == "strict")


def _rate_answer(prompt: str, strict: bool) -> str:
    answers = prompt.split("\nCorrect answers: ")[-1].split("\nAnswer: ")[0]
    output = prompt.split("\nAnswer: ")[-1].strip()
    golds = re.findall(r"'([^']*)'", answers) or [answers]
    said = normalize_answer(output)
    if strict:
        correct = any(normalize_answer(gold) == said for gold in golds)
    else:
        correct = any(normalize_answer(gold) and normalize_answer(gold) in said for gold in golds)
    fluency = _fluent(output) * (2 if "- 2: the answer is coherent" in prompt else 1)
    return ("The answer is compared with the correct answers.\n"
            + json.dumps({"fluency": fluency, "correctness": 3 if correct else 0}))


def _quoted_text(prompt: str) -> str:
    return prompt.rsplit('Text: "', 1)[-1].rsplit('"', 1)[0]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def _fluent(text: str) -> int:
    sentences = [normalize_answer(s) for s in _sentences(text)]
    return int(bool(sentences) and len(set(sentences)) == len(sentences))


def _covered(claim: str, text: str) -> bool:
    words = set(normalize_answer(claim).split())
    return bool(words) and len(words & set(normalize_answer(text).split())) * 2 >= len(words)
