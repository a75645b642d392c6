"""Conformance of the scores of the cite, long-QA and summarisation tasks with HELMET's own
post-processing and metrics, on the same hostile outputs (empty, leading newline, several
lines, only citations, Unicode, 10k characters, a repeated prefix, ...), at least 200 per
scorer, with and without the chat template (without one HELMET's ``eval.py`` puts the prompt's
``system_template`` before the output it scores).

- ``utils.parse_output`` for both prefixes HELMET parses with ("Answer:", "Summary:");
- long QA: ROUGE-L F1 (``default_post_process``) and ∞Bench's multiple-choice exact match
  (``load_infbench``'s ``choice_post_process``);
- summaries: ROUGE-Lsum F1 of ``load_multi_lexsum``'s ``post_process`` and of
  ``default_post_process`` (∞Bench Sum);
- ALCE (``eval_alce.main`` on a results file, as ``eval.py`` runs it): STR-EM, QAMPARI recall-5
  and precision, and citation recall and precision with a stub entailment scorer standing for
  TRUE (the same deterministic decision on both sides), then HELMET's Cite number.
  ``nltk`` has no punkt data here, so ALCE's ``sent_tokenize`` is given the project's sentence
  split (the row "Citation recall and precision" of docs/fidelity.md names this deviation); every
  other step is ALCE's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_lceval.benchmarks.helmet.cite import HEADLINE, NLI_SCORER, CiteTask
from pytest_lceval.benchmarks.helmet.cite_metrics import Document
from pytest_lceval.benchmarks.helmet.output import helmet_parse_output
from pytest_lceval.builtin_suites import builtin_task
from pytest_lceval.models.hf_text import HFText
from pytest_lceval.results.records import Case

from .helmet_hub import hub

TEN_THOUSAND = ("Mara Vell founded the observatory in 1902 [1]. " * 250)[:10_000]


def hostile(answers: list[str]) -> list[str]:
    """Outputs that break naive scorers, around the given answers."""
    gold, other = answers[0], answers[-1]
    return [
        "", " ", "\n", "\n\n\n", "Answer:", "Summary:", "answer:", "ANSWER: ", "[1]",
        "[1][2][3]", "[0]", "[99]", " [1] [2]", "<|im_end|>", "A", "a", "The", "the a an",
        "A.", "B. ", "(C)", "D", "Sorry I don't know", "N/A", "unanswerable",
        "Ünïcödé ✓ 漢字 😀 — naïve café", "\u200b\u2028\u00a0", "\ufffd", "💥" * 50,
        TEN_THOUSAND, TEN_THOUSAND.replace(" ", "\n"), "word " * 2000,
        gold, other, gold.upper(), gold.lower(), f" {gold} ", f"The {gold}.", f"{gold}!",
        f"Answer: {gold}", f"Answer:{gold}", f"answer: {gold}", f"Answer: Answer: {gold}",
        f"Summary: {gold}", f"Summary:\n{gold}", f"Summary: Summary: {gold}",
        f"\n{gold}", f"\n\n{gold}", f"\nAnswer: {gold}", f"Answer:\n{gold}",
        f"{gold}\nmore text on a second line", f"first line\n{gold}",
        f"Answer: wrong\nAnswer: {gold}", f"I think: {gold}\nAnswer: something else",
        f"{gold} [1].", f"{gold} [1][2].", f"{gold}[1] and {other}[2][3][4].",
        f"{gold} [1]. {other} [2]. Nothing here. Last one [0].",
        f"{gold} [12]. {other} [3]", f"[1] {gold}", f"{gold}, {other}, {gold}",
        f"{gold} [1], {other} [2], unrelated [3], ", f"{gold}.\n\n{other}.",
        f"{gold}<|im_end|>", f"<|im_end|>{gold}", f"{gold} | {other} |", f"{gold} [1 | 2]",
        f"{gold} 😀 [2]. {other} ✓ [1].", f"{gold}\t{other}", f"«{gold}»", f"'{gold}'",
        f"{gold} {gold} {gold} {gold} {gold}", f"{TEN_THOUSAND}{gold}", f"{gold}{TEN_THOUSAND}",
        f"U.S. Army officer {gold} [1]. Dr. {other} [2]. e.g. this [3].",
        f"A. {gold}", f"B. {other}", f"Answer: A. {gold}", f"the answer is {gold}",
    ]


ANSWER_SETS = [["Mara Vell", "M. Vell"], ["1902"], ["the North Pole", "North Pole"],
               ["a market town", "market town"]]
OUTPUTS = [(output, answers) for answers in ANSWER_SETS for output in hostile(answers)]


@pytest.fixture(scope="module")
def helmet_utils(reference: Callable[..., ModuleType]) -> ModuleType:
    return reference("helmet", "utils")


@pytest.fixture(scope="module")
def helmet_data(reference: Callable[..., ModuleType]) -> ModuleType:
    return reference("helmet", "data")


def case(gold: tuple[str, ...], prefix: str, **meta: Any) -> Case:
    return Case(index=0, prompt="", gold=gold, prompt_tokens=0,
                meta={"output_prefix": prefix, **meta})


@pytest.mark.parametrize("prefix", ["Answer:", "Summary:"])
def test_parse_output_is_helmets(helmet_utils: ModuleType, conformance: Any,
                                 prefix: str) -> None:
    outputs = [output for output, _ in OUTPUTS]
    differing = [o for o in outputs
                 if helmet_utils.parse_output(o, prefix) != helmet_parse_output(o, prefix)]
    conformance.record("HELMET metrics", "outputs", len(outputs), len(outputs) - len(differing))
    assert not differing


@pytest.mark.parametrize("template", [True, False])
@pytest.mark.parametrize("name", ["narrativeqa", "infbench_qa_leval"])
def test_rouge_l_f1_is_helmets(helmet_data: ModuleType, conformance: Any, name: str,
                               template: bool) -> None:
    """NarrativeQA's rule metric and ∞Bench QA's score: ``default_post_process``'s
    ``rougeL_f1``, the better of the output and its parsed answer."""
    task = builtin_task(name)
    prefix = "" if template else "Answer:"
    differing = []
    for output, answers in OUTPUTS:
        theirs, _ = helmet_data.default_post_process({"output": prefix + output},
                                                     {"answer": answers})
        ours = task.score(output, case(tuple(answers), prefix))
        if ours != theirs["rougeL_f1"]:
            differing.append((output, answers, ours, theirs["rougeL_f1"]))
    conformance.record("HELMET metrics", "outputs", len(OUTPUTS), len(OUTPUTS) - len(differing))
    assert not differing, differing[:3]


OPTIONS = ["Mara Vell", "the North Pole", "1902", "a"]
"""Options of the choice questions; the last is an article, which SQuAD normalisation drops."""


@pytest.fixture(scope="module")
def choice_post_process(helmet_data: ModuleType, smollm2: HFText) -> Callable[..., Any]:
    row = {"id": 0, "context": "", "input": "", "answer": [OPTIONS[0]], "options": OPTIONS}
    with pytest.MonkeyPatch.context() as patch, \
            hub(patch, helmet_data, smollm2.hf, {"longbook_choice_eng": [row]}):
        loaded = helmet_data.load_infbench("infbench_choice_eng_100", shots=0)
    post_process: Callable[..., Any] = loaded["post_process"]
    return post_process


def choice_outputs() -> Iterator[tuple[str, list[str]]]:
    for index, option in enumerate(OPTIONS):
        letter = "ABCD"[index]
        answer = [letter, f"{letter}. {option}"]
        for output in hostile([option, letter, f"{letter}. {option}"]):
            yield output, answer


@pytest.mark.parametrize("template", [True, False])
def test_choice_exact_match_is_helmets(choice_post_process: Callable[..., Any],
                                       conformance: Any, template: bool) -> None:
    task = builtin_task("infbench_choice_leval")
    prefix = "" if template else "Answer:"
    outputs = list(choice_outputs())
    differing = []
    for output, answer in outputs:
        theirs, _ = choice_post_process({"output": prefix + output}, {"answer": answer})
        ours = task.score(output, case(tuple(answer), prefix))
        if ours != float(theirs["exact_match"]):
            differing.append((output, answer, ours, theirs["exact_match"]))
    conformance.record("HELMET metrics", "outputs", len(outputs), len(outputs) - len(differing))
    assert not differing, differing[:3]


SUMMARIES = [
    "The plaintiffs sued the city over jail conditions. The court approved a settlement.",
    "Mara Vell founded the observatory in 1902.\nShe left in 1910.",
]


@pytest.fixture(scope="module")
def legal_post_process(helmet_data: ModuleType, smollm2: HFText) -> Callable[..., Any]:
    row = {"sources": ["x"], "summary/short": SUMMARIES[0], "summary/long": "y"}
    with pytest.MonkeyPatch.context() as patch, \
            hub(patch, helmet_data, smollm2.hf, {"train": [row, row], "validation": [row]}):
        loaded = helmet_data.load_multi_lexsum("multi_lexsum_100", shots=0)
    post_process: Callable[..., Any] = loaded["post_process"]
    return post_process


@pytest.mark.parametrize("template", [True, False])
@pytest.mark.parametrize("name", ["multi_lexsum", "infbench_sum_leval_gov_report"])
def test_rouge_lsum_f1_is_helmets(helmet_data: ModuleType,
                                  legal_post_process: Callable[..., Any], conformance: Any,
                                  name: str, template: bool) -> None:
    task = builtin_task(name)
    post_process = legal_post_process if name == "multi_lexsum" \
        else helmet_data.default_post_process
    prefix = "" if template else "Summary:"
    outputs = [(output, summary) for summary in SUMMARIES
               for output in hostile([summary, summary.split(".")[0]])]
    outputs += [(output, SUMMARIES[0]) for output, _ in OUTPUTS[:150]]
    differing = []
    for output, summary in outputs:
        theirs, _ = post_process({"output": prefix + output}, {"answer": summary})
        ours = task.score(output, case(("the long summary", summary), prefix))
        if ours != theirs["rougeLsum_f1"]:
            differing.append((output, ours, theirs["rougeLsum_f1"]))
    conformance.record("HELMET metrics", "outputs", len(outputs), len(outputs) - len(differing))
    assert not differing, differing[:3]


# -- ALCE ----------------------------------------------------------------------------------------

DOCUMENTS = tuple(Document(f"Title {i}", text) for i, text in enumerate([
    "Mara Vell founded the observatory in 1902.", "The North Pole expedition left Skye.",
    "Kessary is a market town.", "Chestnut flour won the contest.", "Paris, Lyon and Nice.",
    "Nothing relevant here.", "Tobin Quast came later.", "The last retrieved document."]))
SHOWN = 5
"""Documents the prompt showed; ALCE still checks a citation of the other three."""
ASQA_READINGS = (("Mara Vell", "M. Vell"), ("1902",), ("market town",))
QAMPARI_ANSWERS = (("Mara Vell",), ("1902", "nineteen oh two"), ("the North Pole",),
                   ("Skye",), ("market town",), ("Chestnut flour",), ("Paris",))
QUESTION = "Who founded what, and when?"


def entails(premise: str, claim: str) -> bool:
    """The stub standing for TRUE: deterministic, true for about two pairs in three, so that
    every branch of ALCE's precision check is taken."""
    return int(hashlib.sha256(f"{premise}\0{claim}".encode()).hexdigest(), 16) % 3 != 0


