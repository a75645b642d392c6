"""LongScore: arithmetic and its guard, the bootstrap interval, options, the hand-over from the
default threshold, and (through pytester) base ability computed once, verdicts and summaries."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from run_outputs import read_results
from toy_suite import SUITE, TOY_TASK

from pytest_lceval.benchmarks.longbench100.longscore.base import (
    ALL_CASES,
    N_THIRD,
    BaseAbility,
    base_strata,
    base_value,
    length_weighted_mean,
)
from pytest_lceval.benchmarks.longbench100.longscore.config import LongScoreSettings
from pytest_lceval.benchmarks.longbench100.longscore.criterion import (
    UNDEFINED,
    LongScoreCriterion,
)
from pytest_lceval.benchmarks.longbench100.longscore.formula import (
    longscore,
    longscore_ci,
    stratified_mean,
)
from pytest_lceval.benchmarks.longbench100.longscore.summary import (
    longscore_figure,
    overall,
    task_rows,
)
from pytest_lceval.foundation.criterion import Assessment
from pytest_lceval.foundation.measurement import mean_ci
from pytest_lceval.results import cells as run_cells
from pytest_lceval.results.cells import CellResult, Judgement
from pytest_lceval.run.generation_suite import LENGTH_SWEEP
from pytest_lceval.run.model_usage import read_usage
from pytest_lceval.settings import Settings
from pytest_lceval.store.database import Store
from pytest_lceval.verdicts.threshold import ThresholdCriterion

# Base lengths 1k and 2k (N/3 = 1 case each per depth), long lengths 3k and 4k. (mock:grep
# cannot see a needle in the prompt's last 400 characters, hence no 100 % depth.)
GRID = ["--lengths", "1k,2k,3k,4k", "--depths", "0,25,50", "--samples", "3",
        "--longscore-base-lengths", "1k,2k", "-p", "no:randomly"]


# -- arithmetic ------------------------------------------------------------------------------

def test_longscore_is_the_relative_change_in_percent() -> None:
    assert longscore(0.4, 0.5, floor=0.05) == pytest.approx(-20.0)
    assert longscore(0.75, 0.5, floor=0.05) == pytest.approx(50.0)
    assert longscore(0.5, 0.5, floor=0.05) == 0.0


@pytest.mark.parametrize(("base", "floor"), [(0.0, 0.0), (0.04, 0.05), (-0.1, 0.0),
                                             (math.nan, 0.05)])
def test_longscore_is_undefined_near_a_zero_base(base: float, floor: float) -> None:
    assert longscore(0.3, base, floor) is None


def test_base_weighs_each_length_equally() -> None:
    # (1.0 + 0.5 + 0.0) / 3, not the pooled mean of 7 cases (4/7).
    assert stratified_mean([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0], [0.0]]) == pytest.approx(0.5)
    assert math.isnan(stratified_mean([[], []]))


def test_base_is_pooled_by_default_and_per_length_on_request() -> None:
    """The released code's base is one mean over every kept case (10/7/4 kept: 13/21), the
    per-length mean (the paper's reading) weighs 2k, 4k and 6k the same; the bootstrap
    resamples the pooled base as one set."""
    strata = {"2k": [1.0] * 10, "4k": [1.0] * 2 + [0.0] * 5, "6k": [1.0] + [0.0] * 3}
    assert LongScoreSettings((2048, 4096, 6144), None, 0.05).base_mean == "pooled"
    assert base_value(strata, "pooled") == pytest.approx(13 / 21)
    assert base_value(strata, "per-length") == pytest.approx((1.0 + 2 / 7 + 1 / 4) / 3)
    assert base_strata(strata, "pooled") == [[*strata["2k"], *strata["4k"], *strata["6k"]]]
    assert base_strata(strata, "per-length") == list(strata.values())
    assert math.isnan(base_value({}, "pooled")) and math.isnan(base_value({}, "per-length"))


def test_base_weighs_each_base_length_equally_over_its_depths() -> None:
    # 2k has one depth stratum left (1.0), 4k two (0.0 and 1.0): 2k and 4k weigh the same.
    strata = {"2k@0": [1.0], "4k@0": [0.0, 0.0], "4k@50": [1.0]}
    assert length_weighted_mean(strata) == pytest.approx(0.75)
    assert math.isnan(length_weighted_mean({"2k": []}))
    base = BaseAbility(0.75, strata, rules={"2k": ALL_CASES, "4k": N_THIRD})
    assert base.n == 4 and base.n_by_length() == {"2k": 1, "4k": 3}
    assert base.describe() == (f"base ability 0.750 (N=4: 2k 1 ({ALL_CASES}), "
                               f"4k 3 ({N_THIRD}))")


def test_bootstrap_interval_brackets_the_estimate_and_is_reproducible() -> None:
    scores = [1, 0, 1, 0, 0, 1, 0, 0, 1, 0]
    strata = [[1, 1, 0, 1], [1, 0, 1, 1], [1, 1, 1, 0]]
    point = longscore(float(np.mean(scores)), stratified_mean(strata), 0.05)
    assert point is not None
    low, high = longscore_ci(scores, strata, 0.05, seed=3)
    assert low < point < high
    assert (low, high) == longscore_ci(scores, strata, 0.05, seed=3)
    wide = longscore_ci(scores[:4], [s[:2] for s in strata], 0.05, seed=3)
    assert wide[1] - wide[0] > high - low  # fewer cases, wider interval


def test_an_all_wrong_long_cell_keeps_its_own_uncertainty() -> None:
    """Five wrong answers against a base of 2/3: LC is -100 %, but the cell's own interval
    reaches 0.43 (Wilson), so LC's must reach well above -100 % (a case bootstrap gave
    -100..-100); and it carries the base's uncertainty too: a larger base narrows it."""
    mean, _, score_high = mean_ci([0.0] * 5)
    assert (mean, round(score_high, 3)) == (0.0, 0.434)
    low, high = longscore_ci([0.0] * 5, [[1, 1, 0], [1, 0, 1], [0, 1, 1]], 0.05, seed=1)
    assert low == pytest.approx(-100.0, abs=0.5) and -75.0 < high < -25.0
    more_base = longscore_ci([0.0] * 5, [[1, 1, 0] * 10, [1, 0, 1] * 10, [0, 1, 1] * 10],
                             0.05, seed=1)
    assert more_base[1] < high
    graded = longscore_ci([0.5, 0.25, 0.75], [[0.5, 0.5, 0.75]], 0.05, seed=1)
    assert graded[0] < 100 * (0.5 - 0.583) / 0.583 < graded[1]


