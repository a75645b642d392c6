"""Task Haystack's rank decisions of a local model against Lifelong-ICL's own rule (issue #34).

Usage: ``python bench/bench_reference_rank.py [pytest arguments]``, e.g.
``python bench/bench_reference_rank.py --model=smollm2 --lceval-data=../shared/data``

Runs ``suites/test_task_haystack.py`` with those arguments (a fresh store, so every decision is
made in this run) and, at each next-token distribution the HF backend ranks options from,
decides three ways: the project's default (``--lceval-rank top100``), the reference's
``vLLM.rank_postprocess`` (``../shared/reference/lifelong_icl``, or ``$LCEVAL_REFERENCE``) on
the 100 most likely tokens of the same logits, as vLLM returns them to it, and the whole
vocabulary (``--lceval-rank full``). Prints how many decisions of each agree with the
reference's (an option, or its NO_PREDICTION).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's package; the conformance layer

from conformance.conftest import REFERENCE, load_reference  # noqa: E402
from conformance.test_lifelong_icl import absent_dependencies  # noqa: E402

from pytest_lceval.models import hf  # noqa: E402


class Decisions:
    """Wraps ``hf._ranking`` for the run and counts the decisions that agree."""

    def __init__(self) -> None:
        with absent_dependencies():
            vllm = load_reference("model.vllm", [REFERENCE / "lifelong_icl"])
        self.model = vllm.vLLM.__new__(vllm.vLLM)
        self.counts = {"top100": 0, "full": 0, "decisions": 0}
        self.ranking = hf._ranking

    def __call__(self, logits: torch.Tensor, targets: list[int], prompt_tokens: int,
                 seconds: float, top_k: int | None) -> Any:
        ranking = self.ranking(logits, targets, prompt_tokens, seconds, top_k)
        values, ids = torch.topk(torch.log_softmax(logits.float(), dim=-1), 100)
        output = SimpleNamespace(outputs=[SimpleNamespace(text="", logprobs=[{
            int(t): SimpleNamespace(logprob=float(v)) for t, v in zip(ids, values, strict=True)}])])
        options = [f"option{i}" for i in range(len(targets))]
        theirs = self.model.rank_postprocess(
            [output], {o: [t] for o, t in zip(options, targets, strict=True)})[0]["prediction"]
        for name, limit in (("top100", hf.REFERENCE_TOP_K), ("full", None)):
            choice = self.ranking(logits, targets, prompt_tokens, seconds, limit).choice
            self.counts[name] += ("NO_PREDICTION" if choice is None else options[choice]) == theirs
        self.counts["decisions"] += 1
        return ranking

    def pytest_configure(self, config: pytest.Config) -> None:
        hf._ranking = self

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        hf._ranking = self.ranking


def main() -> int:
    decisions = Decisions()
    with tempfile.TemporaryDirectory() as scratch:
        code = pytest.main([str(ROOT / "suites" / "test_task_haystack.py"), "-p", "no:randomly",
                            "-q", "--lceval-store", f"{scratch}/store.sqlite",
                            "--lceval-out", f"{scratch}/reports", *sys.argv[1:]],
                           plugins=[decisions])
    total = decisions.counts["decisions"]
    print(f"rank decisions as the reference's rank_postprocess decides them: "
          f"--lceval-rank top100 (default) {decisions.counts['top100']}/{total}, "
          f"--lceval-rank full {decisions.counts['full']}/{total}")
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
