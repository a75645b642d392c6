"""HELMET's cite category: the prompt against HELMET's template, the ALCE loader on self-made
files in ALCE's format, ALCE's metrics on hand cases (a fake entailment scorer for citations),
the local-NLI scorer on a tiny classifier, and whole runs of the suite."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from run_outputs import read_results
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.cite import (
    ASQA,
    NLI_SCORER,
    NO_SCORER_NOTE,
    QAMPARI,
    CiteTask,
)
from pytest_lceval.benchmarks.helmet.cite_data import load_alce, source_of
from pytest_lceval.benchmarks.helmet.cite_metrics import (
    Document,
    citation_scores,
    qampari_claims,
    qampari_scores,
    remove_citations,
    sentences,
    str_em,
)
from pytest_lceval.benchmarks.helmet.cite_plugin import HFEntailment, scorer_for
from pytest_lceval.foundation.data import DataError, DataSource
from pytest_lceval.foundation.grid import Cell
from pytest_lceval.models.base import Renderer
from pytest_lceval.models.mock import WordTokenizer
from pytest_lceval.models.scoring import StoredScoring
from pytest_lceval.results.records import Case
from pytest_lceval.store.database import Store
from pytest_lceval.tasks.base import BuildContext

FIXTURE_DATA = Path(__file__).resolve().parent / "data" / "helmet"
ALCE = FIXTURE_DATA / "alce"
SUITE_FILE = (Path(__file__).resolve().parents[1] / "suites" / "test_cite.py").read_text()
ASQA_INSTRUCTION = (
    "Instruction: Write an accurate, engaging, and concise answer for the given question using "
    "only the provided search results (some of which might be irrelevant) and cite them "
    "properly. Use an unbiased and journalistic tone. Always cite for any factual claim. When "
    "citing a document, surround its ID with square brackets, such as [x] to cite document x. "
    "To cite multiple documents, simply concatenate the citation markers; for example, use "
    "[x][y][z] to cite the documents with ID x, y, and z. Cite at least one document and at "
    "most three documents in each sentence. If multiple documents support the sentence, only "
    "cite a minimum sufficient subset of the documents.")
needs_shared_data = pytest.mark.skipif(not (SHARED_DATA / "nq_oracle").is_dir(),
                                       reason=f"no shared data at {SHARED_DATA}")


def context(data: Path | None, template: bool = False) -> BuildContext:
    tokenizer = WordTokenizer()
    return BuildContext(tokenizer, Renderer((lambda user: f"<u>{user}</u>") if template else None,
                                            lambda text: len(tokenizer.encode(text))),
                        DataSource(data), seed=4)


class KeywordScorer:
    """Entails when every word of the hypothesis in ``facts`` appears in the premise."""

    label = "fake:keywords"

    def __init__(self, *facts: str) -> None:
        self.facts = facts
        self.asked: list[tuple[str, str]] = []
        self.fingerprint = "keywords:" + ",".join(facts)

    def score(self, items: list[tuple[str, ...]]) -> list[bool]:
        return [self.entails(premise, hypothesis) for premise, hypothesis in items]

    def entails(self, premise: str, hypothesis: str) -> bool:
        self.asked.append((premise, hypothesis))
        needed = [fact for fact in self.facts if fact in hypothesis]
        return bool(needed) and all(fact in premise for fact in needed)


# -- the prompt ----------------------------------------------------------------------------------

def test_asqa_prompt_is_helmets_template_with_two_demonstrations() -> None:
    [case] = ASQA.build(Cell("cite", "alce_asqa", 4096, None, 1), context(FIXTURE_DATA))
    demo_heads = [line for line in case.prompt.split("\n") if line.startswith("Question: ")]
    assert demo_heads == ["Question: When did the Valen river ferry close?",
                          "Question: Who wrote the song Lanterns at Dusk?",
                          "Question: Who founded the Orrin Observatory?"]
    assert case.prompt.startswith(ASQA_INSTRUCTION + "\n\nQuestion: When did the Valen river")
    assert case.prompt.count("\n\n\n" + ASQA_INSTRUCTION) == 2  # HELMET's demo separator
    assert case.prompt.endswith(
        "\n\n\n" + ASQA_INSTRUCTION + "\n\nQuestion: Who founded the Orrin Observatory?\n\n"
        "Document [1](Title: Orrin Observatory): The Orrin Observatory was founded in 1902 by "
        "the astronomer Mara Vell on a hill above the town of Kessary.\n\n"
        "Document [2](Title: Orrin Observatory): In 1931 Tobin Quast founded a second site of "
        "the Orrin Observatory in the lowlands, where the sky was darker.\n\n"
        "Document [3](Title: Kessary): Kessary is a market town known for its clock tower and "
        "its annual lantern fair.\n\nAnswer:")
    assert case.max_new_tokens == 300 and case.stop == () and ASQA.use_chat_template
    assert case.meta["source"] == "data:alce" and case.gold == ("Mara Vell", "Tobin Quast")


def test_qampari_demonstrations_end_their_documents_with_one_newline() -> None:
    [case] = QAMPARI.build(Cell("cite", "alce_qampari", 4096, None, 1), context(FIXTURE_DATA))
    assert ("Always cite one and only one document for each answer. When citing a document"
            in case.prompt)
    demo_end = case.prompt.index("\n\n\nInstruction: ")
    assert "\nAnswer: " in case.prompt[:demo_end]
    assert "\n\nAnswer: " not in case.prompt[:demo_end]


def test_documents_follow_retrieval_order_and_shrink_with_the_length() -> None:
    build = context(FIXTURE_DATA)
    long = ASQA.build(Cell("cite", "alce_asqa", 4096, None, 3), build)
    # one token short of the first case's whole prompt: its last document must go
    length = long[0].total_tokens - 1
    [short] = ASQA.build(Cell("cite", "alce_asqa", length, None, 1), build)
    assert short.meta["question"] == long[0].meta["question"] and short.total_tokens <= length
    shown = long[0].meta["passages"]
    assert short.meta["passages"] == shown - 1
    assert short.meta["documents"][:shown - 1] == long[0].meta["documents"][:shown - 1]
    # every retrieved document stays, for ALCE's citation check
    assert len(short.meta["documents"]) == len(long[0].meta["documents"])


def test_a_length_too_short_for_the_demonstrations_does_not_fit() -> None:
    from pytest_lceval.tasks.base import CellDoesNotFit

    with pytest.raises(CellDoesNotFit, match=r"take \d+ tokens; no document fits the prompt "
                                             r"budget of 212 tokens"):
        ASQA.build(Cell("cite", "alce_asqa", 512, None, 1), context(FIXTURE_DATA))


@needs_shared_data
def test_substitute_places_the_gold_passage_among_screened_distractors() -> None:
    cases = QAMPARI.build(Cell("cite", "alce_qampari", 4096, None, 3), context(SHARED_DATA))
    for case in cases:
        assert case.meta["source"] == "substitute:nq_oracle"
        assert case.depth is not None and 0 <= case.depth <= 100
        holding = [doc for doc in case.meta["documents"]
                   if any(answer.lower() in doc.text.lower() for answer in case.gold)]
        assert len(holding) >= 1 and case.total_tokens <= 4096
        # two demonstrations of held-out questions, each answer citing its gold document
        demos = case.prompt[: case.prompt.rindex("Instruction: ")]
        assert len(re.findall(r"\nAnswer: [^\n]+ \[[1-5]\]\.", demos)) == 2
        assert "Question: " + case.meta["question"] + "\n" not in demos


# -- the data ------------------------------------------------------------------------------------

def test_alce_loader_reads_readings_and_documents_in_order() -> None:
    asqa = load_alce(ALCE / "asqa_eval_gtr_top2000.json", "asqa")
    assert asqa[0].readings == (("Mara Vell", "M. Vell"), ("Tobin Quast",))
    assert [doc.title for doc in asqa[0].documents] == ["Orrin Observatory",
                                                         "Orrin Observatory", "Kessary"]
    qampari = load_alce(ALCE / "qampari_eval_gtr_top2000.json", "qampari")
    assert qampari[0].readings == (("Field Notes", "The Field Notes"), ("Harth Winter",),
                                   ("Lantern Fair",))


def test_alce_loader_names_the_broken_record(tmp_path: Path) -> None:
    rows = json.loads((ALCE / "asqa_eval_gtr_top2000.json").read_text())
    del rows[1]["qa_pairs"]
    path = tmp_path / "asqa.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(DataError, match="record 1 lacks 'qa_pairs'"):
        load_alce(path, "asqa")


def test_without_data_the_error_names_both_folders(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"alce/asqa_eval_gtr_top2000\.json with "
                                        r"alce/asqa_revised\.json .*"
                                        r"nq_oracle/nq-open-oracle\.jsonl\.gz"):
        source_of(DataSource(tmp_path), "asqa_eval_gtr_top2000.json", "asqa_revised.json")
    # an alce/ folder without HELMET's prompt file names it; the task then has no cells
    (tmp_path / "alce").mkdir()
    (tmp_path / "alce" / "asqa_eval_gtr_top2000.json").write_text("[]")
    assert ASQA.missing_data(DataSource(tmp_path)) == (
        "alce/asqa_revised.json (HELMET's ALCE data and its prompts/asqa_revised.json) in "
        "--lceval-data, or no alce/ folder to use the NQ-oracle substitute")
    assert ASQA.missing_data(DataSource(FIXTURE_DATA)) is None


# -- the metrics ---------------------------------------------------------------------------------

def test_str_em_is_the_share_of_readings_answered() -> None:
    readings = (("Mara Vell", "M. Vell"), ("Tobin Quast",))
    assert str_em("It was Mara Vell [1].", readings) == 0.5
    assert str_em("M. Vell [1] and Tobin\n[2]Quast.", readings) == 0.5  # citation splits a name
    assert str_em("the astronomer mara vell; later TOBIN QUAST", readings) == 1.0


def test_qampari_recall_caps_at_five_and_precision_counts_listed_items() -> None:
    answers = [[f"answer {i}"] for i in range(7)]
    scores = qampari_scores("Answer 0 [1], answer 1 [1], answer 2, answer 3, answer 4, "
                            "answer 5, wrong one [2].", answers)
    assert scores.recall_top5 == 1.0 and scores.precision == 6 / 7
    two = qampari_scores("The Field Notes [1], Nothing [2]", [["Field Notes"], ["Harth"]])
    assert two.recall_top5 == 0.5 and two.precision == 0.5
    assert qampari_scores("", [["x"]]).precision == 0.0


def test_claims_are_sentences_or_list_items_with_their_citations() -> None:
    # Punkt, as ALCE: an abbreviation does not end a claim, a claim under 5 characters is dropped
    assert sentences("The U.S. Army built it [1]. No! Quast added a site [2][3]! ") == [
        "The U.S. Army built it [1].", "Quast added a site [2][3]!"]
    assert qampari_claims("Which towns?", "Wulboumdale [1], Feastbreastead [2].") == [
        "Which towns? Wulboumdale [1]", "Which towns? Feastbreastead [2]"]
    assert remove_citations("Vell [1][2] and Quast [3].") == "Vell and Quast."


DOCS = (Document("Orrin", "Mara Vell founded it"), Document("Orrin", "Tobin Quast came later"),
        Document("Kessary", "a market town"))


def test_citation_recall_needs_cited_documents_that_entail_the_claim() -> None:
    scorer = KeywordScorer("Mara Vell", "Tobin Quast")
    scores = citation_scores(["Mara Vell founded it [1].", "Tobin Quast came [1].",
                              "Mara Vell, uncited.", "Tobin Quast [9]."], DOCS, scorer)
    assert scores is not None
    assert scores.recall == 0.25  # one supported claim of four
    assert scores.precision == 0.5  # citations [1] and [1]: one supports its claim
    assert scores.citations == 2  # no citation and one out of range count none
    assert ("Title: Orrin\nMara Vell founded it", "Mara Vell founded it.") in scorer.asked


def test_citation_precision_drops_an_unneeded_citation_of_a_multi_cited_claim() -> None:
    scorer = KeywordScorer("Mara Vell")
    scores = citation_scores(["Mara Vell founded it [1][3]."], DOCS, scorer)
    assert scores is not None and (scores.recall, scores.precision) == (1.0, 0.5)
    both = citation_scores(["Mara Vell and Tobin Quast [1][2]."], DOCS,
                           KeywordScorer("Mara Vell", "Tobin Quast"))
    assert both is not None and (both.recall, both.precision) == (1.0, 1.0)  # each is needed


def test_only_the_first_three_citations_are_checked() -> None:
    scorer = KeywordScorer("market town")
    scores = citation_scores(["A market town [1][2][1][3]."], DOCS, scorer)
    assert scores is not None and scores.recall == 0.0 and scores.citations == 3
    assert citation_scores([], DOCS, scorer) is None


def cases_for(task: CiteTask, template: bool = False) -> list[Case]:
    return task.build(Cell("cite", task.name, 4096, None, 2), context(FIXTURE_DATA, template))


def test_cell_metrics_record_an_absent_scorer_as_none() -> None:
    cases = cases_for(QAMPARI, template=True)
    outputs = ["Wulboumdale [1], Paris [2]", "Field Notes [1]"]
    metrics = QAMPARI.cell_metrics(outputs, cases, {})
    assert metrics == {"qampari_precision": 0.75, "citation_recall": None,
                       "citation_precision": None, "helmet_cite": None,
                       "citation_scorer": "absent", "citation_note": NO_SCORER_NOTE}
    # a completion prompt ends in "Answer:", which HELMET puts before the output it scores:
    # the first listed item becomes "Answer:Wulboumdale" and no longer matches
    completion = QAMPARI.cell_metrics(outputs, cases_for(QAMPARI), {})
    assert completion["qampari_precision"] == 0.0


def test_cell_metrics_use_the_scoring_model_behind_the_store(tmp_path: Path) -> None:
    scorer = KeywordScorer("Mara Vell", "1902")
    stored = StoredScoring(scorer, Store(tmp_path / "answers.sqlite"))
    cases = cases_for(ASQA)
    outputs = ["Mara Vell founded it in 1902 [1]. Mara Vell was born in 1902 [3].", "No."]
    assert [ASQA.score(output, case) for output, case in zip(outputs, cases, strict=True)] == \
        [0.5, 0.0]
    metrics = ASQA.cell_metrics(outputs, cases, {NLI_SCORER: stored})
    # without a chat template HELMET scores "Answer:" + output: "Answer:No." is a claim (ALCE
    # drops only sentences under 5 characters) without a citation
    assert metrics == {"citation_scorer": "fake:keywords", "citation_answers": 2,
                       "citation_recall": 0.25, "citation_precision": 0.25,
                       "helmet_cite": 0.25}
    asked = len(scorer.asked)
    assert asked and stored.calls.requests == asked
    # a second measurement (a rerun) reads every rating from the store
    again = StoredScoring(scorer, Store(tmp_path / "answers.sqlite"))
    assert ASQA.cell_metrics(outputs, cases, {NLI_SCORER: again}) == metrics
    assert len(scorer.asked) == asked and again.calls.requests == 0
    assert again.calls.reused >= asked


# -- the local NLI scorer ------------------------------------------------------------------------

def tiny_nli(folder: Path, labels: dict[int, str], winner: int) -> Path:
    """A two-layer BERT whose classifier always picks ``winner``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir()
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "mara", "vell"]))
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(folder)
    config = BertConfig(vocab_size=7, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=8, max_position_embeddings=64, id2label=labels,
                        label2id={v: k for k, v in labels.items()})
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([5.0 if i == winner else 0.0
                                                  for i in range(len(labels))]))
    model.save_pretrained(folder)
    return folder