def test_bootstrap_never_divides_by_a_zero_base() -> None:
    with np.errstate(all="raise"):
        # no replicate of a base measured at 0 of 2 reaches a floor of 1: nothing to divide by
        assert all(math.isnan(x) for x in longscore_ci([1.0, 0.0], [[0.0, 0.0]], 1.0))
        low, high = longscore_ci([1.0, 0.0], [[0.0, 1.0, 0.0]], 0.0)
    assert math.isfinite(low) and math.isfinite(high)  # replicates with base 0 left out


# -- roles and the threshold hand-over -------------------------------------------------------

def _long_cell(task: str, length: int, score: float, base: float) -> CellResult:
    return CellResult(f"t[{task}-{length}]", "toy", task, length, 50.0, {}, "m", "f", 0, "x",
                      score=score, metrics={"longscore_role": "long", "longscore_base": base,
                                            "longscore_window": 8192, "longscore_floor": 0.05,
                                            "longscore": longscore(score, base, 0.05)})


def test_model_row_is_longscore_of_the_task_averages() -> None:
    """Table 7's Avg LC is (Avg score - Base) / Base of the task-averaged columns, not the mean
    of per-task LCs (those differ: -50 % and +100 % average to +25 %, the model row is -12.5 %)."""
    cells = [_long_cell("a", 4096, 0.4, 0.8), _long_cell("a", 8192, 0.4, 0.8),
             _long_cell("b", 4096, 0.2, 0.1), _long_cell("b", 8192, 0.2, 0.1)]
    rows = task_rows(cells)["toy"]
    assert [r.avg_lc for r in rows] == [pytest.approx(-50.0), pytest.approx(100.0)]
    base, score, lc = overall(rows)
    assert (base, score) == (pytest.approx(0.45), pytest.approx(0.3))
    assert lc == pytest.approx(100 * (0.3 - 0.45) / 0.45)


