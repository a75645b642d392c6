"""A suite of one's own in one conftest: rows of random words, "which word is in row N?" with
row N at each requested depth. Its grid has a typed axis (rows, not tokens) and its own
criterion (better than chance). Run from this folder: pytest --model=mock:grep --samples 5
"""

import random
from dataclasses import dataclass

from pytest_lceval.api import (Assessment, Cell, CellSkipped, GenerateRequest, Judgement,
                               Measurement, Prompt, ScoreMetric, Suite, VerdictPolicy, case_seed)

WORDS = "amber birch cobalt delta ember fjord garnet harbor indigo juniper".split()


@dataclass(frozen=True)
class RowsCell(Cell):
    rows: int = 0

    @property
    def length_label(self) -> str:
        return f"{self.rows}rows"


class RowLookup(Suite):
    name = "row_lookup"
    policy = VerdictPolicy(("above_chance", "baseline"))
    metric = ScoreMetric("accuracy", "1 when the answer holds the word of the row asked about")

    def grid(self, settings):
        return [RowsCell(self.name, "lookup", 0, depth, settings.samples, rows=rows)
                for rows in (20, 200) for depth in settings.depths]

    def measure(self, cell, evaluator):
        model, golds, requests = evaluator.model, [], []
        for index in range(cell.samples):
            rng = random.Random(case_seed(evaluator.settings.seed, cell.id, index))
            words = [rng.choice(WORDS) for _ in range(cell.rows)]
            row = round((cell.rows - 1) * cell.depth / 100)
            text = "".join(f"The word for row{i:03d} is: {w}.\n" for i, w in enumerate(words))
            prompt = model.renderer.render(Prompt(f"{text}What is the word for row{row:03d}?"))
            if model.renderer.count(prompt) + 4 > model.context_window:
                raise CellSkipped(f"{cell.rows} rows do not fit the model's window")
            golds.append(words[row])
            requests.append(GenerateRequest(prompt, 4))
        answers = [answer.text for answer in model.generate(requests)]
        return Measurement(scores=[float(gold in answer) for gold, answer in zip(golds, answers)],
                           case_keys=[request.key() for request in requests])


class AboveChance:
    name = "above_chance"

    def needs(self, result):
        return ()

    def judge(self, result, evidence):
        chance = 1 / len(WORDS)
        passed = result.ci_low > chance
        return Assessment(Judgement(self.name, passed, (
            f"score {result.score:.2f} (95% CI from {result.ci_low:.2f}) "
            f"{'>' if passed else '<='} chance {chance:.2f}")), {"chance": chance})


def pytest_lceval_suites(config):
    return [RowLookup()]


def pytest_lceval_criteria(config):
    return [AboveChance()]
