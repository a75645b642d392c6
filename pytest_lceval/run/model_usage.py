"""How much work reached the models in a run, summed over its processes: each process writes
its counts when its session ends, the controller adds them up for the summary line. The line
says how full the engine's batches were, which is what ``--lceval-batch-size`` and
``--lceval-lookahead`` tune."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..models.stored import CallCounter
from ..results.whole_file import OutOfSpace, write_whole
from .workers import worker_label

FOLDER = "model-usage"
FIELDS = ("requests", "batches", "reused", "seconds")


def clear_usage(run_dir: Path) -> None:
    """Forget the counts an earlier run left in a run folder that this run reuses."""
    shutil.rmtree(run_dir / FOLDER, ignore_errors=True)


def write_usage(run_dir: Path, role: str, calls: CallCounter) -> None:
    """This process's counts for ``role`` (model, judge, judge2). They feed the summary's
    usage line, not the results: on a full disk they are left out, and the run says the disk
    is full once, where a result or a report could not be written."""
    folder = run_dir / FOLDER
    counts = {name: getattr(calls, name) for name in FIELDS}
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
        for name, value in json.loads(path.read_text()).items():
            setattr(total, name, getattr(total, name) + value)
    return totals


def usage_line(role: str, calls: CallCounter) -> str:
    per_call = f" ({calls.requests / calls.batches:.1f} per call)" if calls.batches else ""
    return (f"lceval: {role}: {calls.requests} requests answered in {calls.batches} backend "
            f"calls{per_call}, {calls.reused} read from the store, {calls.seconds:.1f} s")
