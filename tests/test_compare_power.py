"""The comparison with a saved run decided per suite and per task (pooled over cells, weighted
Holm over the suite and its tasks), and the plan's line of what each level can detect, through
real runs of the recall suite on the reduced grid (2 cases per cell) with the mock model."""

from __future__ import annotations

import json

import pytest
from toy_suite import RECALL_SUITE

from pytest_lceval.report.heatmaps import delta_mark, score_grid
from pytest_lceval.results.cells import read_results
from pytest_lceval.verdicts.baseline.pooled import SUITE_GATE, TASK_GATE, Pairs, decide
from pytest_lceval.verdicts.baseline.power import Level, SuitePower, power_lines
from pytest_lceval.verdicts.stats import holm, planned_detectable_drop, planned_power

REDUCED = ["--lceval-grid", "reduced", "--lceval-threshold", "0", "-p", "no:randomly",
           "--lceval-context-size", "fill"]
"""24 recall cells of 2 cases; threshold 0, so only the comparison can fail the run; filled
cells, whose prompts LOSES_15's hashes below were counted on."""
GOOD = "mock:grep"
LOSES_15 = "mock:grep?cliff=0&after=0.8"
"""Answers a fifth of the prompts mock:grep answers with nothing, by the prompt's hash: the
recall suite (0.750 with mock:grep, which cannot do vt, cwe and fwe) loses 15 points in
expectation, on every task it answers; these prompts' hashes make it 12 of 48 cases."""


@pytest.fixture
def recall(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_recall=RECALL_SUITE)
    return pytester


def test_a_uniform_drop_at_2_cases_per_cell_fails_the_suite_gate_and_the_plan_said_so(
        recall: pytest.Pytester) -> None:
    recall.runpytest("--model", GOOD, *REDUCED, "--lceval-run", "base", "--lceval-save",
                     "base").assert_outcomes(passed=24)
    compared = recall.runpytest("--model", LOSES_15, *REDUCED, "--lceval-run", "cmp",
                                "--lceval-compare", "base", f"--html={recall.path / 'r.html'}")
    compared.assert_outcomes(passed=24)  # no cell of 2 cases can fail its own comparison
    assert compared.ret == pytest.ExitCode.TESTS_FAILED
    compared.stdout.fnmatch_lines([
        "lceval: plan: 1 suite (recall), 24 cells, 48 cases*",
        "lceval: compared with baseline 'base', recall can detect (power 0.8) a drop of 0.34 "
        "over its 48 paired cases (alpha 0.025); each task (alpha 0.0021, 12 tasks): none; "
        "per cell: none; power at --lceval-min-drop 0.05: suite 0.01, a task 0.00",
        "lceval: warning: recall cannot detect a drop of --lceval-min-drop 0.05 at these "
        "samples (only 0.34): --samples 67 would reach it (with a baseline saved at as many)",
        "*lceval: suite gate FAILED baseline_suite: recall pooled over 24 compared cells: "
        "0.500 vs 0.750 in baseline 'base', difference -0.250 (95% CI -0.369 to -0.117), "
        "exact McNemar p=0.000488, Holm p=0.000977 (12 worse, 0 better), N=48: significant "
        "drop of at least --lceval-min-drop 0.05",
        "lceval: suite gate PASSED baseline_tasks: recall per task (Holm over the suite and "
        "its 12 tasks at alpha 0.05: the suite from 0.025, each task from 0.0021): no task "
        "dropped significantly*"])
    # a Δ heatmap per task (depth x length), current minus baseline, beside the task's own in
    # the HTML; the tasks without a depth share one (task x length)
    before = {r.nodeid: r.score for r in read_results(recall.path / "reports" / "base")}
    after = read_results(recall.path / "reports" / "cmp")
    run = recall.path / "reports" / "cmp"
    for task in {r.task for r in after if r.depth is not None}:
        cells = sorted((r for r in after if r.task == task), key=lambda r: r.length)
        _, _, grid, _ = score_grid(cells, lambda r: r.depth, delta_mark)
        assert grid == [pytest.approx([r.score - before[r.nodeid] for r in cells])]
        assert (run / f"heatmap-recall-{task}-delta.png").is_file()
    assert (run / "heatmap-recall-delta.png").is_file()
    assert not list((recall.path / "reports" / "base").glob("*-delta.png"))
    page = (recall.path / "r.html").read_text(encoding="utf-8")
    assert 0 < page.index('alt="heatmap-recall-niah_single_1-delta.png"') < page.index(
        'alt="heatmap-recall-niah_single_1.png"')

    same = recall.runpytest("--model", GOOD, *REDUCED, "--lceval-run", "same",
                            "--lceval-compare", "base")
    assert same.ret == pytest.ExitCode.OK
    same.stdout.fnmatch_lines(["*suite gate PASSED baseline_suite: recall pooled over 24 "
                               "compared cells: 0.750 vs 0.750*N=48: unchanged*"])

    required = recall.runpytest("--model", LOSES_15, *REDUCED, "--lceval-run", "release",
                                "--lceval-compare", "base", "--lceval-require-power")
    assert required.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in required.stderr.lines if line] == [
        "ERROR: pytest-lceval: --lceval-require-power: recall cannot detect a drop of "
        "--lceval-min-drop 0.05 at these samples (only 0.34): --samples 67 would reach it "
        "(with a baseline saved at as many)"]
    assert not (recall.path / "reports" / "release" / "results.jsonl").exists()
    # under xdist the controller reads the workers' plans and stops the same way
    workers = recall.runpytest("--model", LOSES_15, *REDUCED, "--lceval-run", "release2",
                               "--lceval-compare", "base", "--lceval-require-power", "-n", "2")
    assert workers.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in workers.stderr.lines if line.startswith("ERROR")] == [
        line for line in required.stderr.lines if line]
    assert not (recall.path / "reports" / "release2" / "results.jsonl").exists()

    enough = recall.runpytest("--model", GOOD, *REDUCED, "--lceval-run", "lenient",
                              "--lceval-compare", "base", "--lceval-require-power",
                              "--lceval-min-drop", "0.35", "--collect-only")
    assert enough.ret == pytest.ExitCode.OK
    assert "lceval: warning" not in enough.stdout.str()


