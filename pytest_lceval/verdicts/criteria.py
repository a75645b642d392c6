"""Judging a measured cell: the session's criteria (gathered once from
``pytest_lceval_criteria``) and the cell-level hook (``pytest_lceval_judge``), combined by the
suite's policy. What a criterion, a need and a policy are is ``foundation.criterion``; the run
loop is handed a :class:`CellJudge` by the wiring, so it never imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from ..foundation.criterion import Assessment, Criterion, Evidence, Need, VerdictPolicy
from ..results.cells import CellResult
from ..run.named import by_name


@dataclass(frozen=True)
class CellJudge:
    """The session's criteria and its cell-level hook, which judge each measured cell
    (``run.cell_run.CellRun`` asks it what to measure first, then for the verdict)."""

    criteria: Mapping[str, Criterion]
    config: pytest.Config

    def needs(self, result: CellResult, policy: VerdictPolicy) -> list[Need]:
        """Every need of the criteria that judge ``result``, in policy order."""
        return [need for criterion in policy.select(self.criteria)
                for need in criterion.needs(result)]

    def assess(self, result: CellResult, policy: VerdictPolicy, evidence: Evidence) -> None:
        """Judge a measured cell with its suite's criteria and the cell-level hook. Pure:
        nothing here reaches a model, so the evidence must already hold every need."""
        assessments: dict[str, Assessment] = {}
        selected = policy.select(self.criteria)
        for criterion in selected:
            assessment = criterion.judge(result, evidence)
            if assessment is not None:
                assessments[criterion.name] = assessment
        extra = [j for j in self.config.hook.pytest_lceval_judge(result=result) if j]
        policy.decide(result, assessments, extra, policy.replacements(selected))


CRITERIA = pytest.StashKey[dict[str, Criterion]]()


def criteria_of(config: pytest.Config) -> dict[str, Criterion]:
    """The active criteria by name, gathered once from ``pytest_lceval_criteria``."""
    if CRITERIA not in config.stash:
        config.stash[CRITERIA] = by_name(
            config.hook.pytest_lceval_criteria(config=config), "criterion")
    return config.stash[CRITERIA]
