"""Cell results: the record each test produces, and the run folder's results file."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from . import strict_json
from .score_metric import ScoreMetric, range_text
from .whole_file import append_whole, write_whole

RESULTS_FILE = "results.jsonl"
RUN_DIR = pytest.StashKey[Path]()
"""The run folder every process writes its results to (xdist workers take the controller's)."""


SUITE_VERDICTS = pytest.StashKey[dict[str, list["Judgement"]]]()
"""The run's suite-level verdicts by suite (controller only, set at session finish)."""


@dataclass(frozen=True)
class Judgement:
    """One criterion's opinion of a cell."""

    criterion: str
    """Short name, e.g. 'threshold', 'longscore', 'baseline'."""
    passed: bool
    message: str
    """What was measured and why it passed or failed, with the numbers."""
    properties: dict[str, Any] = field(default_factory=dict)
    """Values to record on the test (they reach JUnit XML)."""
    skip: bool = False
    """The criterion cannot judge this cell (e.g. LongScore on a base ability near 0): unless
    another criterion failed, the cell is skipped with ``message`` as the reason."""
    rule: str = ""
    """A suite gate's rule in words, with the option that set it ('at least 90% of judged
    cells pass (--lceval-min-pass-rate)'): the HTML report's Gates section shows it."""
    applied: bool = True
    """False for a suite gate asked for that had nothing to judge (a suite without cells in
    the run, without long cells for LongScore): reported as not applied, and failed only when
    the option named the suite."""


@dataclass
class CellResult:
    """Everything measured for one cell; one line of results.jsonl."""

    nodeid: str
    suite: str
    task: str
    length: int
    depth: float | None
    extra: dict[str, Any]
    """Suite-specific axes of the cell (e.g. permutation)."""
    model: str
    fingerprint: str
    seed: int
    source: str
    """Where the task text came from: 'data:<folder>' or 'fixtures'."""
    context_window: int = 0
    """The model's claimed context window in tokens (what effective length is set against)."""
    model_args: dict[str, Any] = field(default_factory=dict)
    """The overrides of the model's config the run was given (--lceval-model-args), so that a
    result names the variant it measured; {} for the model as it is."""
    n: int = 0
    score: float = math.nan
    metric: str = ""
    """The metric ``score`` (and ``scores``) are on, e.g. 'ndcg@10' (results/score_metric.py)."""
    metric_range: list[float | None] = field(default_factory=lambda: [0.0, 1.0])
    """[low, high] of the metric; None for an unbounded end."""
    metric_about: str = ""
    """What the metric counts, in a few words."""
    ci_low: float = math.nan
    ci_high: float = math.nan
    scores: list[float] = field(default_factory=list)
    """Per-case scores in case order; paired comparisons use them."""
    case_keys: list[str] = field(default_factory=list)
    """Per-case request hashes: two runs' cases pair only if these match."""
    input_tokens_mean: float = 0.0
    input_tokens_max: int = 0
    """Largest prompt + generation budget over the cases (never above the cell's length)."""
    depths_achieved: list[float | None] = field(default_factory=list)
    seconds_build: float = 0.0
    seconds_model: float = 0.0
    seconds_score: float = 0.0
    model_requests: int = 0
    """Requests that reached the model (0 when every answer came from the store)."""
    judge: str = ""
    """The judge that scored the cell, as spec@fingerprint; "" for rule-scored cells."""
    outcome: str = "passed"
    """'passed', 'failed' or 'skipped'."""
    reason: str = ""
    """Why a cell failed or was skipped."""
    judgements: list[Judgement] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    """Suite-specific numbers (LongScore, t-test, accuracies...)."""
    samples: list[dict[str, Any]] = field(default_factory=list)
    """The first few prompts and outputs, truncated, for reports."""
    samples_file: str = ""
    """Every case of the cell, under --lceval-log-samples: a gzipped JSONL file, relative to the
    run folder (results/sample_log.py); "" when not logged."""

    @property
    def measured(self) -> bool:
        """Whether the cell has a score, whatever its verdict: an undefined LongScore skips the
        verdict, not the measurement, and reports show the score."""
        return not math.isnan(self.score)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def name_metric(self, metric: ScoreMetric) -> None:
        self.metric, self.metric_range, self.metric_about = metric.name, metric.range, \
            metric.about

    @property
    def metric_label(self) -> str:
        """'ndcg@10 (0–1)', or '' for a result written before results named their metric."""
        return f"{self.metric} ({range_text(self.metric_range)})" if self.metric else ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        """Fields this version no longer has (a run folder written by an older one) are left
        out."""
        judgements = [Judgement(**j) for j in data.get("judgements", [])]
        names = {f.name for f in fields(cls)} - {"judgements"}
        return cls(**{k: v for k, v in data.items() if k in names}, judgements=judgements)


def append_result(run_dir: Path, result: CellResult) -> None:
    """Append one line of strict JSON (``strict_json``); a file lock keeps lines whole when
    xdist workers write at once, and a full disk leaves none half written."""
    run_dir.mkdir(parents=True, exist_ok=True)
    line = strict_json.dumps(result.to_json(), sort_keys=True)
    with FileLock(str(run_dir / (RESULTS_FILE + ".lock"))):
        append_whole(run_dir / RESULTS_FILE, line + "\n")


def read_results(run_dir: Path) -> list[CellResult]:
    """The run's results, one per test (the last line wins when a test ran twice)."""
    path = run_dir / RESULTS_FILE
    if not path.exists():
        return []
    by_node: dict[str, CellResult] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            result = CellResult.from_json(strict_json.loads(line))
            by_node[result.nodeid] = result
    return [by_node[node] for node in sorted(by_node)]


def write_merged(run_dir: Path, results: Iterable[CellResult]) -> None:
    """Rewrite results.jsonl sorted by test id, so -n 2 and -n 0 give the same file (whole:
    on a full disk the appended one stays)."""
    lines = [strict_json.dumps(r.to_json(), sort_keys=True) for r in results]
    write_whole(run_dir / RESULTS_FILE, "".join(line + "\n" for line in lines))
    (run_dir / (RESULTS_FILE + ".lock")).unlink(missing_ok=True)


SAMPLE_CHARS = 600
"""Characters kept of each sample prompt's head and tail, and of each output."""
WINDOW_CHARS = 400
"""Characters kept on each side of the gold answer's first place in the prompt's middle."""
FOCUS_MIN_CHARS = 3
"""Shorter gold strings ('A', 'no') match anywhere, so they place no window."""


def clip_sample(text: str, focus: Sequence[str] = ()) -> str:
    """A prompt or output cut for reports: its start and end, and a window around the first
    place in the elided middle where a ``focus`` string (a gold answer: the needle's value,
    the gold passage's answer) occurs, so that a sample of a failed recall shows what the
    model should have found. Samples show what the model read without writing 128k-token
    prompts into every result line."""
    if len(text) <= 2 * SAMPLE_CHARS:
        return text
    head, tail = SAMPLE_CHARS, len(text) - SAMPLE_CHARS
    found = [(at, len(gold)) for gold in focus if len(gold) >= FOCUS_MIN_CHARS
             and (at := text.find(gold, head, tail)) >= 0]
    pieces = [text[:head]]
    if found:
        at, size = min(found)
        start, end = max(head, at - WINDOW_CHARS), min(tail, at + size + WINDOW_CHARS)
        pieces += [_elided(start - head), text[start:end]]
        head = end
    pieces += [_elided(tail - head), text[tail:]]
    return "".join(piece for piece in pieces if piece)


def _elided(count: int) -> str:
    return f"\n[... {count} characters ...]\n" if count else ""


def failing_first(scores: Sequence[float | None], kept: int) -> list[int]:
    """Indices of the cases a cell keeps as samples: the lowest scores first (an unscored case
    before all), ties in case order, so that a failed cell shows the cases that failed it."""
    order = sorted(range(len(scores)),
                   key=lambda i: (scores[i] is not None, scores[i] or 0.0, i))
    return order[:kept]