def test_hf_scorer_reads_the_entailment_class_from_id2label(tmp_path: Path) -> None:
    labels = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
    yes = scorer_for(f"hf:{tiny_nli(tmp_path / 'yes', labels, winner=2)}")
    no = scorer_for(f"hf:{tiny_nli(tmp_path / 'no', labels, winner=1)}")
    assert isinstance(yes, HFEntailment) and yes.entailment == 2
    assert yes.entails("mara vell " * 200, "mara vell") is True  # a long premise is truncated
    assert no.entails("mara vell", "mara vell") is False
    with pytest.raises(pytest.UsageError, match="exactly one must name entailment"):
        scorer_for(f"hf:{tiny_nli(tmp_path / 'binary', {0: 'yes', 1: 'no'}, winner=0)}")


def test_an_unknown_scorer_spec_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(pytest.UsageError, match="expected hf:/path"):
        scorer_for("true-t5")
    with pytest.raises(pytest.UsageError, match="no config.json"):
        scorer_for(f"hf:{tmp_path}")


# -- whole runs ----------------------------------------------------------------------------------

def run_suite(pytester: pytest.Pytester, data: Path, lengths: str) -> pytest.RunResult:
    pytester.makepyfile(test_cite=SUITE_FILE)
    return pytester.runpytest("--rootdir", str(pytester.path), "--model", "mock:grep",
                              "--lengths", lengths, "--samples", "2",
                              "--lceval-data", str(data), "--lceval-run", "r",
                              "--lceval-threshold", "0", "-p", "no:randomly")


