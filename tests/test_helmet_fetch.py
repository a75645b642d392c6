"""--helmet-fetch (= --lceval-fetch helmet) in a pytest run, against a loopback server standing in
for the hub (``HF_ENDPOINT``, ``fake_hub.py``): HELMET's archive, self-made in its layout from
tests/data/helmet, gives the rag and rerank tasks their cells; a rerun with the hub gone asks
nothing of it; an unsafe archive and an unreachable hub are one usage-error line each. With the
verified copies of ../shared the ALCE prompt files come from a plain-URL mirror and cite runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_hub import FakeHub, Served, serving
from run_outputs import read_results
from shared_data import SHARED_DATA
from test_fetch import ARCHIVE, REPO, helmet_archive

from pytest_lceval.benchmarks.helmet.releases import ALCE_PROMPTS

SUITES = {name: f"import pytest\npytestmark = pytest.mark.lceval(suite='{name}')\n\n"
                f"def test_{name}(lc_cell, lc_eval):\n    lc_eval.check(lc_eval.run(lc_cell))\n"
          for name in ("rag", "rerank", "cite")}
TASKS = "kilt_nq,msmarco_rerank,alce_asqa"
FAST = ["-p", "no:randomly", "-p", "no:cacheprovider"]
COLLECT = ["--lceval-tasks", TASKS, "--lengths", "1k", "--depths", "50", "--collect-only",
           "-q", *FAST]


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    fake = FakeHub()
    fake.hub_file(REPO, ARCHIVE, Served(helmet_archive()))
    with serving(fake):
        for name, value in {"HF_ENDPOINT": fake.url, "HF_HUB_CACHE": str(tmp_path / "hf"),
                            "HF_HUB_DISABLE_TELEMETRY": "1",
                            "LCEVAL_FETCH_MIRROR": fake.mirror}.items():
            monkeypatch.setenv(name, value)
        yield fake


@pytest.fixture
def suites(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(**{f"test_{name}": text for name, text in SUITES.items()})
    return pytester


def test_fetched_folders_give_the_tasks_cells_and_a_rerun_asks_nothing(
        suites: pytest.Pytester, hub: FakeHub) -> None:
    cache = suites.path / "cache"
    before = suites.runpytest_subprocess(*COLLECT)
    before.stdout.fnmatch_lines(["*no cells for alce_asqa*", "*no cells for kilt_nq*",
                                 "*no cells for msmarco_rerank*"])

    fetched = suites.runpytest_subprocess("--helmet-fetch", "--lceval-fetch-dir", str(cache),
                                          *COLLECT)
    fetched.stderr.fnmatch_lines([f"fetch: into {cache}", f"fetch:   helmet: hub {REPO} "
                                  f"{ARCHIVE} (*), then extract kilt, msmarco, alce, "
                                  f"multi_lexsum if the archive has it",
                                  "fetch: * of * (100 %), *"])
    fetched.stdout.fnmatch_lines(["*test_rag.py::test_rag[[]kilt_nq-*",
                                  "*test_rerank.py::test_rerank[[]msmarco_rerank-*"])
    assert sorted(path.name for path in cache.iterdir()) == [
        ".fetch.lock", ".helmet.installed", "alce", "kilt", "msmarco", "multi_lexsum"]

    hub.files.clear()  # the hub has nothing now: a rerun must not need it
    rerun = suites.runpytest_subprocess(
        "--helmet-fetch", "--lceval-fetch-dir", str(cache), "--model",
        "mock:constant?text=Ada Lovelace", "--lceval-tasks", "kilt_nq", "--lengths", "1k",
        "--depths", "50", "--samples", "1", "--lceval-run", "r", "--lceval-threshold", "0",
        "-n", "2", *FAST)
    rerun.stderr.fnmatch_lines(["fetch:   helmet: present (kilt, msmarco, alce, multi_lexsum)",
                                "fetch: nothing to download"])
    rerun.assert_outcomes(passed=1)
    [row] = read_results(suites, "r")
    assert (row["task"], row["source"], row["n"]) == ("kilt_nq", "data:kilt", 1)
    assert [method for method, _, _ in hub.log].count("GET") == 1


@pytest.mark.skipif(not (SHARED_DATA.parent / "reference" / "helmet" / "prompts").is_dir(),
                    reason="HELMET's prompt files (../shared/reference) are not here")
def test_cite_reads_the_prompt_files_fetched_from_plain_urls(
        suites: pytest.Pytester, hub: FakeHub) -> None:
    for spec in ALCE_PROMPTS.files:
        name = spec.target.split("/")[-1]
        body = (SHARED_DATA.parent / "reference" / "helmet" / "prompts" / name).read_bytes()
        hub.plain_file(spec.source, Served(body))
    cache = suites.path / "cache"
    outcome = suites.runpytest_subprocess("--lceval-fetch", "cite", "--lceval-fetch-dir",
                                          str(cache), *COLLECT)
    outcome.stdout.fnmatch_lines(["*test_cite.py::test_cite[[]alce_asqa-*"])
    assert {path.name for path in (cache / "alce").iterdir()} == {
        "asqa_revised.json", "qampari_revised.json", "asqa_eval_gtr_top2000.json",
        "qampari_eval_gtr_top2000.json"}


def test_an_unknown_name_is_a_usage_error_listing_what_is_known(suites: pytest.Pytester) -> None:
    outcome = suites.runpytest("--lceval-fetch", "rag,helmett", "--collect-only", *FAST)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["ERROR: pytest-lceval: --lceval-fetch: unknown data set or "
                                  "suite 'helmett'; data sets: helmet, alce_prompts, *"])


def refusal(pytester: pytest.Pytester, cache: Path) -> str:
    """The run's one stderr line that is not the plan, after checking it is a usage error."""
    outcome = pytester.runpytest_subprocess("--helmet-fetch", "--lceval-fetch-dir", str(cache),
                                            "--collect-only", *FAST)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    [line] = [line for line in outcome.stderr.lines
              if line.strip() and not line.startswith("fetch:")]
    assert line.startswith("ERROR: pytest-lceval: --lceval-fetch: helmet: ")
    assert f"To place it by hand: download https://huggingface.co/datasets/{REPO}/resolve/main/" \
           f"{ARCHIVE}" in line
    return line


def test_an_archive_with_a_parent_path_member_is_refused_and_nothing_is_kept(
        suites: pytest.Pytester, hub: FakeHub) -> None:
    hub.hub_file(REPO, ARCHIVE, Served(helmet_archive(extra=("../evil",))))
    cache = suites.path / "deep" / "cache"
    line = refusal(suites, cache)
    assert "holds the member '../evil', outside the archive's folder" in line
    assert sorted(path.name for path in cache.iterdir()) == [".fetch.lock"]
    assert not (cache.parent / "evil").exists()


def test_a_hub_without_the_archive_is_one_usage_error_naming_it_and_the_fix(
        suites: pytest.Pytester, hub: FakeHub) -> None:
    hub.files.clear()
    line = refusal(suites, suites.path / "cache")
    assert f"the hub has no {hub.url}/datasets/{REPO}/resolve/main/{ARCHIVE}: " in line, line
