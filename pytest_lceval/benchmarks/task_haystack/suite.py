"""Task Haystack as a suite: its grid (task x length setting x permutation x setting), its
measurement, its verdict (the paired t-test, a criterion of its own) and its session reports."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from ...foundation.criterion import Assessment, Evidence, Need, VerdictPolicy
from ...foundation.data import ESSAY_FOLDER, DataError, Fallbacks
from ...foundation.grid import Cell
from ...foundation.measurement import Measurement
from ...models.stored import StoredModel
from ...results.cells import CellResult, Judgement
from ...results.score_metric import ScoreMetric
from ...run.evaluation import Evaluator
from ...run.suite import Suite
from ...settings import Settings
from .config import LLICL_FOLDER, HaystackSettings
from .data import available_tasks, load_task
from .metrics import HaystackMetrics
from .plan import SUITE, HaystackCell, cells, tested_inputs
from .report import write_reports
from .runner import HaystackMeasure, check_stream
from .verdict import FAIL

CRITERION = "task_haystack"


class HaystackSuite(Suite):
    name = SUITE
    own_grid = True  # tasks x shots x permutations, said in its header line
    measures_ahead = True
    description = ("Task Haystack cells (Lifelong ICL against Single-task ICL, paired t-test), "
                   "task x length setting x permutation x setting")
    policy = VerdictPolicy((CRITERION, "baseline"))
    """The t-test decides; an absolute score bar would punish tasks hard at any length."""
    metric = ScoreMetric(
        "accuracy", "Lifelong ICL accuracy of the task in the stream (the option ranked first "
                    "is the label), pooled over the resamples; the verdict (PASS, FAIL, EXCEL) "
                    "is a paired t-test against Single-task ICL")

    def __init__(self, settings: HaystackSettings) -> None:
        self.settings = settings
        self._checked = False
        """Whether this process checked the options of every task (check_stream)."""

    def grid(self, settings: Settings) -> list[Cell]:
        for name in self.settings.tasks:  # read (cached) now: a broken file is found at start
            load_task(self.settings.root, name)
        return list(cells(self.settings, settings))

    def source(self, evaluator: Evaluator) -> str:
        return self.settings.source

    def measure(self, cell: Cell, evaluator: Evaluator) -> Measurement:
        assert isinstance(cell, HaystackCell), cell
        model = _batched(evaluator.model, self.settings.batch_size)
        if not self._checked:
            check_stream(model.tokenizer, [load_task(self.settings.root, name)
                                           for name in self.settings.tasks],
                         self.settings.test_size)
            self._checked = True
        return HaystackMeasure(evaluator, self.settings, model).measure(cell)

    def task_names(self) -> list[str]:
        return [*self.settings.tasks, *available_tasks(self.settings.root)]

    def header(self) -> list[str]:
        hs = self.settings
        lengths = ",".join(length.label for length in hs.lengths)
        lines = [f"haystack: {hs.source} ({len(hs.tasks)} tasks from {hs.root}), lengths "
                 f"{lengths} (tasks x shots), {hs.permutations} permutations x {hs.resamples} "
                 f"resamples, test size {hs.test_size}, setting {','.join(hs.settings)}"]
        try:
            short = {name: n for name, n in tested_inputs(hs).items() if n < hs.test_size}
        except DataError:  # a broken task file: collection says it, in one line
            short = {}
        if short:
            fewest = min(short, key=lambda name: (short[name], name))
            lines.append(f"haystack: test size {hs.test_size}: {len(short)} of {len(hs.tasks)} "
                         f"tasks hold fewer test inputs (as few as {short[fewest]}: {fewest}) "
                         f"and are tested on all they hold; the plan counts those")
        if hs.offline:
            lines.append("haystack: running the self-made offline pack with reduced defaults "
                         f"({hs.reduced or 'none'})")
        return lines

    def fallbacks(self, tasks: Collection[str]) -> Fallbacks:
        prose = ((ESSAY_FOLDER, "the random setting's prose is the self-made essays"),) \
            if "random" in self.settings.settings else ()
        return ((LLICL_FOLDER, "its tasks are the self-made offline pack"), *prose)

    def summarize(self, run_dir: Path, results: list[CellResult]) -> list[str]:
        return write_reports(run_dir, results).summary_lines if results else []


class TTestCriterion:
    """The paired t-test verdict as a judgement; EXCEL passes (positive transfer)."""

    name = CRITERION

    def needs(self, result: CellResult) -> Sequence[Need]:
        return ()

    def judge(self, result: CellResult, evidence: Evidence) -> Assessment | None:
        metrics = HaystackMetrics.of(result)
        return None if metrics is None else Assessment(judgement(metrics))


def judgement(m: HaystackMetrics) -> Judgement:
    where = (f" at stream index {m.stream_index} of {m.n_task}"
             if m.stream_index is not None else "")
    meaning = {"FAIL": "significantly worse than", "EXCEL": "significantly better than",
               "PASS": "not significantly different from"}[m.verdict]
    message = (f"{m.verdict}: {m.setting} Lifelong ICL accuracy {m.l_acc:.3f}{where} is "
               f"{meaning} Single-task ICL {m.s_acc:.3f} (paired t-test over {m.resamples} "
               f"resamples, t={m.t_text}, p={m.p_text}, two-sided p<0.05)")
    for note in (m.verdict_note, m.rank_note):
        if note:
            message += f"; {note}"
    properties = {"verdict": m.verdict, "t": m.t, "p": m.p, "s_acc": m.s_acc, "l_acc": m.l_acc}
    return Judgement(CRITERION, m.verdict != FAIL, message, properties)


def _batched(model: StoredModel, batch_size: int) -> StoredModel:
    """The session model with larger backend calls: a Task Haystack stream sends hundreds of
    queries on one prefix, and the backend scores a call's queries together. Same store,
    same call counter."""
    if batch_size == model.batch_size:
        return model
    view = StoredModel(model.backend, model.store, batch_size, model.run_started)
    view.calls = model.calls
    return view