@needs_shared_data
def test_suite_runs_the_substitute_and_says_the_citation_scorer_is_absent(
        pytester: pytest.Pytester) -> None:
    run_suite(pytester, SHARED_DATA, "1k,4k").assert_outcomes(passed=2, skipped=2)
    rows = {(row["task"], row["length"]): row for row in read_results(pytester, "r")}
    assert "no gold document fits the prompt budget of 724" in rows["alce_asqa", 1024]["reason"]
    for task in ("alce_asqa", "alce_qampari"):
        row = rows[task, 4096]
        assert row["source"] == "substitute:nq_oracle" and row["n"] == 2
        assert row["input_tokens_max"] <= 4096 and None not in row["depths_achieved"]
        assert row["metrics"]["citation_scorer"] == "absent"
        assert row["metrics"]["citation_recall"] is None
        assert row["metrics"]["citation_note"] == NO_SCORER_NOTE
    assert "qampari_precision" in rows["alce_qampari", 4096]["metrics"]


def test_suite_reads_alce_files_and_scores_citations_with_a_local_nli_model(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    nli = tiny_nli(tmp_path / "nli", {0: "entailment", 1: "neutral", 2: "contradiction"}, 0)
    pytester.makepyfile(test_cite=SUITE_FILE)
    outcome = pytester.runpytest("--rootdir", str(pytester.path),
                                 "--model", "mock:constant?text=Mara Vell [1]. Paris [2].",
                                 "--lengths", "2k", "--samples", "2", "--lceval-data",
                                 str(FIXTURE_DATA), "--lceval-run", "r", "--lceval-threshold",
                                 "0", "-p", "no:randomly",
                                 f"--lceval-cite-nli=hf:{nli}")
    outcome.assert_outcomes(passed=2)
    rows = {row["task"]: row for row in read_results(pytester, "r")}
    assert {row["source"] for row in rows.values()} == {"data:alce"}
    asqa = rows["alce_asqa"]["metrics"]
    assert asqa["citation_scorer"] == f"hf:{nli}"
    assert (asqa["citation_recall"], asqa["citation_precision"]) == (1.0, 1.0)
    # its ratings are stored under its fingerprint: the same run again asks it nothing
    assert re.search(r"lceval: cite_nli: [1-9]\d* requests answered", outcome.stdout.str())
    again = pytester.runpytest("--rootdir", str(pytester.path),
                               "--model", "mock:constant?text=Mara Vell [1]. Paris [2].",
                               "--lengths", "2k", "--samples", "2", "--lceval-data",
                               str(FIXTURE_DATA), "--lceval-run", "r2", "--lceval-threshold",
                               "0", "-p", "no:randomly", f"--lceval-cite-nli=hf:{nli}")
    again.assert_outcomes(passed=2)
    assert re.search(r"lceval: cite_nli: 0 requests answered in 0 backend calls, [1-9]\d* read "
                     r"from the store", again.stdout.str())
