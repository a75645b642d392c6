"""The store's start-up check: a usable path, and a file that SQLite can read in full.

Run once per pytest run, by the controller, before any process opens the store. A path that
cannot hold a store (a folder, a read-only file or folder, a path under a regular file, another
program's database, a file that is no SQLite file at all: a saved baseline, any JSON or text)
is the user's to fix: ``StoreUsageError``, and the file stays as it is. A damaged store (a
SQLite file truncated, or with garbage over some pages) is the tool's to fix: it is moved
aside, kept for the user, and every row SQLite can still read, and whose checksum holds, is
copied into a new store. The copy reads every table leaf page of the file row by row, so a bad
page costs only the rows on it, and a lost interior page (or the tail of a truncated file)
costs no rows on other pages.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock

from .database import Store, decoded, is_damage, lock_path

HEADER = b"SQLite format 3\x00"
PEEK = 4096
"""Bytes read to tell what a file that is not SQLite holds instead."""
TABLES = ("answers", "shared")
TABLE_LEAF = b"\x0d"
"""The first byte of a table b-tree leaf page."""
LEAF = "lceval_leaf"
"""The scratch table that reads one leaf page at a time."""


class StoreUsageError(ValueError):
    """The store path cannot hold a store; the message names the path and the fix."""


class StoreRepairedWarning(UserWarning):
    """The store was damaged: moved aside, and what could be read copied into a new one."""


def check_store(path: Path) -> str | None:
    """Make ``path`` a sound store. Returns one line saying what was repaired, or None."""
    _check_usable(path)
    if not path.exists():
        return None  # the first run makes it
    with FileLock(str(lock_path(path, "store-check"))):  # two runs starting at once repair once
        problem = _damage(path)
        if problem is None:
            _check_ours(path)
            return None
        aside = _move_aside(path)
        answers = _salvage(aside, path)
    return (f"pytest-lceval: the store {path} was damaged ({problem}); it is kept as {aside} "
            f"and a new store holds the {answers} answers that could be read from it")


def _check_usable(path: Path) -> None:
    """The path is, or can become, a regular file that this process can write, in a folder
    where SQLite can create its journal files. Checked with real writes, since permission bits
    say nothing for root or on a read-only mount; a store not made yet leaves nothing behind."""
    if path.is_dir():
        raise StoreUsageError(f"{path} is a folder; give a file path such as "
                              f"{path / 'store.sqlite'}")
    folder = next(parent for parent in path.parents if parent.exists())
    if not folder.is_dir():
        raise StoreUsageError(f"{path}: {folder} is a file, not a folder; give a path in a "
                              f"folder")
    if path.exists() and not path.is_file():
        raise StoreUsageError(f"{path} is not a regular file; give a file path")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".lceval-write-check-"):
            pass
    except OSError as exc:
        raise StoreUsageError(f"{path}: cannot write in {folder} ({exc.strerror}); make it "
                              f"writable or give a path in a writable folder") from None
    if path.exists():
        try:
            with open(path, "r+b"):
                pass
        except OSError as exc:
            raise StoreUsageError(f"{path} cannot be written ({exc.strerror}); make it "
                                  f"writable or give another file path") from None


def _damage(path: Path) -> str | None:
    """What is wrong with the file, in SQLite's words; None for a sound or absent store."""
    if not path.exists() or path.stat().st_size == 0:
        return None  # SQLite makes a new store of an empty file
    with open(path, "rb") as file:
        start = file.read(PEEK)
    if not start.startswith(HEADER):
        raise StoreUsageError(f"{path} {_what_it_holds(start)}, not a pytest-lceval store; give "
                              f"--lceval-store the store's own file, or a new file path")
    db = sqlite3.connect(path)
    try:
        problems = [row[0] for row in db.execute("PRAGMA integrity_check(1)")]
    except sqlite3.Error as exc:
        if not is_damage(exc):
            raise StoreUsageError(f"{path} cannot be read ({exc}); check the file, or give "
                                  f"another file path") from None
        return str(exc)
    finally:
        db.close()
    return None if problems == ["ok"] else " ".join(problems[0].split())


def _what_it_holds(start: bytes) -> str:
    """The file, by its first bytes: JSON (a saved baseline given as the store: its 'format'
    says so), text, or bytes of some other kind."""
    try:
        text = start.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.end < len(start):  # not a character cut by the end of what was read
            return f"is not a SQLite file (it begins with bytes {start[:8].hex(' ')})"
        text = start[:exc.start].decode("utf-8")
    if text.lstrip().startswith(("{", "[")):
        found = re.search(r'"format"\s*:\s*"([^"]{1,60})"', text)
        return f"holds JSON ({found.group(1)})" if found else "holds JSON"
    return "is a text file"