def test_a_task_below_the_floor_has_no_lc_but_counts_in_the_model_row() -> None:
    rows = task_rows([_long_cell("a", 4096, 0.4, 0.8), _long_cell("b", 4096, 0.0, 0.01)])["toy"]
    assert rows[1].avg_lc is None
    assert overall(rows)[2] == pytest.approx(100 * (0.2 - 0.405) / 0.405)


def test_roles_of_lengths() -> None:
    settings = LongScoreSettings((2048, 4096, 6144), -20.0, 0.05)
    assert [settings.role(n) for n in (1024, 2048, 5000, 6144, 8192)] == \
        ["short", "base", "short", "base", "long"]
    assert settings.active((2048, 8192)) and not settings.active((1024, 2048, 4096))
    assert not LongScoreSettings((), None, 0.05).active((8192,))


def _settings(**overrides: object) -> Settings:
    base: dict[str, object] = dict(
        model="mock:grep", lengths=(1024,), depths=(50.0,), samples=3, seed=1, data_dir=None,
        out_root=Path("."), run_name=None, store_path=Path("s"), chat_template="off",
        threshold=0.5)
    return Settings(**{**base, **overrides})  # type: ignore[arg-type]


def _result(task: str = "toy", score: float = 0.1) -> CellResult:
    return CellResult("id", "toy", task, 1024, 50.0, {}, "mock", "fp", 1, "fixtures", n=3,
                      score=score, ci_low=0.0, ci_high=0.3)


@pytest.mark.parametrize(("overrides", "judged"), [
    ({}, False),                                            # default threshold: hands over
    ({"threshold_explicit": True}, True),                   # the user's global threshold stays
    ({"task_thresholds": {"toy": 0.3}}, True),              # the user's per-task one too
    ({"task_thresholds": {"other": 0.3}}, False),
])
def test_threshold_steps_aside_only_when_defaulted(overrides: dict[str, object],
                                                   judged: bool) -> None:
    """LongScore's bound replaces the threshold on a long cell only where the threshold is the
    default one (the suite's verdict policy decides, from what each criterion returned)."""
    result = _result()
    threshold = ThresholdCriterion(_settings(**overrides)).judge(result, {})
    assert threshold is not None and threshold.judgement is not None
    bound = Assessment(Judgement("longscore", True, "LongScore within its bound"))
    LENGTH_SWEEP.decide(result, {"longscore": bound, "threshold": threshold},
                        replaces=(("longscore", LongScoreCriterion.sweep_replaces),))
    assert ("threshold" in [j.criterion for j in result.judgements]) is judged
    assert result.outcome == ("failed" if judged else "passed")


# -- through pytester ------------------------------------------------------------------------

@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_base_is_computed_once_across_two_workers(suite: pytest.Pytester) -> None:
    """12 cells on two workers; the base (2 lengths x 3 depths x 1 case) reaches the model
    once in all, and no request of the run reaches it twice."""
    outcome = suite.runpytest("--model", "mock:grep", *GRID, "--lengths", "3k,4k",
                              "--lceval-run", "x", "-n", "2")
    outcome.assert_outcomes(passed=6)
    rows = read_results(suite, "x")
    assert {row["metrics"]["longscore_role"] for row in rows} == {"long"}
    base_requests = sum(row["metrics"]["needs_model_requests"] for row in rows)
    assert base_requests == 2 * 3 * 1  # no base cell in the run: N/3 = 1 case per stratum
    assert {row["metrics"]["longscore_base_rules"] for row in rows} == \
        {f"1k:{N_THIRD},2k:{N_THIRD}"}
    assert {row["metrics"]["longscore_base_n"] for row in rows} == {6}
    assert {row["metrics"]["longscore_base"] for row in rows} == {1.0}
    store = Store(suite.path / ".lceval" / "store.sqlite")
    assert store.count_answers() == read_usage(suite.path / "reports" / "x")["model"].requests
    store.close()


