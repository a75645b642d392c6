"""Download the public Task Haystack data (GitHub INK-USC/llicl-data) into a local cache.

    python -m pytest_lceval.haystack.fetch [--dest DIR] [--tasks all80|main16|a,b] [--base-url URL]
    pytest suites/ -m task_haystack --lceval-data DIR          # DIR/llicl/<task>/...

or, in one step, ``pytest suites/ -m task_haystack --haystack-fetch``. Files already present and
sound are kept, so a rerun only fills gaps; each file is written to a temporary name, checked
(it must parse as JSON / JSON lines) and then renamed, so an interrupted download never leaves
a half file that a later run would read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .data import TASK_FILES, TASK_SETS

Opener = Callable[[str, float], IO[bytes]]


class FetchError(RuntimeError):
    """A file could not be downloaded or did not parse; the message names the URL."""


@dataclass
class FetchReport:
    downloaded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"{len(self.downloaded)} files downloaded, {len(self.kept)} already present"


def _open(url: str, timeout: float) -> IO[bytes]:
    response: IO[bytes] = urllib.request.urlopen(url, timeout=timeout)  # noqa: S310
    return response


def fetch_tasks(names: Sequence[str], dest: Path, base_url: str, timeout: float = 60.0,
                opener: Opener = _open) -> FetchReport:
    """Fetch ``names`` into ``dest/<task>/`` from ``base_url/<task>/<file>``."""
    report = FetchReport()
    for name in names:
        folder = dest / name
        folder.mkdir(parents=True, exist_ok=True)
        for file_name in TASK_FILES:
            target = folder / file_name
            relative = f"{name}/{file_name}"
            if target.exists() and _sound(target.read_bytes(), file_name):
                report.kept.append(relative)
                continue
            url = f"{base_url.rstrip('/')}/{relative}"
            try:
                with opener(url, timeout) as response:
                    body = response.read()
            except (urllib.error.URLError, OSError) as exc:
                raise FetchError(f"cannot download {url}: {exc}") from None
            if not _sound(body, file_name):
                kind = "JSON lines" if file_name.endswith(".jsonl") else "a JSON object"
                raise FetchError(f"{url} did not return {kind}")
            partial = target.with_name(target.name + ".part")
            partial.write_bytes(body)
            os.replace(partial, target)
            report.downloaded.append(relative)
    return report


def names_to_fetch(spec: str) -> tuple[str, ...]:
    """A task set's names, or a comma list taken as given (a mirror may host other tasks; a
    wrong name fails with the URL that was not found)."""
    if spec.strip() in TASK_SETS:
        return TASK_SETS[spec.strip()]
    names = tuple(dict.fromkeys(p.strip() for p in spec.split(",") if p.strip()))
    if not names:
        raise ValueError("no tasks named")
    return names


def _sound(body: bytes, file_name: str) -> bool:
    try:
        text = body.decode("utf-8")
        if file_name.endswith(".jsonl"):
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
            return bool(rows) and all(isinstance(row, dict) for row in rows)
        return isinstance(json.loads(text), dict)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    from .config import DEFAULT_FETCH_URL, default_cache

    parser = argparse.ArgumentParser(prog="python -m pytest_lceval.haystack.fetch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=default_cache(),
                        help="data directory to fill; tasks go to DEST/llicl/<task>/ "
                             "(default %(default)s)")
    parser.add_argument("--tasks", default="all80",
                        help=f"a set ({', '.join(TASK_SETS)}) or a comma list (default all80)")
    parser.add_argument("--base-url", default=DEFAULT_FETCH_URL)
    args = parser.parse_args(argv)
    try:
        report = fetch_tasks(names_to_fetch(args.tasks), args.dest / "llicl", args.base_url)
    except (ValueError, FetchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{report.summary()} into {args.dest / 'llicl'}; "
          f"run with --lceval-data {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
