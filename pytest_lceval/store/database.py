"""Content-addressed store of model answers and shared values (SQLite, WAL mode).

The store is the only module that knows about files and concurrency. Answers are keyed by
(model fingerprint, request hash) and written before they are scored, so a crash loses nothing
and a rerun, or another xdist worker, reuses them. Each row carries a checksum of its payload: a
corrupted row is detected, dropped with a warning, and recomputed. Damage to the file itself
(pages SQLite cannot read) is repaired at start-up by ``store/repair.py``; met mid-run, it raises a
``StoreError`` that names the file and says to rerun.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from filelock import FileLock

from ..foundation.measuring import current

T = TypeVar("T")
P = ParamSpec("P")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    fingerprint TEXT NOT NULL,
    request TEXT NOT NULL,
    payload TEXT NOT NULL,
    checksum TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (fingerprint, request)
);
CREATE TABLE IF NOT EXISTS claims (
    fingerprint TEXT NOT NULL,
    request TEXT NOT NULL,
    owner TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (fingerprint, request)
);
CREATE TABLE IF NOT EXISTS shared (
    key TEXT PRIMARY KEY,
    payload TEXT NOT NULL,
    checksum TEXT NOT NULL,
    created REAL NOT NULL
);
"""


_ANSWER_UPSERT = """
INSERT INTO answers VALUES (?, ?, ?, ?, ?) ON CONFLICT (fingerprint, request) DO UPDATE
SET payload = excluded.payload, checksum = excluded.checksum, created = excluded.created
WHERE excluded.created > answers.created
"""
_SHARED_UPSERT = """
INSERT INTO shared VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE
SET payload = excluded.payload, checksum = excluded.checksum, created = excluded.created
WHERE excluded.created > shared.created
"""


CLAIM_SECONDS = 600.0
"""How long a claim on requests lasts unless its owner renews it (after each batch it answers).
A claim of a process on this host that has exited is void at once; expiry frees the claims of
a process on another host that died."""


