"""Conformance of the judge's ``helmet_*`` rubrics with HELMET's GPT-4o judge scripts
(``scripts/eval_gpt4_longqa.py``, ``scripts/eval_gpt4_summ.py``): the prompt the judge receives,
and how its reply becomes a score.

Prompts: with ``--lceval-helmet-judge-prompts`` (HELMET's own prompt strings read from its
checkout) the rubrics' prompts equal the scripts' byte for byte on hostile outputs, with and
without the chat template (the results file HELMET's judge reads holds the output after
``eval.py`` put the answer prefix before it). Without the option the wording is this project's:
the row "Judge prompts" of docs/fidelity.md.

Replies: HELMET reads the last ``{...}`` of a reply (``parse_json``) and multiplies what it finds;
the project reads the last JSON object holding every field as a whole number in range, and asks
once more when there is none. On every reply that HELMET turns into a score on the rubric's
scales the two scores are equal; the replies HELMET cannot score, or scores off its scales, are
the row "Reading a reply"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_lceval.benchmarks.helmet import rubrics as helmet
from pytest_lceval.benchmarks.helmet.judge_prompts import read_helmet_prompts
from pytest_lceval.judge.replies import Unparsed, parse_scores
from pytest_lceval.judge.rubrics import RUBRICS
from pytest_lceval.results.records import Case

TEN_THOUSAND = ("The plaintiffs sued the city. " * 400)[:10_000]
OUTPUTS = [
    "", " ", "\n", "Answer:", "Answer: Skye", "\nAnswer: Skye", "Skye\nThe island.",
    "Answer: wrong\nAnswer: Skye", "Summary:", "Summary: The case settled.",
    "  The case settled.  \n\n", "Ünïcödé ✓ 漢字 😀", "{curly} {{braces}} {0}", "%s %d",
    "[1][2]", "<|im_end|>", TEN_THOUSAND, "They sail to the island of Skye.\n\nThen home.",
    "The plaintiffs, residents of Fresno, sued the city.\nThe court approved a settlement.",
    "Answer: Answer: the North Pole", "\t\tThe North Pole", "«Skye»", "line\r\nline",
]
OUTPUTS = [*OUTPUTS, *(f"{a} {b}" for a in OUTPUTS[:12] for b in OUTPUTS[4:14])]
KEYPOINTS = ["The plaintiffs sued the city.", "The court approved a settlement.",
             "The case was dismissed in 2020.", "The city paid damages.",
             "A monitor was appointed."]
ANSWERS = ("Skye", "the island of Skye")


@pytest.fixture(scope="module")
def scripts(reference: Callable[..., ModuleType]) -> tuple[ModuleType, ModuleType]:
    return (reference("helmet", "eval_gpt4_longqa", ["scripts", "."]),
            reference("helmet", "eval_gpt4_summ", ["scripts", "."]))


@pytest.fixture
def helmets_words(scripts: tuple[ModuleType, ModuleType]) -> dict[str, str]:
    """HELMET's own prompts, as --lceval-helmet-judge-prompts reads them from the checkout."""
    return read_helmet_prompts(Path(str(scripts[0].__file__)).parents[1])


def case(gold: tuple[str, ...], prefix: str) -> Case:
    return Case(index=0, prompt="", gold=gold, prompt_tokens=0,
                meta={"output_prefix": prefix, "question": "Where do they sail?"})


@pytest.mark.parametrize("template", [True, False])
def test_qa_judge_prompt_is_helmets(scripts: tuple[ModuleType, ModuleType], conformance: Any,
                                    template: bool, helmets_words: dict[str, str]) -> None:
    longqa, _ = scripts
    prefix = "" if template else "Answer:"
    prompts = []
    for output in OUTPUTS:
        one = case(ANSWERS, prefix)
        [ask] = helmet.QA.worded(helmets_words).asks(output, one, [])
        theirs = longqa.judge_prompt.format(question=one.meta["question"],
                                            correct_answers=list(ANSWERS),
                                            parsed_output=longqa.parse_output(prefix + output))
        prompts.append((ask.prompt, theirs, output))
    conformance.compare("HELMET judge", "prompts", prompts,
                        option="--lceval-helmet-judge-prompts")


@pytest.mark.parametrize("template", [True, False])
@pytest.mark.parametrize("rubric", ["helmet_summary_legal", "helmet_summary_book",
                                    "helmet_summary_document"])
def test_summary_judge_prompts_are_helmets(scripts: tuple[ModuleType, ModuleType],
                                           conformance: Any, rubric: str, template: bool,
                                           helmets_words: dict[str, str]) -> None:
    """eval_gpt4_summ.py's three prompts per output (fluency, recall, precision): the legal
    ones for Multi-LexSum (expert summary: ``summary/long``, the project's first gold), the
    ``_book`` ones for ∞Bench Sum (expert summary: ``answer[0]``)."""
    _, summ = scripts
    book = "" if rubric == "helmet_summary_legal" else "_book"
    prefix = "" if template else "Summary:"
    expert = "The long expert summary of the case."
    prompts = []
    for output in OUTPUTS:
        asks = RUBRICS[rubric].worded(helmets_words).asks(output, case((expert, "short"), prefix),
                                                          KEYPOINTS)
        text = (prefix + output).strip()
        listed = "\n".join(f"{i + 1}. {kp}" for i, kp in enumerate(KEYPOINTS))
        theirs = [getattr(summ, f"fluency_prompt{book}").format(text=text),
                  getattr(summ, f"recall_prompt{book}").format(keypoints=listed, summary=text),
                  getattr(summ, f"precision_prompt{book}").format(expert_summary=expert,
                                                                 summary=text)]
        prompts += [(ask.prompt, want, output) for ask, want in zip(asks, theirs, strict=True)]
    conformance.compare("HELMET judge", "prompts", prompts,
                        option="--lceval-helmet-judge-prompts")


