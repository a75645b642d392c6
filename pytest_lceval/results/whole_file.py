"""Report files written whole or not at all, and a full disk said once, naming the folder.

A report written in place and cut short by a full disk is worse than none: a 0-byte badge or
usage count reads as a result. Each file is written under a temporary name in its own folder
and renamed over the old one, so a reader sees the old file or the new one; a write that finds
no space removes its temporary file and raises ``OutOfSpace``, which the run says in one line.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""A full disk, a full quota, a file-size limit: no write there can succeed until space is
freed."""


class OutOfSpace(OSError):
    """No space left on the disk the run writes its reports to: every later report would fail
    too. The message names the disk's folder (its mount point), not the file, so that every
    process and every report that meets it says the same one line."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"no space left on the disk at {mount_point(path)} ({reason}): this run's reports "
            f"cannot be written there; free space or point --lceval-out at another disk (the "
            f"store keeps every answer, and every report already written is whole)")
        self.path = path


def mount_point(path: Path) -> Path:
    """The folder where ``path``'s file system is mounted."""
    folder = path.absolute().parent
    while not os.path.ismount(folder):
        folder = folder.parent
    return folder


def out_of_space(exc: OSError, path: Path) -> OutOfSpace | None:
    """``OutOfSpace`` for ``path`` when ``exc`` says the disk is full, else None."""
    return OutOfSpace(path, exc.strerror or str(exc)) if exc.errno in NO_SPACE else None


def write_whole(path: Path, data: str | bytes) -> None:
    """Write ``path`` whole or leave it as it was; text is UTF-8."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        partial.write_bytes(payload)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise out_of_space(exc, path) or exc from None


def append_whole(path: Path, data: str) -> None:
    """Append ``data`` whole, or cut the file back to where it ended (a line half written on a
    full disk would be unreadable); a file that was empty is removed again."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    end = os.lseek(fd, 0, os.SEEK_END)
    try:
        left = memoryview(data.encode("utf-8"))
        while left:
            left = left[os.write(fd, left):]
    except OSError as exc:
        os.ftruncate(fd, end)
        if end == 0:
            path.unlink(missing_ok=True)
        raise out_of_space(exc, path) or exc from None
    finally:
        os.close(fd)
