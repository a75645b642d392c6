"""A data directory given explicitly, checked against the folders the suites read.

``--lceval-data .../data/llicl`` (one level too deep) used to be taken without a word: Task
Haystack ran its offline pack and recall its self-made essays, each result saying "fixtures".
Which folder feeds which suite is said once, by the releases the families declare (each
fetch/catalog.py ``Release`` names the folders it fills and the suites that read them). A
directory holding none of them is an error naming what was expected (and the parent, when that
is the data directory); one holding some gets a header line saying, suite by suite, what was
found and what was not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..fetch.catalog import Release
from ..foundation.data import DataError, DataSource, Fallbacks
from .generation_suite import GenerationSuite, NeedsData
from .suite import Suite

SHOWN = 6
"""Entries of a directory named in the error, at most."""


def suite_folders(releases: Sequence[Release],
                  suites: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The data folders each of ``suites`` reads, in the order of ``releases``."""
    wanted = set(suites)
    folders: dict[str, dict[str, None]] = {}
    for release in releases:
        for folder in release.folders:
            for suite in wanted.intersection(release.read_by(folder)):
                folders.setdefault(suite, {})[folder] = None
    return {suite: tuple(names) for suite, names in sorted(folders.items())}


def tasks_fed_by(root: Path, suites: Iterable[Suite]) -> list[str]:
    """Tasks that declare the data they read (``NeedsData``) and find it in ``root``: a
    plugin's own folder, which no release declares, makes the directory the right one."""
    data = DataSource(root)
    return [f"{suite.name}/{task.name}" for suite in suites if isinstance(suite, GenerationSuite)
            for task in suite.tasks.values()
            if isinstance(task, NeedsData) and task.missing_data(data) is None]


def check_data_dir(root: Path, suites: Mapping[str, Suite],
                   releases: Sequence[Release]) -> list[str]:
    """Header lines for data directory ``root``; DataError when it holds none of the folders
    that ``suites`` read, by ``releases`` or by their tasks' own declarations."""
    reads = suite_folders(releases, suites)
    expected = list(dict.fromkeys(folder for names in reads.values() for folder in names))
    if not expected:
        return []
    found = {folder for folder in expected if (root / folder).is_dir()}
    if not found and tasks_fed_by(root, suites.values()):
        return []
    if not found:
        listed = ", ".join(f"{folder}/" for folder in expected)
        raise DataError(f"{root} holds none of the folders the suites read ({listed})"
                        f"{_hint(root, expected)}")
    if found == set(expected):
        return []
    parts = []
    for suite, names in reads.items():
        has = [f"{folder}/" for folder in names if folder in found]
        lacks = [f"{folder}/" for folder in names if folder not in found]
        said = [f"found {', '.join(has)}"] if has else []
        said += [f"no {', '.join(lacks)}"] if lacks else []
        parts.append(f"{suite}: {'; '.join(said)}")
    return [f"lceval: --lceval-data {root} holds some of the suites' folders: "
            f"{' | '.join(parts)} (a suite without its folder runs its offline fixtures or "
            f"leaves the tasks out)"]


def _hint(root: Path, expected: list[str]) -> str:
    """Where the folders may be: the parent (a data directory given one level too deep), else
    what ``root`` holds."""
    above = [f"{folder}/" for folder in expected if (root.parent / folder).is_dir()]
    if above:
        return (f"; its parent holds {', '.join(above)}: give --lceval-data {root.parent}")
    entries = sorted(path.name for path in root.iterdir() if not path.name.startswith("."))
    shown = ", ".join(entries[:SHOWN]) + (", ..." if len(entries) > SHOWN else "")
    return (f"; it holds {shown or 'nothing'}: give the folder that holds them (--lceval-fetch "
            f"downloads them)")


def fallback_lines(data: DataSource, fallbacks: Mapping[str, Fallbacks]) -> list[str]:
    """A line for each suite (``fallbacks``: what the run's cells of each read in place of a
    missing folder) whose cells run on offline fixtures because the data folders given lack
    what they read, naming those folders: with --lceval-data one level too deep, recall ran on
    the self-made essays without a word. None without a data folder: the header's ``data=``
    says then that the whole run reads the fixtures."""
    looked = " and ".join(f"{folder} ({option})" for folder, option in (
        (data.root, "--lceval-data"), (data.fetched, "--lceval-fetch")) if folder is not None)
    if not looked:
        return []
    lines = []
    for suite, pairs in fallbacks.items():
        lacking = [(folder, instead) for folder, instead in pairs if data.folder(folder) is None]
        if lacking:
            said = ", ".join(f"no {folder}/ ({instead})" for folder, instead in lacking)
            wanted = ", ".join(f"{folder}/" for folder, _ in lacking)
            lines.append(f"lceval: {suite} runs on offline fixtures: {looked} has {said}; "
                         f"give --lceval-data the folder that holds {wanted}")
    return lines
