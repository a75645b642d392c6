"""Repairing a damaged store: how long the start-up check takes on a sound store and on one with
garbage written over its middle, and how many answers the repair keeps.

Usage: ``python bench/bench_store_repair.py [--answers 100000] [--garbage-kb 100]``

The store is built with the project's own ``Store`` (payloads of about 2 kB, as long recall
answers with their metadata are), then ``--garbage-kb`` of random bytes overwrite the middle of
the file; the answers on the overwritten pages are lost by construction, so the kept count is
compared with the rows SQLite could still read by their keys before the repair.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from pytest_lceval.store.database import Store
from pytest_lceval.store.repair import check_store


def build(path: Path, answers: int) -> None:
    store = Store(path)
    text = "x" * 2000
    for start in range(0, answers, 5000):
        store.put_answers("fp", [(f"k{i}", {"text": f"{i} {text}"})
                                 for i in range(start, min(answers, start + 5000))])
    store.close()


def readable(path: Path, answers: int) -> int:
    """Rows whose payload SQLite still reads one by one through the key, before any repair
    (the payload, not just the key: the key alone is answered from the index)."""
    db = sqlite3.connect(path)
    found = 0
    for i in range(answers):
        with contextlib.suppress(sqlite3.DatabaseError):
            found += db.execute("SELECT payload FROM answers WHERE fingerprint = 'fp' AND "
                                "request = ?", (f"k{i}",)).fetchone() is not None
    db.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--garbage-kb", type=int, default=100)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "store.sqlite"
        build(path, options.answers)
        size = path.stat().st_size
        started = time.perf_counter()
        assert check_store(path) is None
        sound = time.perf_counter() - started
        data = bytearray(path.read_bytes())
        middle = len(data) // 2
        data[middle:middle + options.garbage_kb * 1024] = random.Random(0).randbytes(
            options.garbage_kb * 1024)
        path.write_bytes(bytes(data))
        before = readable(path, options.answers)
        started = time.perf_counter()
        message = check_store(path)
        repair = time.perf_counter() - started
        kept = Store(path).count_answers("fp")
        print(f"store of {options.answers:,} answers, {size / 1e6:.0f} MB; "
              f"{options.garbage_kb} kB of garbage over its middle")
        print(f"check of the sound store: {sound:.2f} s")
        print(f"repair: {repair:.1f} s; kept {kept:,} answers; {before:,} were readable by key "
              f"before the repair (reported: {message is not None})")


if __name__ == "__main__":
    main()
