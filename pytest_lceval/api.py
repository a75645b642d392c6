"""The public API: every name a task, suite, criterion, gate or backend author needs, from one
module, so that a suite of one's own keeps working when the package's folders move.

Import from here, not from the modules behind it (``from pytest_lceval.api import Suite``);
``docs/examples/row_lookup/`` and ``tests/toy_task.py`` do (tests/test_layout.py checks it).
``import pytest_lceval`` does not import this module: the package's ``__init__`` stays free of
the core, so that pytest imports and rewrites the plugin modules itself (and ``--help`` stays
instant).

Cells and their cases (what a grid is made of):
    ``Cell``: one grid point (suite, task, length, depth, samples); subclass it, frozen, for an
    axis of your own. ``case_seed``: a stable seed for a case from the run's seed and the cell's
    parts. ``Case``: one built case (its rendered text, golds, token count, depth, budget).
    ``Prompt``: a prompt's text and answer prefix, before the model's template renders it.

A task (data: builds a cell's cases, scores an output; never calls a model):
    ``GenerationTask``: the protocol a generation task meets. ``BuildContext``: what ``build``
    gets (the renderer, the seed, the run's data as a ``DataSource``: its folders, or the
    offline fixtures with ``DataSource(None)``). ``CellDoesNotFit``: raised by ``build`` when
    the cell cannot hold the task. ``ScoreMetric``: the metric a task's scores are on, declared
    as its ``metric``; ``STRING_MATCH_ALL`` and ``SUBEM`` are RULER's and HELMET's.
    ``string_match_all``, ``substring_exact_match``: those metrics' scoring functions.
    ``Rubric``: the base of a judge's rubric; ``RUBRICS``: the rubrics the benchmark families
    declare, by name, for a task that is judged by one of them.

A suite (declares its tasks or measures its own cells; returned by ``pytest_lceval_suites``):
    ``GenerationSuite``: a suite of generation tasks, ready to instantiate. ``MoreTasks``: tasks a
    plugin adds to another plugin's suite. ``Suite``: the base of a suite with its own grid and
    ``measure(cell, evaluator)``. ``Evaluator``: what ``measure`` gets (the model behind the
    store, the run's settings). ``Settings``: the run's resolved options. ``Measurement``: what
    ``measure`` returns (scores, case keys, its own metrics). ``CellSkipped``: raised by
    ``measure`` for a cell that cannot run (it is skipped, with the reason); ``CellRefused``:
    for a cell that must not be measured as asked (it fails, with the reason).
    ``GenerateRequest``, ``RankRequest``: what a suite asks the model; ``Generation``,
    ``Ranking``: its answers.

A criterion or a gate (``pytest_lceval_criteria``, ``pytest_lceval_judge``,
``pytest_lceval_suite_verdict``):
    ``Criterion``: the protocol a cell-level criterion meets (``needs``, ``judge``); ``Need``:
    what its ``needs`` returns, something measured before it judges.
    ``Assessment``: a criterion's judgement and the metrics it adds. ``VerdictPolicy``: the
    criteria a suite's cells are judged by. ``CellResult``: a measured cell, what criteria and
    gates judge. ``Judgement``: one verdict (a criterion's on a cell, or a gate's on a suite).

A backend (``pytest_lceval_make_backend``, ``pytest_lceval_scoring_models``):
    ``Backend``: the protocol a model under test meets; ``BaseBackend``: the base class to
    subclass (``identity``, ``generate``, ``rank``, ``describe``; its fingerprint is its
    identity's hash). ``Renderer``: the chat template and token count a backend gives tasks.
    ``Tokenizer``: the protocol a renderer counts with.
    ``ModelSpec``: the ``--model`` text, read into kind and target. ``LoadOptions``: the load
    options (device, window, serving). ``MissingDependencyError``: raised for a library that
    is not installed (the message names the extra). ``ScoringModel``: a model that rates
    outputs beside the judge.
"""

from __future__ import annotations

from .foundation.criterion import Assessment, Criterion, Need, VerdictPolicy
from .foundation.data import DataSource
from .foundation.grid import Cell, case_seed
from .foundation.measurement import Measurement
from .judge.rubrics import RUBRICS
from .models.backend import BaseBackend
from .models.base import Backend, Renderer, Tokenizer
from .models.options import LoadOptions, MissingDependencyError
from .models.registry import ModelSpec
from .models.scoring import ScoringModel
from .results.cells import CellResult, Judgement
from .results.records import Case, GenerateRequest, Generation, Prompt, Ranking, RankRequest
from .results.score_metric import STRING_MATCH_ALL, SUBEM, ScoreMetric
from .run.evaluation import Evaluator
from .run.generation_suite import GenerationSuite
from .run.suite import CellRefused, CellSkipped, MoreTasks, Suite
from .settings import Settings
from .tasks.base import BuildContext, CellDoesNotFit, GenerationTask
from .tasks.judged import Rubric
from .tasks.metrics import string_match_all, substring_exact_match

__all__ = [
    "RUBRICS", "STRING_MATCH_ALL", "SUBEM", "Assessment", "Backend", "BaseBackend",
    "BuildContext", "Case",
    "Cell", "CellDoesNotFit", "CellRefused", "CellResult", "CellSkipped", "Criterion",
    "DataSource", "Evaluator", "GenerateRequest", "Generation", "GenerationSuite",
    "GenerationTask", "Judgement", "LoadOptions", "Measurement", "MissingDependencyError",
    "ModelSpec", "MoreTasks", "Need", "Prompt",
    "RankRequest", "Ranking", "Renderer", "Rubric", "ScoreMetric", "ScoringModel", "Settings",
    "Suite", "Tokenizer", "VerdictPolicy", "case_seed", "string_match_all",
    "substring_exact_match",
]