def test_base_cells_of_the_run_are_reused(suite: pytest.Pytester) -> None:
    """One cell at a time (no lookahead), so that the base is measured mid-run; with the
    default lookahead the base cells are measured with the first cells and the base finds
    every answer stored."""
    outcome = suite.runpytest("--model", "mock:grep", *GRID, "--lceval-run", "ahead")
    outcome.assert_outcomes(passed=12)
    assert {r["metrics"]["needs_model_requests"] for r in read_results(suite, "ahead")} == {0}
    outcome = suite.runpytest("--model", "mock:grep", *GRID, "--lceval-run", "r",
                              "--lceval-lookahead=0", "--lceval-store=alone.sqlite")
    outcome.assert_outcomes(passed=12)
    rows = read_results(suite, "r")
    base_rows = [r for r in rows if r["metrics"]["longscore_role"] == "base"]
    assert len(base_rows) == 6 and all(r["metrics"]["longscore_base"] == 1.0 for r in base_rows)
    # The base is computed when the first cell (1k, depth 0) is judged: its 3 cases are in the
    # store, the other five strata's 3 each are asked once, and the cells that run later find
    # them. The run has the base cells, so the base takes every case of them, not N/3.
    base_requests = sum(r["metrics"]["needs_model_requests"] for r in rows)
    assert base_requests == 5 * 3
    assert {r["metrics"]["longscore_base_n"] for r in rows} == {18}
    assert {r["metrics"]["longscore_base_n_by_length"] for r in rows} == {"1k:9,2k:9"}
    assert {r["metrics"]["longscore_base_rules"] for r in rows} == \
        {f"1k:{ALL_CASES},2k:{ALL_CASES}"}
    assert all(r["metrics"]["longscore_n"] == r["n"] == 3 for r in rows)
    store = Store(suite.path / "alone.sqlite")
    assert store.count_answers() == sum(r["model_requests"] for r in rows) + base_requests
    store.close()
    long_rows = [r for r in rows if r["metrics"]["longscore_role"] == "long"]
    assert all(r["metrics"]["longscore"] == 0.0 for r in long_rows)


def test_long_cells_fail_on_longscore_not_on_the_default_threshold(
        suite: pytest.Pytester) -> None:
    """A model blind at 40-60 % depth: base = 2/3 (pooled over depths); the 50 % long cells
    score 0, LC = -100 %, and fail on LongScore alone; the 50 % base cells fail the threshold."""
    outcome = suite.runpytest("--model", "mock:grep?miss=40-60", *GRID, "--longscore-min",
                              "-20", "--lceval-run", "m")
    outcome.assert_outcomes(passed=8, failed=4)
    outcome.stdout.fnmatch_lines([
        "*toy at 1k: score 0.000*< threshold 0.500*",
        "*toy at 3k: LongScore -100.0% (95% CI *) < minimum -20%: score 0.000 (N=3) at 3k "
        "against base ability 0.667 (N=18: 1k 9, 2k 9; all cases of the run's cells)*"])
    rows = {(r["length"], r["depth"]): r for r in read_results(suite, "m")}
    assert [j["criterion"] for j in rows[(3072, 50.0)]["judgements"]] == ["longscore"]
    assert rows[(3072, 0.0)]["metrics"]["longscore"] == pytest.approx(50.0)
    summary = suite.path / "reports" / "m" / "longscore-toy.md"
    assert "| mock:grep?miss=40-60 | 8k | 66.7 | 66.7 | +0.0 |" in summary.read_text()
    with open(suite.path / "reports" / "m" / "longscore-toy.csv") as handle:
        table = {row["task"]: row for row in csv.DictReader(handle)}
    assert table["toy"]["lc_3k"] == "0.00" and table["toy"]["base_ability"] == "66.67"
    assert (suite.path / "reports" / "m" / "longscore-toy.png").stat().st_size > 1000


CLIFF = ["--lengths", "1k,2k,3k,4k", "--depths", "50", "--samples", "5",
         "--longscore-base-lengths", "1k,2k", "--longscore-min", "-20", "-p", "no:randomly"]
"""One depth, so each long length has one cell and its interval bar; with
mock:grep?cliff=2200&after=F the base lengths are right and past 2200 tokens a share F is."""


