"""One-test suites and the toy task, as source text for inner (pytester) runs."""

from __future__ import annotations

from pathlib import Path

TOY_TASK = (Path(__file__).parent / "toy_task.py").read_text()
"""A conftest declaring the toy suite with the toy task."""
SUITE = """
import pytest

pytestmark = pytest.mark.lceval(suite="toy")


def test_cell(lc_cell, lc_eval):
    lc_eval.check(lc_eval.run(lc_cell))
"""
RECALL_SUITE = SUITE.replace('suite="toy"', 'suite="recall"').replace("test_cell", "test_recall")
"""The one-test module of the built-in recall suite."""
JUDGED_SUITE = SUITE.replace('suite="toy"', 'suite="judged"')
"""The one-test module of the judged toy suite."""
JUDGED_TASK = '''
from dataclasses import dataclass

from pytest_lceval.api import RUBRICS, SUBEM, Case, GenerationSuite, Prompt

FACTS = [("Skye", "the island"), ("Rome", "the city"), ("Oslo", "the capital"),
         ("Lima", "the town")]


@dataclass(frozen=True)
class ToyJudged:
    name: str = "toyjudged"
    uses_depth: bool = False
    max_new_tokens: int = 8
    rule_metric: str = "subem"
    metric = SUBEM
    rubric = RUBRICS["helmet_qa"]

    def build(self, cell, context):
        cases = []
        for index in range(cell.samples):
            value, what = FACTS[index % len(FACTS)]
            filler = " ".join(["filler"] * (cell.length - 40))
            question = f"What is the special magic number for {what.replace(' ', '-')}?"
            prompt = Prompt(f"One of the special magic numbers for {what.replace(' ', '-')} "
                            f"is: {value}. {filler}\\n{question}", " Answer:")
            text = context.renderer.render(prompt)
            cases.append(Case(index, text, (value,), context.renderer.count(text), None,
                              self.max_new_tokens, meta={"question": question}))
        return cases

    def score(self, output, case):
        return float(case.gold[0] in output)


TASKS = [ToyJudged()]


def pytest_lceval_suites(config):
    return [GenerationSuite("judged", TASKS)]
'''
"""A conftest declaring a judged task (suite 'judged', HELMET's QA rubric, SubEM as its rule
metric) that mock:grep answers: what the judge's tests judge."""
