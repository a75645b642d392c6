"""--lceval-log-samples: every case of every cell as the model saw it, for the question "why did
this cell fail?" (lm-evaluation-harness's ``--log_samples``).

Results keep a few clipped samples per cell; with the option, each cell also writes all its cases
(the prompt exactly as sent, after the chat template; the whole output; the gold; the case's
score; the request key that pairs it with the store and with a baseline) to
``<run>/samples/<cell>.jsonl.gz``, one gzipped JSONL file per cell. A cell is measured by one
process, so no two processes ever write one file, and each file is written under a temporary
name and renamed: xdist workers cannot interleave lines, and a killed run leaves whole files.
``zcat samples/*.jsonl.gz`` is the whole run as one JSONL stream; the results line of a cell
names its file (``samples_file``), and the HTML report links each cell to it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .records import Case, Generation
from .whole_file import write_whole

SAMPLES_DIR = "samples"
SUFFIX = ".jsonl.gz"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=+-]+")


def cell_file(nodeid: str) -> str:
    """The cell's samples file, relative to the run folder: its test name and parameters made
    safe for a file name, and a short hash of the whole test id (two test modules may run the
    same cells)."""
    test = nodeid.rpartition("::")[2]
    readable = _UNSAFE.sub("_", test).strip("_")[:120] or "cell"
    digest = hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:10]
    return f"{SAMPLES_DIR}/{readable}-{digest}{SUFFIX}"


def generated_case(case: Case, answer: Generation, score: float | None) -> dict[str, Any]:
    """One generated case as logged: what was sent, what came back, how it scored."""
    return {"index": case.index, "request_key": case.request().key(), "prompt": case.prompt,
            "prompt_tokens": case.prompt_tokens, "max_new_tokens": case.max_new_tokens,
            "stop": list(case.stop), "depth": case.depth, "gold": list(case.gold),
            "output": answer.text, "output_tokens": answer.output_tokens, "score": score}


def write_cell(run_dir: Path, nodeid: str, cell: dict[str, Any],
               cases: Sequence[dict[str, Any]]) -> str:
    """Write the cell's cases (each line carries ``cell``'s fields too, so a line read alone
    says where it belongs); returns the file's path relative to ``run_dir``."""
    relative = cell_file(nodeid)
    target = run_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as packed:
        for case in cases:
            line = json.dumps({"nodeid": nodeid, **cell, **case}, ensure_ascii=False,
                              allow_nan=True)
            packed.write(line.encode("utf-8") + b"\n")
    write_whole(target, buffer.getvalue())
    return relative


def read_cell(run_dir: Path, relative: str) -> list[dict[str, Any]]:
    """The logged cases of one cell, in case order."""
    with gzip.open(run_dir / relative, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def logged(run_dir: Path) -> tuple[int, int]:
    """(files, bytes) of the run's samples folder; (0, 0) when samples were not logged."""
    files = sorted((run_dir / SAMPLES_DIR).glob(f"*{SUFFIX}"))
    return len(files), sum(path.stat().st_size for path in files)