def _check_ours(path: Path) -> None:
    """Refuse another program's database rather than add tables to it."""
    db = sqlite3.connect(path)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master "
                                               "WHERE type = 'table'")}
    finally:
        db.close()
    if tables and not tables & set(TABLES):
        raise StoreUsageError(f"{path} is a SQLite database with tables {', '.join(sorted(tables))}"
                              f", not a pytest-lceval store; give another file path")


def _move_aside(path: Path) -> Path:
    """Rename the file, and its write-ahead log and shared memory, to ``<name>.damaged-<time>``:
    kept whole for the user, and out of the way of the new store."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    copy = 1
    while aside.exists():
        copy += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{copy}")
    for suffix in ("-wal", "-shm"):
        journal = path.with_name(path.name + suffix)
        if journal.exists():
            journal.rename(aside.with_name(aside.name + suffix))
    path.rename(aside)
    return aside


def _salvage(damaged: Path, path: Path) -> int:
    """Copy the sound rows of ``damaged`` into a new store at ``path``; the answers it holds."""
    store = Store(path)
    try:
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".lceval-salvage-") as scratch:
            store.restore(_sound_rows(_leaf_rows(damaged, Path(scratch))))
        return store.count_answers()
    finally:
        store.close()


def _leaf_rows(damaged: Path, scratch: Path) -> Iterator[tuple]:
    """The rows SQLite can read on every table leaf page of ``damaged``, found by page type.

    Reading leaves directly, not through the table's b-tree, also finds the rows under a lost
    interior page: a truncated file keeps every leaf before the cut. SQLite still parses each
    page: a scratch copy of the file gets a table whose root page is pointed at one leaf after
    another. The copy takes the write-ahead log in first, so its pages are the newest.
    """
    copy = scratch / "copy.sqlite"
    shutil.copyfile(damaged, copy)
    wal = damaged.with_name(damaged.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
    db = sqlite3.connect(copy, isolation_level=None)
    db.text_factory = bytes  # undecodable text is a damaged row, not a failed page
    try:
        # writable_schema also lets SQLite open a file shorter than its header says.
        db.execute("PRAGMA writable_schema = ON")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA journal_mode = OFF")  # a scratch copy: no journal, no syncing
        db.execute("PRAGMA synchronous = OFF")
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        db.execute(f"INSERT INTO sqlite_master VALUES ('table', '{LEAF}', '{LEAF}', 0, "
                   f"'CREATE TABLE {LEAF}(a, b, c, d, e)')")
        version = db.execute("PRAGMA schema_version").fetchone()[0]
    except sqlite3.DatabaseError:
        db.close()
        return  # the header or the schema page is lost: no page can be read as a table
    try:
        for page, cells in _table_leaves(copy, page_size):
            version += 1
            db.execute(f"UPDATE sqlite_master SET rootpage = ? WHERE name = '{LEAF}'", (page,))
            db.execute(f"PRAGMA schema_version = {version}")  # SQLite rereads the schema
            yield from _readable_rows(db, LEAF, cells)
    finally:
        db.close()


def _table_leaves(file: Path, page_size: int) -> Iterator[tuple[int, int]]:
    """The pages, past the schema page, whose type byte says table leaf, with the number of
    cells their header gives (at most one per 4 bytes, the smallest cell)."""
    with open(file, "rb") as pages:
        for page in range(2, file.stat().st_size // page_size + 1):
            pages.seek((page - 1) * page_size)
            header = pages.read(5)
            if header[:1] == TABLE_LEAF:
                yield page, min(int.from_bytes(header[3:5], "big"), page_size // 4)


def _sound_rows(rows: Iterator[tuple]) -> Iterator[tuple]:
    """Rows of either table whose text decodes and whose payload matches its checksum.

    A leaf holds five columns for ``answers`` and four for ``shared`` (its fifth reads NULL):
    key text, then payload, checksum and the time stored.
    """
    for row in rows:
        width = 4 if row[4] is None else 5
        texts, created = row[: width - 1], row[width - 1]
        if not all(isinstance(value, bytes) for value in texts) or \
                not isinstance(created, int | float):
            continue
        try:
            decoded_texts = [value.decode("utf-8") for value in texts]
        except UnicodeDecodeError:
            continue
        if decoded(decoded_texts[-2], decoded_texts[-1])[0]:
            yield (*decoded_texts, float(created))


def _readable_rows(db: sqlite3.Connection, table: str, cells: int) -> Iterator[tuple]:
    """Every row of ``table``, a single leaf page of ``cells`` cells, that SQLite can read,
    cell by cell in page order: skipping to an offset reads none of the cells skipped, so a
    damaged cell costs its row only; and rowids play no part, so cells out of order (a
    damaged page holds any rowids) read too."""
    query = f"SELECT * FROM {table} LIMIT 1 OFFSET ?"
    for cell in range(cells):
        try:
            row = db.execute(query, (cell,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is None:
            return
        yield row
