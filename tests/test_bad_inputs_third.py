"""The bad-input sweep's third round (issue #35): inputs a new user tried that gave a traceback,
fell back without a word, or printed a wrong line. Each test reproduces the input and checks the
one line it now gets, the exit status, and that the store and any finished report stay as they
were. Inputs that only need the start-up checks are rows of test_bad_inputs.CASES instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_bad_inputs import HAYSTACK_SUITE, _message, store_rows
from toy_suite import SUITE, TOY_TASK

GRID = ["--model", "mock:grep", "--lengths", "256", "--depths", "50", "--samples", "2",
        "-p", "no:randomly"]


def one_line(outcome: pytest.RunResult, *fragments: str) -> str:
    """The one pytest-lceval message of the run (said at most three times: the error, the
    summary, the stop), holding every fragment; no traceback."""
    text = "\n".join([*outcome.outlines, *outcome.errlines])
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    messages = [_message(line) for line in text.splitlines() if "pytest-lceval:" in line]
    assert messages, text
    full = max(messages, key=len)
    assert all(full.startswith(message) for message in messages), messages
    assert len(messages) <= 3, messages
    for fragment in fragments:
        assert fragment in full, (fragment, full)
    return full


def finished(run_dir: Path) -> dict[str, bytes]:
    """A finished run's report files, to check they stay whole."""
    return {path.name: path.read_bytes() for path in sorted(run_dir.iterdir()) if path.is_file()}


@pytest.fixture
def toy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


# -- item 1: a file where the samples folder goes ---------------------------------------------


@pytest.mark.bad_input("log-samples-over-a-file")
def test_a_file_named_samples_in_the_run_folder_is_refused_at_start(toy: pytest.Pytester) -> None:
    store = ["--lceval-store", "s.sqlite"]
    toy.runpytest(*GRID, *store, "--lceval-run", "first").assert_outcomes(passed=1)
    run_dir = toy.path / "reports" / "r"  # a folder of the user's, which holds no run
    run_dir.mkdir()
    (run_dir / "samples").write_text("my notes\n")
    before, rows = finished(run_dir), store_rows(toy.path / "s.sqlite")
    assert rows

    outcome = toy.runpytest(*GRID, *store, "--lceval-run", "r", "--lceval-log-samples")

    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    one_line(outcome, "--lceval-log-samples", f"{run_dir / 'samples'} cannot be written",
             "is a file, not a folder", "move it away or name another run folder with "
             "--lceval-run")
    assert finished(run_dir) == before
    assert store_rows(toy.path / "s.sqlite") == rows


# -- item 9: '~' in a path option -------------------------------------------------------------