BEFORE = ["", "Reasoning first.\n", "The answer agrees with the first correct answer.\n\n",
          "**Assessment**: fine.\n", "Score:\n", "1. point one\n2. point two\n", "Output: ",
          "Ünïcödé reasoning ✓\n", "Step by step: (a) [b] <c>\n", "\n\n\n"]
AFTER = ["", "\n", "\nThat is my verdict.", " ", "\n\n(end)"]


def replies(fields: dict[str, int]) -> list[str]:
    """Judge replies around the scores ``fields``: well formed, and not."""
    good = json.dumps(fields)
    name = next(iter(fields))
    rest = {k: v for k, v in fields.items() if k != name}
    layouts = [good, json.dumps(fields, separators=(",", ":")), json.dumps(fields, indent=2)]
    wrapped = [f"{before}{layout}{after}" for layout in layouts for before in BEFORE
               for after in AFTER]
    return [*wrapped,
        good, f"Reasoning first.\n{good}", f"{good}\nThat is my verdict.",
        f"```json\n{good}\n```", f"Step 1: {{thinking}}.\n{good}", f"{good} {good}",
        f'{{"note": "draft"}}\n{good}', f"{good}\n{{\"note\": \"after\"}}",
        json.dumps({**fields, "extra": 1}), json.dumps({k: float(v) for k, v in fields.items()}),
        json.dumps({k: str(v) for k, v in fields.items()}), json.dumps(rest),
        json.dumps({**fields, name: 7}), json.dumps({**fields, name: -1}),
        json.dumps({**fields, name: 1.5}), json.dumps({**fields, name: True}), "", "no json",
        "{not json}", "{" + good, good.replace('"', "'"), f"Output: {good}",
        json.dumps({"supported_key_points": [1, 2], **fields}),
        json.dumps({"scores": fields}), f"{good[:-1]}, \"nested\": {{\"a\": 1}}}}",
    ]


def helmet_reading(parse_json: Callable[[str], Any], reply: str,
                   scales: dict[str, tuple[int, int | None]]) -> dict[str, int] | None:
    """What HELMET's judge script makes of one reply, when that is a rating on the rubric's
    scales (whole numbers in range); None when HELMET drops it, fails on it, or rates off the
    scales."""
    found = parse_json(reply)
    if not isinstance(found, dict) or any(name not in found for name in scales):
        return None
    values = {name: found[name] for name in scales}
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v == int(v)
               and low <= v and (high is None or v <= high)
               for v, (low, high) in zip(values.values(), scales.values(), strict=True)):
        return None
    return {name: int(value) for name, value in values.items()}


def project_reading(reply: str, rubric: str, aspect: int) -> dict[str, int] | None:
    ask = RUBRICS[rubric].asks("Skye", case(("expert", "short"), ""), KEYPOINTS)[aspect]
    try:
        return parse_scores(reply, ask.fields)
    except Unparsed:
        return None


ASPECTS = [  # rubric, ask index, a reply's fields, the scales HELMET's arithmetic needs
    ("helmet_qa", 0, {"fluency": 1, "correctness": 2},
     {"fluency": (0, 1), "correctness": (0, 3)}),
    ("helmet_summary_legal", 0, {"fluency": 1}, {"fluency": (0, 1)}),
    ("helmet_summary_legal", 1, {"recall": 2}, {"recall": (0, len(KEYPOINTS))}),
    ("helmet_summary_book", 2, {"precision": 2, "sentence_count": 3},
     {"precision": (0, None), "sentence_count": (0, None)}),
]


@pytest.mark.parametrize(("rubric", "aspect", "fields", "scales"), ASPECTS)
def test_replies_helmet_scores_score_the_same(scripts: tuple[ModuleType, ModuleType],
                                              conformance: Any, rubric: str, aspect: int,
                                              fields: dict[str, int],
                                              scales: dict[str, tuple[int, int | None]]) -> None:
    longqa, summ = scripts
    parse_json = longqa.parse_json if rubric == "helmet_qa" else summ.parse_json
    variants = [{**fields, name: value} for name in fields for value in range(6)]
    scored = differing = 0
    for reply in (reply for variant in variants for reply in replies(variant)):
        theirs = helmet_reading(parse_json, reply, scales)
        ours = project_reading(reply, rubric, aspect)
        if theirs is None:
            continue  # HELMET drops, fails on, or rates off the scales: docs/fidelity.md
        if theirs.get("precision", 0) > theirs.get("sentence_count", 10**9):
            continue  # more supported sentences than sentences: the project refuses it
        scored += 1
        differing += ours != theirs
    conformance.record("HELMET judge", "outputs", scored, scored - differing)
    assert scored >= 200 and differing == 0
