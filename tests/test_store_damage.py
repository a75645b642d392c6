"""The store's start-up check on real damaged files: garbage over pages in the middle, a
truncated file, garbage over every page, a write-ahead log that was never merged; and the paths
that cannot hold a store (a folder, a path under a file, another program's database, read-only
file or folder, a file that is no SQLite file), each one usage line. Salvage is measured
against two oracles computed on the files themselves: SQLite's page map before the damage
(dbstat: every row on pages the damage missed must come back) and a point lookup of every row
after it (every row SQLite can still read and that is intact must come back)."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from toy_suite import SUITE, TOY_TASK

from pytest_lceval.store.database import Store, StoreCorruptionWarning, StoreError
from pytest_lceval.store.repair import HEADER, StoreUsageError, check_store

ROWS = 1500
PAGE = 4096


def build_store(path: Path, rows: int = ROWS) -> dict[str, str]:
    """A real store of ``rows`` answers of mixed sizes (every 7th spills to overflow pages);
    returns each key's stored payload. Closed, so its write-ahead log is merged."""
    rng = random.Random(7)
    values = {f"k{i}": {"i": i, "text": "abcdefgh"[i % 8] * rng.choice([200, 700, 1300])
                        if i % 7 else "o" * 6000} for i in range(rows)}
    store = Store(path)
    keys = list(values)
    for start in range(0, rows, 100):
        store.put_answers("fp", [(key, values[key]) for key in keys[start:start + 100]])
    store.close()
    assert not path.with_name(path.name + "-wal").exists()
    return payloads(path)


def payloads(path: Path) -> dict[str, str]:
    db = sqlite3.connect(path)
    try:
        return dict(db.execute("SELECT request, payload FROM answers"))
    finally:
        db.close()


def pages_of_rows(path: Path) -> dict[str, set[int]]:
    """SQLite's own map of the sound file: the leaf page and overflow pages of every row.

    dbstat lists the leaves in key order with their cell counts, and names each overflow
    page after its leaf and cell ('/00a/003+000001'), so rows in rowid order fall into place.
    """
    db = sqlite3.connect(path)
    try:
        stat = db.execute("SELECT path, pageno, pagetype, ncell FROM dbstat "
                          "WHERE name = 'answers' ORDER BY path").fetchall()
        keys = [row[0] for row in db.execute("SELECT request FROM answers ORDER BY rowid")]
    except sqlite3.OperationalError as exc:  # a SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
        pytest.skip(f"this SQLite has no dbstat table to map rows to pages: {exc}")
    finally:
        db.close()
    overflow: dict[str, set[int]] = {}
    for page_path, page, kind, _ in stat:
        if kind == "overflow":
            overflow.setdefault(page_path.split("+")[0], set()).add(page)
    pages: dict[str, set[int]] = {}
    cells = iter(keys)
    for page_path, page, kind, count in stat:
        if kind == "leaf":
            for cell in range(count):
                pages[next(cells)] = {page} | overflow.get(f"{page_path}{cell:03x}", set())
    assert len(pages) == len(keys) and next(cells, None) is None
    return pages


