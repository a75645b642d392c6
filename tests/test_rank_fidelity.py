"""Rank classification on top-k backends, as the reference code scores it: an option outside the
top k is unscored, a case with no scored option is no prediction (wrong, counted, reported), and
never a guess of option 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_outputs import read_results

from pytest_lceval.benchmarks.task_haystack.data import LliclTask
from pytest_lceval.benchmarks.task_haystack.ranking import score
from pytest_lceval.benchmarks.task_haystack.verdict import rank_note
from pytest_lceval.models import topk_rank
from pytest_lceval.results.records import Ranking

SUITE = (Path(__file__).parent.parent / "suites" / "test_task_haystack.py").read_text()
FAST = ["-p", "no:randomly", "-p", "no:cacheprovider"]


def ranking(*logprobs: float | None, method: str = topk_rank.LOGPROBS) -> Ranking:
    return Ranking(tuple(logprobs), True, 10, 0.0, method)


def test_choice_skips_unscored_options_and_is_none_when_nothing_was_scored() -> None:
    assert ranking(None, -2.0, -1.0).choice == 2
    assert ranking(-1.0, None, -1.0).choice == 0  # a tie keeps the first option
    assert ranking(None, None, None).choice is None


def test_top_k_with_no_option_is_no_prediction_not_option_zero() -> None:
    top = {5: -0.1, 6: -0.9}
    none = topk_rank.rank_from_top(top, [[1], [2]], 3)
    assert none.logprobs == (None, None) and none.choice is None
    assert none.method == topk_rank.BOUNDED and not none.top_in_options
    some = topk_rank.rank_from_top({**top, 2: -4.0}, [[1], [2]], 3)
    assert some.logprobs == (None, -4.0) and some.choice == 1


def task() -> LliclTask:
    return LliclTask(name="toy", options=("yes", "no"), instruction="Say yes or no.",
                     instruction_2="Answer yes or no.",
                     demonstration_prompt="Q: {text}\nA: {label}",
                     inference_prompt="Q: {text}\nA:", train_sets=((),) * 5, test=(),
                     folder=Path("toy"))


def test_no_prediction_is_wrong_and_counted_with_the_method() -> None:
    rows = [{"text": "a", "label": "yes"}, {"text": "b", "label": "yes"},
            {"text": "c", "label": "no"}]
    scored = score(task(), rows, [
        ranking(-0.1, -2.0), ranking(None, None, method=topk_rank.BOUNDED),
        ranking(0.0, None, method=topk_rank.GENERATE_MATCH)])
    assert scored.choices == (0, None, 0) and scored.correct == (True, False, False)
    assert scored.no_prediction == 1 and scored.accuracy == pytest.approx(1 / 3)
    assert scored.methods == (topk_rank.LOGPROBS, topk_rank.BOUNDED, topk_rank.GENERATE_MATCH)


def test_rank_note_names_fallbacks_and_counts() -> None:
    assert rank_note([topk_rank.LOGPROBS], 0, 0, 20) == ""
    note = rank_note([topk_rank.LOGPROBS, topk_rank.BOUNDED], 3, 1, 20)
    assert note == ("rank method logprobs, logprobs-bound; no prediction (scored wrong) for 3 "
                    "of 20 Lifelong and 1 of 20 Single-task cases")
    assert rank_note([topk_rank.GENERATE_MATCH], 0, 0, 20) == "rank method generate-match"


TOPK_CONFTEST = '''
from pytest_lceval.models import topk_rank
from pytest_lceval.models.mock import MockBackend


class TopOne(MockBackend):
    """mock:icl behind a server whose top k holds no option for every other request."""

    def rank(self, requests):
        out = []
        for index, (request, full) in enumerate(zip(requests, super().rank(requests))):
            if index % 2:
                out.append(full)
                continue
            out.append(topk_rank.rank_from_top({"<other>": -0.1}, [[o] for o in request.options],
                                               full.prompt_tokens))
        return out


def pytest_lceval_make_backend(spec, options):
    return TopOne("icl", {}, options) if spec == "topone:icl" else None
'''


def test_haystack_records_no_prediction_per_cell(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_task_haystack=SUITE)
    pytester.makeconftest(TOPK_CONFTEST)
    outcome = pytester.runpytest("--model", "topone:icl", "--haystack-shots", "1",
                                 "--haystack-ntasks", "4", "--lceval-run", "r", *FAST)
    rows = read_results(pytester, "r")
    assert rows, outcome.stdout.str()
    for row in rows:
        metrics = row["metrics"]
        life_wrong = sum(bits.count("0") for bits in metrics["l_correct"].values())
        assert 0 < metrics["no_prediction"] <= life_wrong
        assert metrics["rank_method"] == "logprobs,logprobs-bound"
        assert f"no prediction (scored wrong) for {metrics['no_prediction']} of" \
            in metrics["rank_note"]
        judged = [j["message"] for j in row["judgements"]]
        assert judged and metrics["rank_note"] in judged[0]