def process_owner() -> str:
    """This process as the owner of claims: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_alive(owner: str) -> bool:
    """Whether a claim's owner may still be working: False for an exited process on this host
    (a killed xdist worker), True for any process elsewhere (its claim's expiry decides)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


class StoreCorruptionWarning(UserWarning):
    """A stored row failed its checksum or did not parse; it is recomputed."""


class StoreError(RuntimeError):
    """A store operation failed: the message names the file, and for damage says to rerun."""


class StoreFull(StoreError):
    """The store's disk (or SQLite's size limit) is full: no later answer could be stored, so
    the run stops at the first; what was stored before is kept."""


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether SQLite found the file damaged: SQLITE_CORRUPT or SQLITE_NOTADB, which Python
    raises as plain ``DatabaseError`` (locking, I/O and full disks raise subclasses)."""
    return type(exc) is sqlite3.DatabaseError


def _checksum(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def decoded(payload: str, checksum: str) -> tuple[bool, Any]:
    """``(True, value)`` for a payload that matches its checksum and parses, else (False, None)."""
    if _checksum(payload) == checksum:
        try:
            return True, json.loads(payload)
        except json.JSONDecodeError:
            pass
    return False, None


def _lenient_text(data: bytes) -> str:
    """Text with bytes that are not UTF-8 replaced: garbage in a row then fails the row's
    checksum, and is recomputed, instead of failing every query that meets it."""
    return data.decode("utf-8", "replace")


def lock_path(store_path: Path, name: str) -> Path:
    """A lock file beside the store, shared by every process that uses the store."""
    lock_dir = store_path.parent / "locks"
    lock_dir.mkdir(exist_ok=True)
    return lock_dir / f"{name}.lock"


def _names_the_file(
        method: Callable[Concatenate[Store, P], T]) -> Callable[Concatenate[Store, P], T]:
    """SQLite errors name no file; a run that meets one mid-way must say which and what to do."""
    @functools.wraps(method)
    def wrapper(self: Store, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise StoreFull(
                    f"store {self.path}: {exc}: free space on its disk, or move the store "
                    f"with --lceval-store; the answers stored so far are kept") from None
            hint = ("; rerun pytest: its start-up check moves the damaged file aside and "
                    "salvages the readable answers into a new store") if is_damage(exc) else ""
            raise StoreError(f"pytest-lceval store {self.path}: {exc}{hint}") from exc
    return wrapper


class Store:
    """One SQLite file shared by every process of a run, and by later runs."""

    @_names_the_file
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as db:
            db.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            # A long busy timeout instead of 'database is locked': writers queue, never fail.
            db = sqlite3.connect(self.path, timeout=120.0, isolation_level=None)
            db.text_factory = _lenient_text
            # Switching a new file to WAL takes a lock SQLite's busy timeout does not wait for:
            # two processes opening a new store at once saw 'database is locked'. Serialise it.
            with FileLock(str(lock_path(self.path, "journal-mode"))):
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # -- answers -----------------------------------------------------------------------------

    @_names_the_file
    def get_answers(self, fingerprint: str, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Stored payloads for the keys that have a sound row; corrupted rows are deleted."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        db = self._connect()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = db.execute(
                f"SELECT request, payload, checksum FROM answers "
                f"WHERE fingerprint = ? AND request IN ({marks})",
                [fingerprint, *chunk],
            ).fetchall()
            for request, payload, checksum in rows:
                value = self._parse(payload, checksum, f"answer {request[:12]}")
                if value is None:
                    db.execute("DELETE FROM answers WHERE fingerprint = ? AND request = ?",
                               (fingerprint, request))
                else:
                    found[request] = value
        return found

    def stored_before(self, fingerprint: str, keys: Iterable[str], since: float) -> set[str]:
        """Which of ``keys`` have an answer stored before ``since`` (a time.time()): read from
        an earlier run, not answered by this one."""
        wanted = list(dict.fromkeys(keys))
        earlier: set[str] = set()
        db = self._connect()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            earlier.update(row[0] for row in db.execute(
                f"SELECT request FROM answers WHERE fingerprint = ? AND created < ? "
                f"AND request IN ({marks})", [fingerprint, since, *chunk]))
        return earlier

    @_names_the_file
    def put_answers(self, fingerprint: str, items: Iterable[tuple[str, dict[str, Any]]]) -> None:
        rows = []
        for key, value in items:
            payload = json.dumps(value, sort_keys=True)
            rows.append((fingerprint, key, payload, _checksum(payload), time.time()))
        with self._transaction() as db:
            db.executemany("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)", rows)
            db.executemany("DELETE FROM claims WHERE fingerprint = ? AND request = ?",
                           [(row[0], row[1]) for row in rows])

    # -- claims: which process answers a missing request ----------------------------------

    @_names_the_file
    def claim(self, fingerprint: str, keys: Iterable[str], owner: str,
              seconds: float = CLAIM_SECONDS) -> tuple[list[str], list[str]]:
        """Claim the keys that have no answer and no live claim of another owner, atomically:
        (claimed by ``owner`` now or before, held by others). Answered keys are in neither."""
        wanted = list(dict.fromkeys(keys))
        now = time.time()
        mine: list[str] = []
        theirs: list[str] = []
        with self._transaction() as db:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                answered = {row[0] for row in db.execute(
                    f"SELECT request FROM answers WHERE fingerprint = ? AND request IN ({marks})",
                    [fingerprint, *chunk])}
                held = {request: (holder, expires) for request, holder, expires in db.execute(
                    f"SELECT request, owner, expires FROM claims "
                    f"WHERE fingerprint = ? AND request IN ({marks})", [fingerprint, *chunk])}
                alive: dict[str, bool] = {}
                for key in chunk:
                    if key in answered:
                        continue
                    holder, expires = held.get(key, (owner, 0.0))
                    if holder != owner and expires > now and alive.setdefault(
                            holder, _owner_alive(holder)):
                        theirs.append(key)
                    else:
                        mine.append(key)
            db.executemany("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?)",
                           [(fingerprint, key, owner, now + seconds) for key in mine])
        return mine, theirs

    @_names_the_file
    def renew_claims(self, owner: str, seconds: float = CLAIM_SECONDS) -> None:
        with self._transaction() as db:
            db.execute("UPDATE claims SET expires = ? WHERE owner = ?",
                       (time.time() + seconds, owner))

    @_names_the_file
    def release_claims(self, fingerprint: str, keys: Iterable[str], owner: str) -> None:
        """Give up claims (the owner failed to answer them): others may answer them now."""
        with self._transaction() as db:
            db.executemany("DELETE FROM claims WHERE fingerprint = ? AND request = ? "
                           "AND owner = ?", [(fingerprint, key, owner) for key in keys])

    @_names_the_file
    def count_answers(self, fingerprint: str | None = None) -> int:
        db = self._connect()
        if fingerprint is None:
            return int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])
        query = "SELECT COUNT(*) FROM answers WHERE fingerprint = ?"
        return int(db.execute(query, (fingerprint,)).fetchone()[0])

    # -- shared values (cross-cell quantities computed once) ------------------------------

    @_names_the_file
    def get_shared(self, key: str) -> Any | None:
        row = self._connect().execute(
            "SELECT payload, checksum FROM shared WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        value = self._parse(row[0], row[1], f"shared value {key[:24]}")
        if value is None:
            with self._transaction() as db:
                db.execute("DELETE FROM shared WHERE key = ?", (key,))
        return value

    @_names_the_file
    def put_shared(self, key: str, value: Any) -> None:
        payload = json.dumps(value, sort_keys=True)
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO shared VALUES (?, ?, ?, ?)",
                       (key, payload, _checksum(payload), time.time()))

    def compute_once(self, key: str, compute: Callable[[], T],
                     encode: Callable[[T], Any] = lambda v: v,
                     decode: Callable[[Any], T] = lambda v: v, timeout: float = -1) -> T:
        """The value under ``key``, computed by whichever process asks first.

        A per-key file lock serialises the computation across xdist workers; the operating
        system releases it if the holder dies, so a killed worker never blocks the others.
        ``timeout`` >= 0 waits at most that long for another process's computation and then
        raises ``filelock.Timeout``, so a caller can do other work first (-1 waits forever).
        """
        stored = self.get_shared(key)
        if stored is not None:
            return decode(stored)
        if not current().waits:  # a lookahead thread, which must never block (Measuring.waits)
            timeout = 0
        with FileLock(str(lock_path(self.path, hashlib.sha256(key.encode()).hexdigest()[:24])),
                      timeout=timeout):
            stored = self.get_shared(key)
            if stored is not None:
                return decode(stored)
            value = compute()
            self.put_shared(key, encode(value))
            return value

    # -- repair ------------------------------------------------------------------------------

    @_names_the_file
    def restore(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Insert rows salvaged from a damaged store, answers (5 columns) and shared values
        (4), checksums already verified; of two rows with one key the newer wins. One
        transaction: a repair either completes or leaves the new store empty."""
        with self._transaction() as db:
            for row in rows:
                db.execute(_ANSWER_UPSERT if len(row) == 5 else _SHARED_UPSERT, row)

    # -- helpers -----------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if db.in_transaction:  # SQLite ends it itself on some errors (a full disk)
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    @staticmethod
    def _parse(payload: str, checksum: str, what: str) -> Any | None:
        ok, value = decoded(payload, checksum)
        if ok:
            return value
        warnings.warn(f"pytest-lceval store: {what} is corrupted; it will be recomputed",
                      StoreCorruptionWarning, stacklevel=4)  # past the wrapper
        return None