@pytest.mark.bad_input("out-with-a-tilde", "store-with-a-tilde")
def test_every_path_option_expands_the_home_folder(toy: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``--lceval-out=~/x`` (one word, so no shell expands it) goes to the home folder, as
    ``--lceval-compare`` and ``--lceval-data`` do; no folder named '~' appears."""
    home = toy.path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    outcome = toy.runpytest(*GRID, "--lceval-out=~/x", "--lceval-store=~/s.sqlite",
                            "--lceval-run", "r")
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines([f"lceval: data=* run={home}/x/r store={home}/s.sqlite"])
    assert not (toy.path / "~").exists()
    assert [row["task"] for row in map(json.loads, (home / "x" / "r" / "results.jsonl")
                                       .read_text().splitlines())] == ["toy"]
    with sqlite3.connect(home / "s.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 2


# -- item 2: a full disk under --lceval-out ----------------------------------------------------

FILL = '''
def fill(disk):
    """Write zeros on ``disk`` until it says it is full."""
    import errno

    with open(disk / "filler", "ab", buffering=0) as filler:
        try:
            while True:
                filler.write(bytes(64 * 1024))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
'''
FILL_AT_THE_END = FILL + '''

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """The disk fills after the cells ran, before the reports are written."""
    from pathlib import Path

    fill(Path(session.config.getoption("lceval_out")))
'''


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real file system of 2 MiB (tmpfs), mounted for the test: CI runs as root, and mounting
    needs root's CAP_SYS_ADMIN, which a container may withhold; the test skips there rather than
    imitate a full disk."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def whole_files(run_dir: Path) -> list[str]:
    """Every file the run left under its folder; none empty, none half-written (.partial).
    (A lock file is empty by nature.)"""
    files = sorted(path for path in run_dir.rglob("*")
                   if path.is_file() and path.suffix != ".lock")
    assert not [path for path in files if path.stat().st_size == 0], files
    assert not [path for path in files if ".partial" in path.name], files
    return [str(path.relative_to(run_dir)) for path in files]


@pytest.mark.bad_input("disk-fills-before-the-reports")
def test_a_disk_that_fills_before_the_reports_leaves_the_results_whole(
        toy: pytest.Pytester, small_disk: Path) -> None:
    """The disk under --lceval-out fills after the cells ran: results.jsonl stays whole, no
    report is left empty, and the run says once that the disk is full, naming its folder."""
    toy.makeconftest(TOY_TASK + "\nimport pytest\n" + FILL_AT_THE_END)
    outcome = toy.runpytest(*GRID, "--lceval-out", str(small_disk), "--lceval-run", "r",
                            "--lceval-store", str(toy.path / "s.sqlite"))
    outcome.assert_outcomes(passed=1)
    assert outcome.ret == pytest.ExitCode.TESTS_FAILED
    one_line(outcome, f"no space left on the disk at {small_disk}", "No space left on device",
             "free space or point --lceval-out at another disk")
    run_dir = small_disk / "r"
    assert "results.jsonl" in whole_files(run_dir)
    assert [row["n"] for row in map(json.loads, (run_dir / "results.jsonl").read_text()
                                    .splitlines())] == [2]
    assert store_rows(toy.path / "s.sqlite")["answers"] == 2


@pytest.mark.bad_input("disk-full-from-the-start")
def test_a_full_disk_stops_the_run_at_the_first_result_and_keeps_the_store(
        toy: pytest.Pytester, small_disk: Path) -> None:
    """No byte free under --lceval-out (the store is on another disk): the first cell's result
    cannot be written, the run stops with one line, the store keeps the answers."""
    namespace: dict[str, object] = {}
    exec(FILL, namespace)
    namespace["fill"](small_disk)  # type: ignore[operator]
    outcome = toy.runpytest(*GRID, "--lengths", "256,512", "--lceval-out", str(small_disk),
                            "--lceval-run", "r", "--lceval-store", str(toy.path / "s.sqlite"))
    assert outcome.ret == pytest.ExitCode.INTERRUPTED
    one_line(outcome, f"no space left on the disk at {small_disk}", "--lceval-out")
    whole_files(small_disk / "r")
    assert store_rows(toy.path / "s.sqlite")["answers"] == 4  # both cells', measured together


# -- item 3: a chat template that raises -------------------------------------------------------


@pytest.mark.bad_input("chat-template-raises-at-load")
def test_a_chat_template_that_raises_fails_the_load_with_its_own_message(smollm2: object) -> None:
    """A model whose template start-up could not read (a hub id, a served model's tokenizer):
    the tokenizer's load renders the probe with transformers' own renderer, so the first cell
    says it once (ModelUnavailable) instead of every prompt failing. Under off it is not used."""
    from pytest_lceval.models.chat_probe import TemplateRefuses
    from pytest_lceval.models.hf_text import HFText

    tokenizer = smollm2.hf  # type: ignore[attr-defined]
    kept = tokenizer.chat_template
    tokenizer.chat_template = "{{ raise_exception('Conversation roles must alternate') }}"
    try:
        for choice in ("auto", "on"):
            with pytest.raises(TemplateRefuses, match="refuses a plain user message: "
                                                      "Conversation roles must alternate; fix "
                                                      "the template, or run with "
                                                      "--chat-template off"):
                HFText(tokenizer, choice)
        assert HFText(tokenizer, "off").chat_template is None
    finally:
        tokenizer.chat_template = kept


# -- item 10: a test size beyond what the tasks hold -------------------------------------------


@pytest.mark.bad_input("haystack-test-size-beyond-the-data")
def test_a_test_size_beyond_the_tasks_is_counted_as_what_they_hold(
        pytester: pytest.Pytester) -> None:
    """--haystack-test-size 1000 over tasks holding 6 and 4 test inputs: the header says which
    task holds fewer, and the plan and the results count what was tested (10 test inputs), not
    2,000."""
    from pytest_lceval.benchmarks.task_haystack.config import OFFLINE_PACK

    data = pytester.path / "data"
    for task, kept in (("number_parity", 6), ("chat_topic", 4)):
        shutil.copytree(OFFLINE_PACK / task, data / "llicl" / task)
        test = data / "llicl" / task / "test.jsonl"
        test.write_text("".join(test.read_text().splitlines(keepends=True)[:kept]))
    pytester.makepyfile(test_haystack=HAYSTACK_SUITE)
    outcome = pytester.runpytest(
        "--model", "mock:icl", "--lceval-data", str(data), "--haystack-tasks", "all",
        "--haystack-test-size", "1000", "--haystack-permutations", "1",
        "--haystack-resamples", "2", "--lceval-run", "r", "--lceval-store",
        str(pytester.path / "s.sqlite"), "-p", "no:randomly")
    assert outcome.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    outcome.stdout.fnmatch_lines([
        "haystack: test size 1000: 2 of 2 tasks hold fewer test inputs (as few as 4: "
        "chat_topic) and are tested on all they hold; the plan counts those",
        "lceval: plan: 1 suite (task_haystack), 2 cells, 10 cases*"])
    rows = {row["task"]: row for row in map(
        json.loads, (pytester.path / "reports" / "r" / "results.jsonl").read_text().splitlines())}
    resamples = 2  # each test input is asked once per resample
    assert {task: row["n"] for task, row in rows.items()} == {"number_parity": 6 * resamples,
                                                             "chat_topic": 4 * resamples}


# -- items 7 and 13: the reference tokenizer ---------------------------------------------------

RECALL = (Path(__file__).parent.parent / "suites" / "test_recall.py").read_text()
RECALL_GRID = ["--lceval-tasks", "niah_single_1", "--lengths", "1k", "--depths", "50",
               "--samples", "2", "-p", "no:randomly", "--lceval-threshold", "0"]


def toy_vocabulary(folder: Path, size: int) -> Path:
    """A byte-level BPE tokenizer.json of ``size`` tokens, trained here on a little English:
    it counts a text in several times as many tokens as mock:grep's words."""
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=size, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(["The special magic number for the island is 42."] * 50,
                                  trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


@pytest.mark.bad_input("ref-tokenizer-300-tokens")
def test_the_header_names_the_reference_and_a_count_far_from_the_models_is_said(
        pytester: pytest.Pytester) -> None:
    """A 300-token reference vocabulary: the header names it with its size, and the run says
    once (a warning, in the summary) that the model counts the prompts far from it."""
    reference = toy_vocabulary(pytester.path / "ref", 300)
    size = __import__("tokenizers").Tokenizer.from_file(str(reference)).get_vocab_size()
    assert 256 < size <= 300
    pytester.makepyfile(test_recall=RECALL)
    outcome = pytester.runpytest("--model", "mock:grep", f"--lceval-ref-tokenizer={reference}",
                                 "--lceval-run", "r", *RECALL_GRID)
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines([
        f"lceval: lengths in reference tokens of {reference} (a {size}-token vocabulary), not "
        f"the model's own; the model reads the same text, counted again in its tokenizer for "
        f"its window",
        "*ReferenceLengthWarning: --lceval-ref-tokenizer *: the model counts 0.*x the "
        "reference's tokens on the same prompts (more than 2x apart)*"])
    assert outcome.stdout.str().count("ReferenceLengthWarning:") == 1
    [row] = map(json.loads, (pytester.path / "reports" / "r" / "results.jsonl").read_text()
                .splitlines())
    assert row["metrics"]["input_tokens_model_mean"] * 2 < row["input_tokens_mean"]


def test_a_gguf_reference_gives_its_vocabulary_from_its_header(tmp_path: Path) -> None:
    """The header's vocabulary of a GGUF reference is read without loading it."""
    from pytest_lceval.models.reference_tokenizer import check_reference

    gguf = pytest.importorskip("gguf")
    numpy = pytest.importorskip("numpy")
    writer = gguf.GGUFWriter(str(tmp_path / "t.gguf"), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["a", "b", "ab", "<s>"])
    writer.add_tensor("token_embd.weight", numpy.ones((4, 2), dtype=numpy.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert check_reference(tmp_path / "t.gguf") == 4


# -- item 6: a data directory that holds some suites' folders ----------------------------------


@pytest.mark.bad_input("data-partial")
def test_a_data_directory_with_some_folders_says_per_suite_what_it_found(
        toy: pytest.Pytester) -> None:
    """Only pg_essays/ in --lceval-data: the header says, suite by suite, what was found and
    what was not (Task Haystack then runs its offline pack, as the line says)."""
    (toy.path / "data" / "pg_essays").mkdir(parents=True)
    (toy.path / "data" / "pg_essays" / "a.txt").write_text("An essay. It has sentences.")
    outcome = toy.runpytest(*GRID, "--lceval-data", str(toy.path / "data"), "--collect-only")
    assert outcome.ret == pytest.ExitCode.OK
    [line] = [line for line in outcome.outlines if line.startswith("lceval: --lceval-data")]
    assert line.startswith(f"lceval: --lceval-data {toy.path / 'data'} holds some of the "
                           f"suites' folders: ")
    for said in ("recall: found pg_essays/ |", "task_haystack: no llicl/",
                 "longbench100: found pg_essays/; no nq_oracle/, leval/", "rag: no kilt/",
                 "runs its offline fixtures or leaves the tasks out"):
        assert said in line, (said, line)


# -- item 14: the data fetch's lines -----------------------------------------------------------

FETCHED_URL = "https://example.org/data/file.bin"
FETCHED = bytes(range(256)) * 64


@pytest.mark.bad_input("fetch-stale-part")
def test_a_stale_part_of_another_file_is_downloaded_again_not_blamed_on_upstream(
        tmp_path: Path) -> None:
    """A .part an earlier fetch left of another version of the file: its first bytes are not
    this file's, so the continued download fails the SHA-256; the file is then downloaded
    whole, and is the release's."""
    from fake_hub import FakeHub, Served, serving

    from pytest_lceval.fetch.download import Progress, download

    fake = FakeHub()
    fake.plain_file(FETCHED_URL, Served(FETCHED))
    target = tmp_path / "file.bin"
    target.with_name("file.bin.part").write_bytes(FETCHED[::-1][:5000])
    with serving(fake):
        download(FETCHED_URL, target, len(FETCHED), hashlib.sha256(FETCHED).hexdigest(),
                 Progress(lambda _: None, len(FETCHED)), fake.mirror)
        assert fake.gets("file.bin") == ["bytes=5000-", ""]
    assert target.read_bytes() == FETCHED
    assert not target.with_name("file.bin.part").exists()


@pytest.mark.bad_input("fetch-unreachable-nothing-arrived")
def test_an_unreachable_source_says_nothing_arrived_when_nothing_did(tmp_path: Path) -> None:
    from pytest_lceval.fetch.download import FetchError, Progress, download

    target = tmp_path / "file.bin"
    with pytest.raises(FetchError, match=r"cannot download http://127.0.0.1:1/example.org/data/"
                                         r"file.bin: .* \(nothing arrived\)$"):
        download(FETCHED_URL, target, len(FETCHED), hashlib.sha256(FETCHED).hexdigest(),
                 Progress(lambda _: None, 1), "http://127.0.0.1:1")
    assert not list(tmp_path.iterdir())


# -- item 16: lines that misled ----------------------------------------------------------------


@pytest.mark.bad_input("junit-depth-none")
def test_junit_xml_leaves_out_what_does_not_apply(toy: pytest.Pytester) -> None:
    """A cell without a depth (the toy task's depth axis is 50 here; a task without one has
    None): no property reads the string "None"."""
    import xml.etree.ElementTree as ET

    toy.makeconftest(TOY_TASK.replace("uses_depth: bool = True", "uses_depth: bool = False"))
    toy.runpytest(*GRID, "--junitxml", "junit.xml").assert_outcomes(passed=1)
    [case] = ET.parse(toy.path / "junit.xml").getroot().iter("testcase")
    properties = {prop.get("name"): prop.get("value") for prop in case.iter("property")}
    assert "None" not in properties.values(), properties
    assert "depth" not in properties and properties["length"] == "256"


@pytest.mark.bad_input("header-mock-place", "header-haystack-grid")
def test_the_header_says_where_a_mock_runs_and_whom_the_grid_is_for(
        toy: pytest.Pytester) -> None:
    outcome = toy.runpytest(*GRID, "--collect-only")
    header = [line for line in outcome.outlines if line.startswith("lceval: grid")]
    assert header == ["lceval: grid full (a mock model, which computes nothing): lengths 256, "
                      "depths 50, 2 cases per cell (for cite, icl, longbench100, longqa, rag, "
                      "recall, rerank, summ, toy)"]


@pytest.mark.bad_input("hf-loading-bar")
def test_loading_weights_prints_no_progress_bar(tmp_path: Path,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    """A tiny random Llama saved here and loaded as the HF backend loads it: transformers'
    "Loading weights" bar would land in the first test's captured stderr."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from pytest_lceval.models.hf import Checkpoint

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=2)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    capfd.readouterr()
    Checkpoint(str(tmp_path), None, torch.device("cpu"), torch.float32).load()
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err and "%|" not in captured.err, captured.err
    assert transformers.utils.logging.is_progress_bar_enabled()  # as it was


# -- item 15: store counts that add up -----------------------------------------------------------


@pytest.mark.bad_input("store-counts-fresh-two-workers", "store-counts-rerun-two-workers")
def test_answered_and_read_add_up_to_the_cases_per_cell_and_per_run(
        toy: pytest.Pytester) -> None:
    """Under -n 2 a worker's lookahead answers cells the other worker then runs: those read
    the answers this run gave, which are not "read from the store" (earlier runs') but
    answered in this run. Fresh: every case answered; again with one more length: only its
    cases answered, the rest read. Per cell and per run, answered + read = cases."""
    store = ["--lceval-store", str(toy.path / "s.sqlite"), "-n", "2", "-p", "no:cacheprovider"]
    for run, lengths, answered, read in (("fresh", "256,512,1k", 12, 0),
                                         ("again", "256,512,1k,2k", 4, 12)):
        outcome = toy.runpytest_subprocess(*GRID, *store, "--lengths", lengths, "--depths",
                                           "0,50", "--lceval-run", run)
        outcome.stdout.fnmatch_lines([
            f"lceval: model: {answered} requests answered in * backend calls*; the cells' "
            f"{answered + read} cases: {answered} answered in this run, {read} read from the "
            f"store (answered by earlier runs)"])
        rows = [json.loads(line) for line in
                (toy.path / "reports" / run / "results.jsonl").read_text().splitlines()]
        for row in rows:
            metrics = row["metrics"]
            assert metrics["answered_in_run"] + metrics["read_from_store"] == row["n"], row
        assert sum(row["metrics"]["read_from_store"] for row in rows) == read