def _pairs(base: list[float], current: list[float], cells: int = 1) -> Pairs:
    return Pairs(base, current, cells)


def test_the_suite_and_its_tasks_share_alpha_by_weighted_holm() -> None:
    lost = _pairs([1.0] * 20, [0.0] * 8 + [1.0] * 12)  # 8 of 20 worse: McNemar p = 0.0078
    kept = _pairs([1.0] * 20, [1.0] * 20)
    suite, tasks = decide("base", "s", {"a": lost, "b": kept, "c": kept}, 0.05)
    assert (suite.criterion, suite.passed) == (SUITE_GATE, False)
    assert (tasks.criterion, tasks.passed) == (TASK_GATE, False)
    # the suite (p = 0.0078) starts at 0.025 and rejects; its share passes to the tasks, which
    # are then plain Holm over three at 0.05
    assert tasks.message.startswith("s per task (Holm over the suite and its 3 tasks at alpha "
                                    "0.05: the suite from 0.025, each task from 0.0083): 1 "
                                    "regressed by at least --lceval-min-drop 0.05: a 1.000 -> "
                                    "0.600 (-0.400, N=20, p=0.00781, Holm p=0.0234)")
    assert tasks.properties["tasks"]["b"]["p_holm"] == 1.0
    assert tasks.properties["regressed"] == ["a"]
    assert suite.properties["p_holm"] == pytest.approx(2 * 0.0078125)

    # a task's loss that the other task's gain offsets: the suite's test does not reject (p =
    # 1), and the task is tested at its own share of alpha all the same (p = 0.0078 against
    # 0.0125: Holm p = 0.031)
    gained = _pairs([0.0] * 20, [1.0] * 8 + [0.0] * 12)
    suite, tasks = decide("base", "s", {"a": lost, "b": gained}, 0.05)
    assert suite.passed and suite.properties["p"] == 1.0
    assert (tasks.passed, tasks.properties["tasks"]["a"]["p_holm"]) == (False, 0.015625 * 2)
    assert tasks.properties["regressed"] == ["a"]

    # one task: the suite's gate is the task's, at alpha
    [alone] = decide("base", "s", {"a": lost}, 0.05)
    assert alone.criterion == SUITE_GATE and not alone.passed and "Holm" not in alone.message
    # significant, but smaller than --lceval-min-drop
    [small] = decide("base", "s", {"a": lost}, 0.5)
    assert small.passed and "significant but smaller than --lceval-min-drop 0.5" in small.message