def test_an_all_wrong_long_cell_has_an_interval_and_the_figure_shows_every_bar(
        suite: pytest.Pytester) -> None:
    suite.runpytest("--model", "mock:grep?cliff=2200&after=0", *CLIFF, "--lceval-run", "zero"
                    ).assert_outcomes(passed=2, failed=2)
    rows = {r["length"]: r["metrics"] for r in read_results(suite, "zero")}
    assert rows[3072]["longscore"] == -100.0
    assert rows[3072]["longscore_ci_low"] == pytest.approx(-100.0, abs=0.5)
    assert rows[3072]["longscore_ci_high"] > -75.0  # N=5 wrong: the cell's Wilson high is 0.43
    # 3k and 4k score 0.2 and 0.6: LC -80 % and -40 %, bars reaching below -95 % and above 0
    suite.runpytest("--model", "mock:grep?cliff=2200&after=0.5", *CLIFF, "--lceval-run", "half"
                    ).assert_outcomes(passed=2, failed=2)
    results = run_cells.read_results(suite.path / "reports" / "half")
    bars = [(r.metrics["longscore_ci_low"], r.metrics["longscore_ci_high"]) for r in results
            if r.metrics.get("longscore") is not None]
    assert len(bars) == 2 and min(low for low, _ in bars) < -95.0
    figure = longscore_figure("toy", "m", task_rows(results)["toy"], -20.0)
    [axes] = [a for a in figure.axes if a.get_visible()]
    low, high = axes.get_ylim()
    assert all(low < bar_low and bar_high < high for bar_low, bar_high in bars)
    figure.clf()


def test_an_explicit_threshold_still_judges_long_cells(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:grep?miss=40-60", *GRID, "--longscore-min",
                              "-20", "--lceval-threshold", "toy=0.5", "--lceval-run", "t")
    outcome.assert_outcomes(passed=8, failed=4)
    rows = {(r["length"], r["depth"]): r for r in read_results(suite, "t")}
    assert [j["criterion"] for j in rows[(4096, 50.0)]["judgements"]] == \
        ["longscore", "threshold"]


def test_a_zero_base_judges_long_cells_by_the_threshold_and_says_why(
        suite: pytest.Pytester) -> None:
    """An undefined LongScore gives no verdict: the threshold it replaces judges the cell, so a
    model with no base ability fails on its scores instead of passing by skipping."""
    outcome = suite.runpytest("--model", "mock:constant", *GRID, "--longscore-min", "-20",
                              "--lceval-run", "z")
    outcome.assert_outcomes(failed=12)
    rows = read_results(suite, "z")
    long = [r for r in rows if r["length"] > 2048]
    assert len(long) == 6 and all(r["outcome"] == "failed" and r["score"] == 0.0 for r in long)
    assert all(r["metrics"]["longscore"] is None for r in long)
    assert all(r["metrics"]["longscore_undefined"].startswith(
        f"{UNDEFINED} at {r['length'] // 1024}k: base ability 0.000") for r in long)
    assert all([j["criterion"] for j in r["judgements"]] == ["threshold"] for r in long)
    assert "| toy | 1k,2k | 0.0 | 18 | 0.0 | undefined | undefined | undefined |" in \
        (suite.path / "reports" / "z" / "longscore-toy.md").read_text()


def test_without_a_bound_longscore_is_recorded_not_asserted(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:constant", *GRID, "--lceval-run", "c",
                              "--lceval-threshold", "0")
    outcome.assert_outcomes(passed=12)
    assert all(r["metrics"].get("longscore_undefined", "").startswith(UNDEFINED)
               for r in read_results(suite, "c") if r["length"] > 2048)
    summary = (suite.path / "reports" / "c" / "longscore-toy.md").read_text()
    assert "averages the 1 task measured at long lengths" in summary
    assert "No artists with labels" not in outcome.stdout.str()  # a plot with no line at all


def test_runs_without_long_lengths_ask_nothing_extra(suite: pytest.Pytester) -> None:
    outcome = suite.runpytest("--model", "mock:grep", *GRID, "--lengths", "1k,2k",
                              "--longscore-base-lengths", "2k,3k", "--lceval-run", "s")
    outcome.assert_outcomes(passed=6)
    assert all("longscore_role" not in r["metrics"] for r in read_results(suite, "s"))


@pytest.mark.parametrize(("args", "expected"), [
    (["--longscore-min", "-120"], "cannot be below -100"),
    (["--longscore-min", "a lot"], "--longscore-min"),
    (["--longscore-base-lengths", "2k,x"], "--longscore-base-lengths"),
    (["--longscore-floor", "5"], "write 0.05, not 5"),
])
def test_bad_longscore_options_are_usage_errors(suite: pytest.Pytester, args: list[str],
                                                expected: str) -> None:
    outcome = suite.runpytest("--model", "mock:grep", *args)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines([f"*{expected}*"])
