"""Task Haystack's verdict: paired by resample id, degenerate t-statistics decided on purpose."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pytest_lceval.benchmarks.task_haystack.verdict import EXCEL, FAIL, PASS, paired_verdict


def test_identical_groups_give_nan_and_pass_explicitly() -> None:
    verdict = paired_verdict({0: 0.5, 1: 0.6, 2: 0.7}, {0: 0.5, 1: 0.6, 2: 0.7})
    assert verdict.verdict == PASS and verdict.passed is True
    assert math.isnan(verdict.t) and math.isnan(verdict.p)
    assert "NaN" in verdict.note


@pytest.mark.parametrize(("shift", "expected", "sign"), [(-0.1, FAIL, -1), (0.1, EXCEL, 1)])
def test_constant_difference_is_decisive_infinite_t(shift: float, expected: str,
                                                    sign: int) -> None:
    single = {0: 0.6, 1: 0.7, 2: 0.8, 3: 0.5, 4: 0.9}
    # 0.6 - 0.1 and 0.7 - 0.1 differ from an exact shift in the last bit: still constant.
    lifelong = {r: value + shift for r, value in single.items()}
    verdict = paired_verdict(lifelong, single)
    assert verdict.verdict == expected
    assert verdict.t == sign * math.inf and verdict.p == 0.0


def test_clear_drop_fails_clear_gain_excels_noise_passes() -> None:
    single = {0: 0.80, 1: 0.70, 2: 0.75, 3: 0.85, 4: 0.78}
    drop = {0: 0.60, 1: 0.52, 2: 0.58, 3: 0.61, 4: 0.55}
    assert paired_verdict(drop, single).verdict == FAIL
    assert paired_verdict(single, drop).verdict == EXCEL
    noise = {0: 0.82, 1: 0.66, 2: 0.77, 3: 0.80, 4: 0.81}
    verdict = paired_verdict(noise, single)
    assert verdict.verdict == PASS and verdict.p >= 0.05


def test_matches_scipy_ttest_rel_on_ordinary_data() -> None:
    single = {0: 0.80, 1: 0.70, 2: 0.75, 3: 0.85, 4: 0.78}
    lifelong = {0: 0.70, 1: 0.72, 2: 0.60, 3: 0.79, 4: 0.70}
    expected = stats.ttest_rel([lifelong[r] for r in range(5)], [single[r] for r in range(5)])
    verdict = paired_verdict(lifelong, single)
    assert verdict.t == pytest.approx(float(expected.statistic))
    assert verdict.p == pytest.approx(float(expected.pvalue))


def test_pairs_by_resample_id_not_by_order() -> None:
    single = {0: 0.9, 1: 0.5, 2: 0.7, 3: 0.6}
    lifelong = {3: 0.55, 1: 0.45, 0: 0.85, 2: 0.66}  # each 0.04-0.05 below its own resample
    shuffled_single = dict(reversed(list(single.items())))
    verdict = paired_verdict(lifelong, shuffled_single)
    assert verdict.verdict == FAIL
    assert verdict.resamples == (0, 1, 2, 3)
    assert verdict.lifelong == (0.85, 0.45, 0.66, 0.55)
    # Pairing by position instead would compare 0.55 with 0.9 etc.: a different test.
    by_order = stats.ttest_rel(list(lifelong.values()), list(single.values()))
    assert float(by_order.pvalue) > 0.05


def test_mismatched_or_too_few_resamples_are_refused() -> None:
    with pytest.raises(ValueError, match="same resample ids"):
        paired_verdict({0: 0.5, 1: 0.5}, {0: 0.5, 2: 0.5})
    with pytest.raises(ValueError, match="at least 2"):
        paired_verdict({0: 0.5}, {0: 0.4})


def test_numpy_inputs_give_plain_python_values() -> None:
    single = {r: np.float64(v) for r, v in enumerate([0.8, 0.7, 0.75, 0.85, 0.78])}
    lifelong = {r: np.float64(v - 0.2 + 0.01 * r) for r, v in single.items()}
    verdict = paired_verdict(lifelong, single)
    assert type(verdict.t) is float and type(verdict.p) is float
    assert type(verdict.passed) is bool and verdict.passed is False
    assert all(type(v) is float for v in verdict.lifelong)