def test_holm_adjusts_step_down_and_keeps_the_order() -> None:
    assert holm([0.01, 0.04, 0.03, float("nan")]) == pytest.approx([0.04, 0.09, 0.09, 1.0])
    assert holm([0.5]) == [0.5] and holm([]) == []
    # weighted: each starts at its weight's share, and a rejected one hands its share on
    assert holm([0.02, 0.01, 0.01], [2, 1, 1]) == pytest.approx([0.04, 0.04, 0.04])
    assert holm([0.9, 0.004, 0.03], [2, 1, 1]) == pytest.approx([0.9, 0.016, 0.09])
    with pytest.raises(ValueError, match="one positive weight per p-value"):
        holm([0.5, 0.5], [1, 0])


def test_the_planned_drop_is_where_the_planned_power_reaches_0_8() -> None:
    for variance in (0.0, 0.1875, 0.25):
        for n in (12, 48, 240, 4800):
            drop = planned_detectable_drop(variance, n)
            assert planned_power(variance, n, drop) == pytest.approx(0.8, abs=1e-6)
            assert planned_power(variance, n, 0.9 * drop) < 0.8
    assert planned_detectable_drop(0.25, 5) == float("inf")  # fewer than 6 cases: none
    assert planned_detectable_drop(0.0, 6) == float("inf")  # only a drop beyond the score
    # more cases detect less; a stricter alpha (Holm's step over 12 tasks) detects less
    assert planned_detectable_drop(0.2, 480) < planned_detectable_drop(0.2, 48)
    assert planned_detectable_drop(0.2, 480, alpha=0.05 / 12) > planned_detectable_drop(0.2, 480)


def test_a_suite_that_can_detect_no_drop_says_so_and_names_the_samples_that_would() -> None:
    two_cells = SuitePower("recall", float("inf"), (), (float("inf"), float("inf")),
                           Level(cells=2, n=4, variance=0.0))
    lines, warnings = power_lines([two_cells], "base", 0.05)
    assert lines == ["lceval: compared with baseline 'base', recall can detect (power 0.8) no "
                     "drop over its 4 paired cases (alpha 0.05); per cell: none; power at "
                     "--lceval-min-drop 0.05: suite 0.00"]
    assert warnings == ["recall cannot detect a drop of --lceval-min-drop 0.05 at these samples "
                        "(no drop at all): --samples 80 would reach it (with a baseline saved at "
                        "as many)"]
    # 80 cases in each of the 2 cells detect 0.05; 79 do not
    assert planned_detectable_drop(0.0, 160) <= 0.05 < planned_detectable_drop(0.0, 158)
    assert power_lines([two_cells], "base", 0.0)[1] == [
        "recall cannot detect a drop of --lceval-min-drop 0 at these samples (no drop at all): "
        "no --samples up to 100,000 would"]


def test_a_gate_over_single_graded_cases_writes_strict_json() -> None:
    """One graded case per task has no interval and no p: null, not NaN, in summary.json."""
    gates = decide("base", "s", {"a": _pairs([0.5], [0.25]), "b": _pairs([1.0], [0.5])}, 0.05)
    for gate in gates:
        assert gate.passed
        json.dumps(gate.properties, allow_nan=False)
    assert gates[1].properties["tasks"]["a"]["p"] is None
