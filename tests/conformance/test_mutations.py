"""The conformance layer can fail: each small mutation of the project below (monkeypatched for
the one test) makes the conformance check meant to catch it fail, its agreement count short or
its assertion raised. A mutation that no check catches is a conformance test that could be
handed the answer (issue #34: before, reversing the ICL class order or changing cite's question
seed passed every test). ``docs/fidelity.md`` names, per row, the mutation that proves its test.

Each check is the conformance test's own function, called in-process with the reference loaded
as its module does: ``hf_rank_agreement`` (Lifelong-ICL), ``gold_agreement`` and
``test_prompts_are_helmets_byte_for_byte`` (HELMET ICL), ``selection_agreement`` (HELMET
cite), ``base_pooling_agreement`` (100-LongBench).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet import cite, cite_data, icl, icl_data
from pytest_lceval.benchmarks.helmet.pipeline import shuffled
from pytest_lceval.benchmarks.longbench100.longscore import base
from pytest_lceval.models import hf

from . import test_helmet_cite, test_helmet_icl, test_lifelong_icl, test_longbench100
from .helmet_harness import load_helmet

pytestmark = pytest.mark.skipif(
    not all((SHARED_DATA / name).exists() for name in ("trec", "nlu", "nq_oracle")),
    reason=f"shared data (trec, nlu, nq_oracle) absent from {SHARED_DATA}")

Patch = Callable[[pytest.MonkeyPatch], None]


@dataclasses.dataclass(frozen=True)
class Oracles:
    """What the checks run: each reference loaded once, and the cite data directory."""

    lifelong: SimpleNamespace
    longbench: SimpleNamespace
    helmet_icl: Any
    helmet_cite: tuple[ModuleType, ModuleType]
    alce_data: Path
    smollm2: Any


@pytest.fixture(scope="module")
def oracles(reference: Callable[..., ModuleType], smollm2: Any,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracles]:
    with test_lifelong_icl.absent_dependencies():
        lifelong = SimpleNamespace(vllm=reference("lifelong_icl", "model.vllm"))
    with test_longbench100.offline(smollm2):
        longbench = SimpleNamespace(eval=reference("longbench100", "eval_trec"))
    data = reference("helmet", "data")
    prompts = Path(str(data.__file__)).parent / "prompts"
    yield Oracles(lifelong, longbench, load_helmet(reference),
                  (data, reference("helmet", "model_utils")),
                  test_helmet_cite.write_alce_data(tmp_path_factory.mktemp("alce"), prompts),
                  smollm2)


# -- the checks ------------------------------------------------------------------------------

def rank(oracles: Oracles, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[int, int]:
    return test_lifelong_icl.hf_rank_agreement(oracles.lifelong, 200)


def icl_golds(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
              tmp_path: Path) -> tuple[int, int]:
    return test_helmet_icl.gold_agreement(oracles.helmet_icl, "icl_trec_coarse", monkeypatch,
                                          tmp_path)


def icl_prompts(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                tmp_path: Path) -> tuple[int, int]:
    test_helmet_icl.test_prompts_are_helmets_byte_for_byte(
        oracles.helmet_icl, oracles.smollm2, Ignored(), tmp_path, monkeypatch,
        "icl_trec_coarse", 1024)
    return 1, 1


def cite_selection(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                   tmp_path: Path) -> tuple[int, int]:
    return test_helmet_cite.selection_agreement(oracles.helmet_cite, oracles.smollm2,
                                                monkeypatch, tmp_path, oracles.alce_data,
                                                "asqa", 40)


def base_pooling(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                 tmp_path: Path) -> tuple[int, int]:
    return test_longbench100.base_pooling_agreement(oracles.longbench, 40)


class Ignored:
    """A conformance tally that keeps nothing (a mutated run's counts are not the layer's)."""

    def record(self, *args: Any, **kwargs: Any) -> None:
        pass


# -- the mutations ---------------------------------------------------------------------------

def _relabelled(order: Callable[[tuple[str, ...]], tuple[str, ...]]) -> Patch:
    """ICL class ids from another order of the hub's names."""
    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        load = icl_data._load
        monkeypatch.setattr(icl_data, "_load", lambda folder, layout: load(
            folder, dataclasses.replace(layout, classes=order(layout.classes))))
    return patch


def _cite_demo_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = cite.demo_draws
    monkeypatch.setattr(cite, "demo_draws", lambda count, demos, seed: draws(count, demos,
                                                                              seed + 1))


def _cite_demo_separator(monkeypatch: pytest.MonkeyPatch) -> None:
    demonstration = cite_data.Demos.demonstration
    monkeypatch.setattr(cite_data.Demos, "demonstration",
                        lambda self, demo: demonstration(self, demo) + " ")


def _icl_input_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    seed = icl.input_seed
    monkeypatch.setattr(icl, "input_seed", lambda text, run_seed: seed(text, run_seed + 1))


MUTATIONS: dict[str, tuple[Patch, Callable[..., tuple[int, int]]]] = {
    # name: (the mutation, the check that must catch it)
    "rank-rule-full-vocabulary": (
        lambda mp: mp.setattr(hf, "rank_top_k", lambda options: None), rank),
    "rank-top-20": (lambda mp: mp.setattr(hf, "REFERENCE_TOP_K", 20), rank),
    "icl-class-order-sorted": (_relabelled(lambda names: tuple(sorted(names))), icl_golds),
    "icl-class-order-reversed": (_relabelled(lambda names: names[::-1]), icl_golds),
    "icl-input-seed": (_icl_input_seed, icl_golds),
    "icl-label-map-unshuffled": (
        lambda mp: mp.setattr(icl, "label_map", lambda classes, seed: list(range(classes))),
        icl_golds),
    "icl-template-character": (
        lambda mp: mp.setattr(icl, "INSTRUCTION", icl.INSTRUCTION.replace("label: {", "label:{")),
        icl_prompts),
    "cite-question-seed": (
        lambda mp: mp.setattr(cite, "shuffled", lambda count, seed: shuffled(count, seed + 1)),
        cite_selection),
    "cite-question-order-reversed": (
        lambda mp: mp.setattr(cite, "shuffled", lambda count, seed: shuffled(count, seed)[::-1]),
        cite_selection),
    "cite-demonstration-seed": (_cite_demo_seed, cite_selection),
    "cite-demonstration-separator": (_cite_demo_separator, cite_selection),
    "longscore-base-per-length": (
        lambda mp: mp.setattr(base, "base_value",
                              lambda strata, mean: base.length_weighted_mean(strata)),
        base_pooling),
    "longscore-base-first-length-only": (
        lambda mp: mp.setattr(base, "base_value", lambda strata, mean: base.stratified_mean(
            [next(iter(strata.values()))])),
        base_pooling),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_the_mutation_is_caught(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                                tmp_path: Path, name: str) -> None:
    mutate, check = MUTATIONS[name]
    with monkeypatch.context() as patch:
        mutate(patch)
        try:
            compared, identical = check(oracles, patch, tmp_path)
        except AssertionError:
            return  # the check's own assertion caught it
    assert identical < compared, f"mutation {name} passed its conformance check"


def test_every_check_passes_unmutated(oracles: Oracles, monkeypatch: pytest.MonkeyPatch,
                                      tmp_path: Path) -> None:
    """Without a mutation each check agrees in full, so a caught mutation is the mutation's."""
    for check in {check for _, check in MUTATIONS.values()}:
        compared, identical = check(oracles, monkeypatch, tmp_path)
        assert identical == compared > 0, check.__name__
