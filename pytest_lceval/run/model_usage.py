"""How much work reached the models in a run, summed over its processes: each process writes
its counts when its session ends, the controller adds them up for the summary line. The line
says how full the engine's batches were, which is what ``--lceval-batch-size`` and
``--lceval-lookahead`` tune."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ..foundation.workers import worker_label
from ..models.stored import CallCounter
from ..results.cells import CellResult
from ..results.whole_file import OutOfSpace, write_whole

RUN_STARTED = pytest.StashKey[float]()
"""When the run began, by its controller's clock (workers get it from the controller): what
the store answers from before then was read, what it holds from since was answered by this
run (``StoredModel.run_started``)."""
ANSWERED = "answered_in_run"
"""A cell's metric: its cases whose answers this run's model gave (its own call, or a call
another cell made: lookahead, another worker)."""
READ = "read_from_store"
"""A cell's metric: its cases whose answers earlier runs stored."""
FOLDER = "model-usage"
FIELDS = ("requests", "batches", "reused", "seconds")


def write_usage(run_dir: Path, role: str, calls: CallCounter) -> None:
    """This process's counts for ``role`` (model, judge, judge2). They feed the summary's
    usage line, not the results: on a full disk they are left out, and the run says the disk
    is full once, where a result or a report could not be written."""
    folder = run_dir / FOLDER
    counts = {name: getattr(calls, name) for name in FIELDS}
    if calls.by_endpoint:
        counts["by_endpoint"] = calls.by_endpoint
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_whole(folder / f"{role}-{worker_label()}.json", json.dumps(counts))
    except OutOfSpace:
        return


def read_usage(run_dir: Path) -> dict[str, CallCounter]:
    """Every role's counts summed over the processes that wrote them."""
    totals: dict[str, CallCounter] = {}
    for path in sorted((run_dir / FOLDER).glob("*.json")):
        total = totals.setdefault(path.stem.rsplit("-", 1)[0], CallCounter())
        counts = json.loads(path.read_text())
        for url, answered in counts.pop("by_endpoint", {}).items():
            total.by_endpoint[url] = total.by_endpoint.get(url, 0) + answered
        for name, value in counts.items():
            setattr(total, name, getattr(total, name) + value)
    return totals


def usage_line(role: str, calls: CallCounter, results: Sequence[CellResult] = ()) -> str:
    """What reached ``role``'s model. For the model under test, where the cells' cases got
    their answers, from the results (each cell counts its own: ``ANSWERED`` + ``READ`` = its
    cases), so the line adds up however the calls were shared among cells and workers."""
    per_call = f" ({calls.requests / calls.batches:.1f} per call)" if calls.batches else ""
    line = (f"lceval: {role}: {calls.requests} requests answered in {calls.batches} backend "
            f"calls{per_call}")
    counted = [r for r in results if READ in r.metrics] if role == "model" else []
    if not counted:
        line += f", {calls.reused} read from the store, {calls.seconds:.1f} s"
    else:
        answered = sum(int(r.metrics[ANSWERED]) for r in counted)
        read = sum(int(r.metrics[READ]) for r in counted)
        line += (f", {calls.seconds:.1f} s; the cells' {answered + read} cases: {answered} "
                 f"answered in this run, {read} read from the store (answered by earlier runs)")
    if calls.by_endpoint:
        line += "; by endpoint: " + ", ".join(f"{url} {answered}" for url, answered
                                              in sorted(calls.by_endpoint.items()))
    return line