class StubScorer:
    label = "stub"
    fingerprint = "stub"

    def score(self, items: list[tuple[str, ...]]) -> list[bool]:
        return [entails(premise, hypothesis) for premise, hypothesis in items]


def alce_outputs() -> list[str]:
    outputs = []
    for answers in [*ASQA_READINGS, ("Paris", "Lyon")]:
        outputs += hostile(list(answers))
    return outputs


@pytest.fixture(scope="module")
def eval_alce(reference: Callable[..., ModuleType], punkt: None) -> Iterator[ModuleType]:
    module = reference("helmet", "eval_alce")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "autoais_model", object())  # never load TRUE
        patch.setattr(module, "_run_nli_autoais", lambda passage, claim: int(entails(passage,
                                                                                    claim)))
        patch.setattr(module.logger, "disabled", True)
        patch.setattr(module, "tqdm", lambda items: items)
        yield module


def alce_scores(eval_alce: ModuleType, folder: Path, kind: str, output: str,
                prefix: str) -> dict[str, Any]:
    """``eval_alce.main`` on a results file holding one answer, as ``eval.py`` writes it."""
    item: dict[str, Any] = {"question": QUESTION, "output": prefix + output,
                            "docs": [{"title": d.title, "text": d.text} for d in DOCUMENTS]}
    if kind == "asqa":
        item["qa_pairs"] = [{"short_answers": list(r)} for r in ASQA_READINGS]
    else:
        item["answers"] = [list(a) for a in QAMPARI_ANSWERS]
    path = folder / f"alce_{kind}_results.json"
    path.write_text(json.dumps({"data": [item]}))
    eval_alce.main(["--f", str(path), "--citations", "--no_rouge"])
    scores: dict[str, Any] = json.loads(Path(f"{path}.score").read_text())
    return scores


