"""How much work reached the models in a run, summed over its processes: each process writes
its counts when its session ends, the controller adds them up for the summary line and
``summary.json``. The line says how full the engine's batches were, which is what
``--lceval-batch-size`` and ``--lceval-lookahead`` tune."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from .models.stored import CallCounter
from .workers import worker_label

FOLDER = "model-usage"


@dataclass
class Usage:
    """One model's work in one run: requests answered, backend calls, answers read back."""

    requests: int = 0
    calls: int = 0
    reused: int = 0
    seconds: float = 0.0

    def add(self, other: Usage) -> None:
        self.requests += other.requests
        self.calls += other.calls
        self.reused += other.reused
        self.seconds += other.seconds

    def line(self, role: str) -> str:
        per_call = f" ({self.requests / self.calls:.1f} per call)" if self.calls else ""
        return (f"lceval: {role}: {self.requests} requests answered in {self.calls} backend "
                f"calls{per_call}, {self.reused} read from the store, {self.seconds:.1f} s")


def write_usage(run_dir: Path, role: str, calls: CallCounter) -> None:
    """This process's counts for ``role`` (model, judge, judge2)."""
    folder = run_dir / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    usage = Usage(calls.requests, calls.batches, calls.reused, round(calls.seconds, 3))
    (folder / f"{role}-{worker_label()}.json").write_text(json.dumps(asdict(usage)))


def read_usage(run_dir: Path) -> dict[str, Usage]:
    """Every role's counts summed over the processes that wrote them."""
    totals: dict[str, Usage] = {}
    for path in sorted((run_dir / FOLDER).glob("*.json")):
        role = path.stem.rsplit("-", 1)[0]
        totals.setdefault(role, Usage()).add(Usage(**json.loads(path.read_text())))
    return totals
