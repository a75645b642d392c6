"""What a public release is: where it comes from (a Hugging Face hub repository or plain URLs),
its licence, the suites that read it and the files it puts in the data directory, with their
sizes and SHA-256; and how names (releases, suites, 'all') select releases.

The releases themselves are declared by the benchmark families that read them (each family's
``releases.py``, handed over by the ``pytest_lceval_releases`` hook, ``declared``), so adding a
family's data never touches the core. The file lists (``releases.json``, by release name) were
made from byte copies checked against their sources (git blob hashes, the wheel's RECORD), so a
download is accepted only when it is the release the project was checked against: a truncated
file, a proxy's error page or a file changed upstream is refused and named.
``tests/test_fetch_catalog.py`` rebuilds the lists from such copies.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

GITHUB = "https://raw.githubusercontent.com"
MANIFEST = Path(__file__).with_name("releases.json")
CACHE_ENV = "LCEVAL_CACHE"


def default_dest() -> Path:
    """Where fetched data goes: $LCEVAL_CACHE/data, else $XDG_CACHE_HOME/pytest-lceval/data,
    else ~/.cache/pytest-lceval/data (beside the preset models' cache)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser() / "data"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pytest-lceval" / "data"


@dataclass(frozen=True)
class FileSpec:
    """One file of a release: where it goes under the data directory and what it must be."""

    target: str
    """Path under the data directory, e.g. 'pg_essays/addiction.txt'."""
    source: str
    """Its URL, or for a member of an archive its name inside the archive."""
    size: int
    sha256: str


@dataclass(frozen=True)
class Origin:
    """How a release's file list is made from a verified copy: each file matching ``patterns``
    under ``folder`` of the copy is ``base`` + its path relative to ``folder``."""

    base: str
    folder: str
    """The files' folder under the data directory (and in the verified copy)."""
    patterns: tuple[str, ...]
    copy: str = ""
    """Where the verified copy lives relative to the shared folder ('' = data/<folder>)."""


@dataclass(frozen=True)
class HubArchive:
    """A tar archive in a hub dataset repository, of which some top-level folders are kept."""

    repo_id: str
    filename: str
    folders: tuple[str, ...]
    """``<prefix>/<folder>/`` of the archive, each required."""
    optional: tuple[str, ...] = ()
    """Kept when the archive has them."""
    revision: str = "main"
    repo_type: str = "dataset"
    prefix: str = "data"

    @property
    def url(self) -> str:
        return (f"https://huggingface.co/{self.repo_type}s/{self.repo_id}/resolve/"
                f"{self.revision}/{self.filename}")


@dataclass(frozen=True)
class UrlArchive:
    """A zip (a wheel) at a plain URL, of which some members are kept."""

    url: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Release:
    name: str
    what: str
    origin: str
    licence: str
    suites: tuple[str, ...]
    """The built-in suites that read it."""
    folders: tuple[str, ...]
    """What it fills in the data directory."""
    readers: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """The suites that read a folder, where not every one of ``suites`` reads every folder
    (HELMET's archive: kilt/ is rag's, alce/ cite's) or where a folder is a substitute that
    ``--lceval-fetch SUITE`` does not fetch (msmarco_dl/)."""
    hub: HubArchive | None = None
    archive: UrlArchive | None = None
    origins: tuple[Origin, ...] = ()
    flag: str = ""
    """The dest of the declaring family's own pytest flag that fetches this release alone (one
    older than --lceval-fetch, which the family declares); '' for none."""

    def read_by(self, folder: str) -> tuple[str, ...]:
        """The suites that read ``folder`` of this release."""
        return dict(self.readers).get(folder, self.suites)

    @property
    def files(self) -> tuple[FileSpec, ...]:
        """The plain files (or, with ``archive``, its members) and what each must be."""
        return tuple(FileSpec(str(target), str(source), int(str(size)), str(sha256))
                     for target, source, size, sha256 in _manifest().get(self.name, ()))

    @property
    def kind(self) -> str:
        """'hub' when a hub repository holds its main file, else 'url'."""
        return "hub" if self.hub is not None else "url"

    def by_hand(self, dest: Path) -> str:
        """How to place it without the fetch, in one sentence."""
        steps = []
        if self.hub is not None:
            kept = ", ".join(f"{self.hub.prefix}/{f}/" for f in self.hub.folders
                             + self.hub.optional)
            steps.append(f"download {self.hub.url} (hub repository {self.hub.repo_id}; "
                         f"`hf download {self.hub.repo_id} {self.hub.filename} --repo-type "
                         f"{self.hub.repo_type}`), extract {kept} into {dest}/")
        if self.archive is not None:
            members = ", ".join(f"{spec.source} -> {dest}/{spec.target}" for spec in self.files)
            steps.append(f"download {self.archive.url} (a zip) and extract {members}")
        for origin in self.origins:
            paths = [spec.source.removeprefix(origin.base) for spec in self.files
                     if spec.source.startswith(origin.base)]
            listed = ", ".join(paths) if len(paths) <= 5 else \
                f"the {len(paths)} files (their paths are in the list named below)"
            steps.append(f"download {listed} from {origin.base} into {dest}/{origin.folder}/, "
                         f"keeping their paths")
        listed = f"; each file's size and SHA-256 are in {MANIFEST}" if self.files else ""
        return "; ".join(steps) + listed


@cache
def _manifest() -> dict[str, list[list[object]]]:
    data: dict[str, list[list[object]]] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return data


def by_name(releases: Sequence[Release]) -> dict[str, Release]:
    return {release.name: release for release in releases}


def known_suites(releases: Sequence[Release]) -> set[str]:
    """The suites whose data ``releases`` hold."""
    return {suite for release in releases for suite in release.suites}


def select(releases: Sequence[Release], names: Iterable[str]) -> list[Release]:
    """The releases ``names`` asks for, each a release name, a suite name or 'all', in the order
    of ``releases`` (the fetch order); ValueError names an unknown one and lists what is
    known."""
    wanted: set[str] = set()
    unknown: list[str] = []
    named, suites = by_name(releases), known_suites(releases)
    for name in names:
        if name == "all":
            wanted.update(named)
        elif name in named:
            wanted.add(name)
        elif name in suites:
            wanted.update(r.name for r in releases if name in r.suites)
        else:
            unknown.append(name)
    if unknown:
        raise ValueError(f"unknown data set or suite {', '.join(map(repr, unknown))}; data "
                         f"sets: {', '.join(named)}; suites: {', '.join(sorted(suites))}; "
                         f"or all")
    return [release for release in releases if release.name in wanted]


def relative_url(url: str) -> PurePosixPath:
    """'https://host/a/b' -> 'host/a/b': a file's place under a mirror of plain URLs."""
    scheme, _, rest = url.partition("://")
    if not rest:
        raise ValueError(f"not a URL: {url!r}")
    return PurePosixPath(rest)