def point_readable(path: Path, sound: dict[str, str]) -> set[str]:
    """Keys whose row a lookup by rowid still reads from the damaged file, payload intact."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    db.execute("PRAGMA writable_schema = ON")  # lets SQLite open a truncated file
    found = set()
    try:
        for rowid in range(1, len(sound) + 1):
            try:
                row = db.execute("SELECT request, payload FROM answers WHERE rowid = ?",
                                 (rowid,)).fetchone()
            except sqlite3.DatabaseError:
                continue
            if row is not None and sound.get(row[0]) == row[1]:
                found.add(row[0])
    except sqlite3.DatabaseError:
        pass  # the schema itself cannot be read
    finally:
        db.close()
    return found


def garbage(start: float, length: int, page_start: bool = False) -> Callable[[Path], set[int]]:
    """Random bytes over ``length`` bytes from ``start`` (a fraction of the file, moved back
    to the start of its page with ``page_start``)."""
    def damage(path: Path) -> set[int]:
        offset = int(path.stat().st_size * start)
        offset -= offset % PAGE if page_start else 0
        with open(path, "r+b") as file:
            file.seek(offset)
            file.write(random.Random(offset).randbytes(length))
        return set(range(offset // PAGE + 1, (offset + length - 1) // PAGE + 2))
    return damage


def truncate(fraction: float, extra: int = 0) -> Callable[[Path], set[int]]:
    """Cut the file to a fraction of its pages, plus ``extra`` bytes of the next one."""
    def damage(path: Path) -> set[int]:
        size = path.stat().st_size
        keep = int(size / PAGE * fraction) * PAGE + extra
        os.truncate(path, keep)
        return set(range(keep // PAGE + 1, size // PAGE + 1))
    return damage


@pytest.mark.parametrize("damage", [
    pytest.param(garbage(0.5, 20_000), id="garbage-mid-file"),
    pytest.param(garbage(0.6, 40, page_start=True), id="garbage-over-one-page-header"),
    pytest.param(garbage(0.02, 9_000), id="garbage-near-the-start"),
    pytest.param(truncate(0.5), id="truncated-at-a-page"),
    pytest.param(truncate(0.3, 1234), id="truncated-mid-page"),
])
def test_a_damaged_store_is_kept_and_every_readable_answer_salvaged(
        tmp_path: Path, damage: Callable[[Path], set[int]]) -> None:
    path = tmp_path / "store.sqlite"
    sound = build_store(path)
    pages = pages_of_rows(path)
    damaged_pages = damage(path)
    damaged_bytes = path.read_bytes()
    untouched = {key for key, on in pages.items() if not on & damaged_pages}
    readable = point_readable(path, sound)

    message = check_store(path)

    assert message is not None
    asides = list(tmp_path.glob("store.sqlite.damaged-*"))
    assert [aside.name for aside in asides] == [asides[0].name] and \
        asides[0].read_bytes() == damaged_bytes  # kept as it was
    salvaged = payloads(path)
    assert f"store {path} was damaged" in message and f"kept as {asides[0]}" in message
    assert f"holds the {len(salvaged)} answers" in message
    assert untouched | readable <= set(salvaged)  # nothing readable is lost...
    assert all(sound[key] == payload for key, payload in salvaged.items())  # ...nothing bad kept
    assert len(untouched) < ROWS and len(salvaged) < ROWS  # the damage did cost rows
    assert len(untouched) > ROWS // 4
    assert check_store(path) is None  # the new store is sound
    assert Store(path).get_answers("fp", list(salvaged)).keys() == salvaged.keys()


def test_a_cut_through_the_interior_pages_loses_no_leaf_before_it(tmp_path: Path) -> None:
    """Why salvage reads leaf pages, not the b-tree: cut at the first interior page below
    the root, the rows under it read nothing through the root, yet their leaves survive."""
    path = tmp_path / "store.sqlite"
    sound = build_store(path, 2 * ROWS)
    pages = pages_of_rows(path)
    db = sqlite3.connect(path)
    interior = [page for (page,) in db.execute(
        "SELECT pageno FROM dbstat WHERE name = 'answers' AND pagetype = 'internal' "
        "AND path != '/' ORDER BY pageno")]
    db.close()
    assert interior, "the table needs three levels for this test"
    os.truncate(path, (interior[0] - 1) * PAGE)
    before_cut = {key for key, on in pages.items() if max(on) < interior[0]}
    readable = point_readable(path, sound)
    assert len(readable) < len(before_cut) / 2
    check_store(path)
    assert before_cut <= set(payloads(path))


def test_garbage_inside_one_answer_costs_that_answer_once(tmp_path: Path) -> None:
    """Bytes that miss SQLite's structure pass the file check; the row's checksum catches them
    (undecodable text included), the answer is recomputed once, and the next run is clean."""
    path = tmp_path / "store.sqlite"
    sound = build_store(path, 200)
    data = path.read_bytes()
    middle = data.index(b"h" * 700, len(data) // 2) + 300
    junk = b"\xff\xfe garbage \x00\x81"
    path.write_bytes(data[:middle] + junk + data[middle + len(junk):])
    assert check_store(path) is None
    store = Store(path)
    with pytest.warns(StoreCorruptionWarning, match="corrupted; it will be recomputed"):
        found = store.get_answers("fp", list(sound))
    assert len(found) == len(sound) - 1
    (lost,) = set(sound) - set(found)
    store.put_answers("fp", [(lost, {"recomputed": True})])
    assert len(store.get_answers("fp", list(sound))) == len(sound)  # no warning: clean


def fullest_leaf(path: Path) -> tuple[int, list[str]]:
    """The answers table's leaf page with the most cells, and the keys of its rows in order."""
    db = sqlite3.connect(path)
    (leaf,) = db.execute("SELECT pageno FROM dbstat WHERE name = 'answers' AND "
                         "pagetype = 'leaf' ORDER BY ncell DESC").fetchone()
    db.close()
    return leaf, [key for key, pages in pages_of_rows(path).items() if leaf in pages]