@pytest.mark.parametrize("template", [True, False])
@pytest.mark.parametrize("kind", ["asqa", "qampari"])
def test_alce_correctness_and_citations_are_helmets(
        eval_alce: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        conformance: Any, kind: str, template: bool) -> None:
    task = builtin_task(f"alce_{kind}")
    assert isinstance(task, CiteTask)
    prefix = "" if template else "Answer:"
    readings = ASQA_READINGS if kind == "asqa" else QAMPARI_ANSWERS
    outputs = alce_outputs()
    differing = []
    for output in outputs:
        theirs = alce_scores(eval_alce, tmp_path, kind, output, prefix)
        one = case(tuple(r[0] for r in readings), prefix, readings=readings, question=QUESTION,
                   documents=DOCUMENTS, passages=SHOWN)
        metrics = task.cell_metrics([output], [one], {NLI_SCORER: StubScorer()})
        correctness = "str_em" if kind == "asqa" else "qampari_rec_top5"
        ours = {correctness: task.score(output, one) * 100,
                "citation_rec": metrics["citation_recall"] * 100,
                "citation_prec": metrics["citation_precision"] * 100}
        if kind == "qampari":
            ours["qampari_prec"] = metrics["qampari_precision"] * 100
        expected = {key: theirs[key] for key in ours}
        headline = sum(theirs[key] for key in (correctness, "citation_rec",
                                               "citation_prec")) / 300
        if ours != pytest.approx(expected, abs=1e-9) or \
                metrics[HEADLINE] != pytest.approx(headline, abs=1e-12):
            differing.append((output, ours, expected))
    capsys.readouterr()
    conformance.record("HELMET load_alce", "outputs", len(outputs), len(outputs) - len(differing))
    assert not differing, differing[:3]