def test_a_broken_cell_costs_its_row_and_a_garbled_row_is_left_out(tmp_path: Path) -> None:
    """One cell pointer aimed past its page: the scan of that leaf stops there, and probes
    must find the cells after it. A payload garbled elsewhere fails its checksum: not copied."""
    path = tmp_path / "store.sqlite"
    sound = build_store(path)
    leaf, on_leaf = fullest_leaf(path)
    data = bytearray(path.read_bytes())
    pointer = (leaf - 1) * PAGE + 8 + 2 * 1  # cell 1 of the leaf (a leaf header is 8 bytes)
    data[pointer:pointer + 2] = b"\xff\xf0"
    garbled = data.index(b"h" * 700, len(data) // 2) + 300
    data[garbled:garbled + 5] = b"HHHHH"
    path.write_bytes(bytes(data))
    readable = point_readable(path, sound)
    assert len(on_leaf) > 4 and on_leaf[1] not in readable and set(on_leaf[2:]) & readable

    assert check_store(path) is not None
    salvaged = payloads(path)
    assert readable <= set(salvaged) and set(on_leaf) - set(salvaged) == {on_leaf[1]}
    assert all(sound[key] == payload for key, payload in salvaged.items())


def test_cells_out_of_order_are_all_salvaged(tmp_path: Path) -> None:
    """Cell pointers 1 and 2 of a leaf swapped, and pointer 4 aimed past the page: SQLite
    meets rowids out of order, then a cell it cannot read; the walk reads every other row on
    the page and never steps back (which would loop over the swapped pair)."""
    path = tmp_path / "store.sqlite"
    sound = build_store(path)
    leaf, on_leaf = fullest_leaf(path)
    data = bytearray(path.read_bytes())
    pointers = (leaf - 1) * PAGE + 8
    data[pointers + 2:pointers + 6] = data[pointers + 4:pointers + 6] + \
        data[pointers + 2:pointers + 4]
    data[pointers + 8:pointers + 10] = b"\xff\xf0"
    path.write_bytes(bytes(data))
    assert check_store(path) is not None
    assert set(sound) - set(payloads(path)) == {on_leaf[4]}


@pytest.mark.parametrize("held_open", [False, True], ids=["closed", "held-open"])
def test_a_write_ahead_log_never_merged_is_salvaged_and_its_newer_rows_win(
        tmp_path: Path, held_open: bool) -> None:
    """A run killed before SQLite merged its log: the log's rows, and its newer versions of
    old rows, survive damage to the main file. The check merges the log as it closes the
    file, unless another process holds it open: then the log is moved aside with it."""
    live = tmp_path / "live" / "store.sqlite"
    build_store(live, 300)
    store = Store(live)
    store._connect().execute("PRAGMA wal_autocheckpoint = 0")
    store.put_answers("fp", [(f"w{i}", {"i": i, "text": "y" * 900}) for i in range(200)])
    store.put_answers("fp", [(f"k{i}", {"i": i, "text": "newer"}) for i in range(20)])
    path = tmp_path / "store.sqlite"
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{live}{suffix}", f"{path}{suffix}")
    store.close()
    garbage(0.4, 12_000)(path)
    other = sqlite3.connect(path)
    if held_open:
        other.execute("PRAGMA user_version").fetchone()
    else:
        other.close()

    assert check_store(path) is not None
    other.close()
    assert [aside.name.endswith("-wal") for aside in tmp_path.glob("store.sqlite.damaged-*-wal")
            ] == [True] * held_open
    salvaged = Store(path).get_answers("fp", [f"w{i}" for i in range(200)] +
                                       [f"k{i}" for i in range(20)])
    assert sum(key.startswith("w") for key in salvaged) == 200
    assert {salvaged[f"k{i}"]["text"] for i in range(20)} == {"newer"}


def test_a_store_whose_every_page_is_garbage_is_kept_and_replaced_by_an_empty_store(
        tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    damaged = HEADER + b"not a page " * 400
    path.write_bytes(damaged)
    message = check_store(path)
    assert message is not None and "(file is not a database)" in message
    assert "holds the 0 answers" in message
    (aside,) = tmp_path.glob("store.sqlite.damaged-*")
    assert aside.read_bytes() == damaged
    assert Store(path).count_answers() == 0


def test_sound_empty_and_missing_stores_pass_untouched(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    sound = build_store(path, 50)
    assert check_store(path) is None and payloads(path) == sound
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert check_store(empty) is None
    missing = tmp_path / "new" / "store.sqlite"
    assert check_store(missing) is None
    assert not missing.parent.exists()  # the check makes nothing; the first run does
    assert not list(tmp_path.glob("*damaged*"))


def test_two_repairs_in_one_second_keep_both_damaged_files(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    for text in (b"first", b"second"):
        path.write_bytes(HEADER + text * 100)
        check_store(path)
    kept = sorted(aside.read_bytes()[len(HEADER):][:6]
                  for aside in tmp_path.glob("store.sqlite.damaged-*"))
    assert kept == [b"firstf", b"second"]


@pytest.mark.parametrize(("make", "expected"), [
    (lambda p: p.mkdir(), "is a folder; give a file path such as"),
    (lambda p: p.parent.joinpath("file").write_text("x"), "is a file, not a folder"),
    (lambda p: os.mkfifo(p), "is not a regular file"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE notes (text)").connection.commit(),
     "is a SQLite database with tables notes, not a pytest-lceval store"),
    (lambda p: p.write_text("not a database\n"), "is a text file, not a pytest-lceval store"),
])
def test_paths_that_cannot_hold_a_store_are_usage_errors(
        tmp_path: Path, make: Callable[[Path], object], expected: str) -> None:
    path = tmp_path / "store.sqlite"
    make(path)
    target = tmp_path / "file" / "store.sqlite" if "not a folder" in expected else path
    with pytest.raises(StoreUsageError, match=expected) as raised:
        check_store(target)
    assert str(target) in str(raised.value) and "\n" not in str(raised.value)


ARGS = ["--model", "mock:grep", "--lengths", "256,512", "--depths", "0,50", "--samples", "2",
        "-p", "no:randomly", "-p", "no:cacheprovider"]


def test_a_folder_as_store_stops_pytest_with_one_line(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "s.sqlite").mkdir()
    result = pytester.runpytest(*ARGS, "--lceval-store", "s.sqlite")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: pytest-lceval: --lceval-store {pytester.path}/s.sqlite"
                                 " is a folder; give a file path such as *"])


def read_only_command(target: Path, argv: list[str]) -> list[str]:
    """``argv`` run where ``target`` cannot be written, checked by a real write: permission
    bits for a user, a read-only bind mount in a private mount namespace for root (whom
    permission bits do not stop)."""
    target.chmod(0o555 if target.is_dir() else 0o444)
    try:
        if target.is_dir():
            (target / "probe").touch()
            (target / "probe").unlink()
        else:
            target.open("r+b").close()
    except PermissionError:
        return argv
    if shutil.which("unshare") is None:
        pytest.skip("running as root, and no unshare to make a read-only mount")
    mounted = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro '{target}' "
                              f"'{target}' && ! touch '{target}' 2>/dev/null"],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("running as root, and no private mount namespace for a read-only mount: "
                    + mounted.stderr.decode(errors="replace").strip())
    quoted = " ".join(f"'{arg}'" for arg in argv)
    return ["unshare", "-m", "sh", "-c",
            f"mount --bind -o ro '{target}' '{target}' && exec {quoted}"]


@pytest.mark.parametrize("read_only", ["file", "folder"])
def test_a_read_only_store_or_folder_stops_pytest_with_one_line(
        pytester: pytest.Pytester, read_only: str) -> None:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    folder = pytester.path / "stores"
    folder.mkdir()
    store = folder / "s.sqlite"
    build_store(store, 10)
    target = store if read_only == "file" else folder
    try:
        command = read_only_command(target, [sys.executable, "-m", "pytest", *ARGS,
                                             "--lceval-store", str(store)])
        result = pytester.run(*command)
    finally:
        target.chmod(0o755 if target.is_dir() else 0o644)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    fix = ("cannot be written (Read-only file system); make it writable" if read_only == "file"
           else f"cannot write in {folder} (Read-only file system); make it writable")
    if os.geteuid() != 0:
        fix = fix.replace("Read-only file system", "Permission denied")
    result.stderr.fnmatch_lines([f"ERROR: pytest-lceval: --lceval-store {store}*{fix}*"])
    assert len(result.stderr.lines) <= 2


def test_damage_mid_run_names_the_file_and_the_rerun_repairs_it(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Garbage written over the store after the start-up check: every cell that meets it says
    which file and to rerun; the rerun moves it aside and passes."""
    pytester.makeconftest(TOY_TASK + """
import os
from pathlib import Path


def pytest_sessionstart(session):
    if os.environ.get("DAMAGE_STORE"):
        path = Path("s.sqlite")
        with open(path, "r+b") as file:
            file.seek(4096)
            file.write(os.urandom(path.stat().st_size - 4096))
""")
    pytester.makepyfile(test_suite=SUITE)
    store = pytester.path / "s.sqlite"
    args = [*ARGS, "--lceval-store", "s.sqlite"]
    pytester.runpytest(*args, "--lceval-run", "a").assert_outcomes(passed=4)
    monkeypatch.setenv("DAMAGE_STORE", "1")
    damaged = pytester.runpytest(*args, "--lceval-run", "b")
    monkeypatch.delenv("DAMAGE_STORE")
    damaged.assert_outcomes(failed=4)
    damaged.stdout.fnmatch_lines([f"E*StoreError: pytest-lceval store {store}: * malformed; "
                                  "rerun pytest: its start-up check moves the damaged file "
                                  "aside*"])
    rerun = pytester.runpytest(*args, "--lceval-run", "c", "-n", "2")  # workers see the new
    rerun.assert_outcomes(passed=4)                                     # store, never check
    rerun.stdout.fnmatch_lines([f"*StoreRepairedWarning: pytest-lceval: the store {store} was "
                                f"damaged*kept as {store}.damaged-*holds the 0 answers*"])
    assert rerun.stdout.str().count("StoreRepairedWarning:") == 1
    assert len(list(pytester.path.glob("s.sqlite.damaged-*"))) == 1


def test_a_store_error_names_the_file_and_only_damage_says_rerun(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    build_store(path, 20)
    store = Store(path)
    with open(path, "r+b") as file:
        file.seek(PAGE)
        file.write(b"\xff" * (path.stat().st_size - PAGE))
    with pytest.raises(StoreError, match="rerun pytest") as raised:
        store.count_answers()
    assert str(path) in str(raised.value)
    store.close()
    path.unlink()
    path.mkdir()  # SQLite cannot open a folder: named, but no rerun advice
    with pytest.raises(StoreError) as raised:
        Store(path)
    assert str(path) in str(raised.value) and "rerun" not in str(raised.value)
