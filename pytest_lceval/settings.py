"""Run settings: declared once, resolved once (CLI > env > ini) into a frozen object; the serving
backends' options (``ServingOptions``) the same way, from the options their plugin declares.

Every bad value raises pytest.UsageError naming the option, the value, where it came from and
the fix, before any model is loaded.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from .foundation.data import DataSource
from .foundation.grid import parse_depth, parse_length
from .models.grid_profile import GRID_CHOICES, REDUCED_CORE, GridProfile, choose, model_place
from .models.model_args import OPTION as MODEL_ARGS
from .models.model_args import args_text, parse_model_args, window_from
from .models.registry import ModelSpec
from .models.serving import (
    API_MODES,
    DEFAULT_CONCURRENCY,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    VLLM_EXECUTORS,
    ServingOptions,
    parse_urls,
    redact_url,
)
from .models.topk_rank import RANK_CHOICES
from .tasks.context_size import SIZES
from .tasks.stops import STOP_CHOICES

T = TypeVar("T")

DEFAULT_LENGTHS = "1k,2k,4k"
DEFAULT_DEPTHS = "0,20,40,60,80,100"
"""HELMET's six evenly spaced depths (its JSON KV and RAG data files are ``*_dep6``)."""
DEFAULT_SAMPLES = 10
DEFAULT_SEED = 42
DEFAULT_THRESHOLD = 0.5
DEFAULT_PRIOR_KNOWLEDGE_THRESHOLD = 0.5
DATA_ENV = "LCEVAL_DATA"
JUDGE_ENV = "LCEVAL_JUDGE"
CHAT_TEMPLATE_CHOICES = ("auto", "on", "off")
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")
MAX_LENGTH = 10 * 1024 * 1024
"""Longest context length accepted (10m tokens), beyond every model's window: a larger value is a
typo (100000000 for 100000) that would build cases for minutes before every cell skips."""
MAX_SAMPLES = 10_000
"""Most cases per cell (RULER uses 500, HELMET 100); more only multiplies the run time."""
MAX_BATCH_SIZE = 4096
"""Most requests per backend call."""
BATCH_SIZE_ON_CPU = 8
BATCH_SIZE_ELSEWHERE = 32
"""--lceval-batch-size's default: 8 for a model computing on this CPU, where every row of a call
costs its share; 32 on a GPU or behind a server, where more rows a call are nearly free (the HF
backend splits a call into forward passes by memory, ``models/batch_memory.py``)."""
MAX_LOOKAHEAD = 1_000_000
LOOKAHEAD_BATCHES = 4
"""--lceval-lookahead auto: this many backend calls' worth of cases."""
_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")
_RUN_NAME = re.compile(r"[A-Za-z0-9_.+=@-]+")


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on; workers receive the same values as the controller."""

    model: ModelSpec
    """Backend spec, e.g. 'smollm2', 'hf:/path', 'mock:grep', 'openai:gpt-4o-mini'."""
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    samples: int
    seed: int
    data_dir: Path | None
    """Directory with the public data sets (pg_essays/, llicl/, ...); None = offline fixtures."""
    out_root: Path
    """Where run folders go: <out_root>/<run>/."""
    run_name: str | None
    store_path: Path
    chat_template: str
    """'auto' (use the model's template when it has one), 'on' or 'off'."""
    threshold: float
    """Default minimum cell score (0..1)."""
    task_thresholds: dict[str, float] = field(default_factory=dict)
    """Per-task minimum scores that override ``threshold``."""
    tasks: tuple[str, ...] = ()
    """Tasks to keep (empty = every task of each suite)."""
    dtype: str = "auto"
    device: str = "auto"
    model_args: dict[str, Any] = field(default_factory=dict)
    """Overrides of the model's config (--lceval-model-args, models/model_args.py), as given."""
    window: int | None = None
    """The context window cells are skipped by and effective length is set against
    (--lceval-window); None = the model's own."""
    rank: str = "top100"
    """How a local backend ranks options (--lceval-rank; ``models.topk_rank.RANK_CHOICES``)."""
    batch_size: int = BATCH_SIZE_ON_CPU
    lookahead: int = 32
    """Cases measured together with the running cell's, from the cells selected after it, so
    that the engine gets batches of many cells (0: each cell alone)."""
    lookahead_auto: bool = True
    """Whether ``lookahead`` was chosen for the model's place (--lceval-lookahead auto)."""
    threshold_explicit: bool = False
    """Whether the global ``threshold`` was given by the user (option or ini), not defaulted."""
    thresholds_replaced: tuple[str, ...] = ()
    """Thresholds given twice with different values: the last won (said in the header)."""
    prior_knowledge_threshold: float = DEFAULT_PRIOR_KNOWLEDGE_THRESHOLD
    """A QA case whose no-context answer scores at least this measures memory, not context use,
    and is excluded (100-LongBench's prior-knowledge filter)."""
    grid: GridProfile = GridProfile("full", "default")
    """The default grid the run got (reduced on a CPU-only machine for a local model)."""
    ref_tokenizer: Path | None = None
    """Tokenizer (folder, tokenizer.json or .gguf) that cell lengths are counted in, e.g.
    Llama-2's as HELMET did; None = the model's own (models/reference_tokenizer.py)."""
    fetched_data: Path | None = None
    """Public data downloaded by --lceval-fetch (fetch/), read after ``data_dir``."""
    judge: ModelSpec | None = None
    """Backend spec of the judge that scores judged tasks (judge/); None = they have no cells."""
    judge2: ModelSpec | None = None
    """A second judge that rates the same outputs, for agreement numbers."""
    log_samples: bool = False
    """Write every case (prompt as sent, output, gold, score, request key) to
    <run>/samples/ (results/sample_log.py)."""
    stop_newline: str = STOP_CHOICES[0]
    """'released' (answers never stop at a newline, as HELMET's released code) or 'config'
    (they stop there where HELMET's configs say ``stop_new_line: true``):
    tasks/stops.py."""

    def data_source(self) -> DataSource:
        """Where tasks read their files: one construction, so every reader sees both folders."""
        return DataSource(self.data_dir, fetched=self.fetched_data)

    def threshold_for(self, task: str) -> float:
        return self.task_thresholds.get(task, self.threshold)

    def thresholds_line(self) -> str:
        """The effective thresholds, as the header states them."""
        default = f"{self.threshold:g} " + ("(--lceval-threshold)" if self.threshold_explicit
                                            else "(default)")
        per_task = "".join(f", {task}={value:g}" for task, value in
                           sorted(self.task_thresholds.items()))
        replaced = f"; given twice, the last wins: {', '.join(self.thresholds_replaced)}" \
            if self.thresholds_replaced else ""
        return f"lceval: thresholds: {default} for every task{per_task}{replaced}"

    def threshold_is_explicit(self, task: str) -> bool:
        """Whether the user chose the task's threshold; a relative criterion (LongScore) may
        replace a defaulted threshold, never one the user asked for."""
        return task in self.task_thresholds or self.threshold_explicit


SETTINGS = pytest.StashKey[Settings]()
"""The resolved settings of the run (controller and every worker hold equal values)."""
FETCHED_DATA = pytest.StashKey[Path]()
"""The folder --lceval-fetch filled (fetch/fetch_plugin.py sets it before the settings resolve)."""


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval", "long-context evaluation (pytest-lceval)")
    group.addoption("--model", dest="lceval_model", default=None,
                    help="model under test: smollm2 (default), gemma3-270m, hf:PATH_OR_ID, "
                         "hf:FILE.gguf, mock:NAME, openai:NAME, vllm:PATH_OR_ID")
    group.addoption(MODEL_ARGS, dest="lceval_model_args", action="append", default=None,
                    metavar="KEY=VALUE,...",
                    help="override the model's config before it loads (hf:, vllm:, presets), "
                         "e.g. 'rope_theta=500000' or 'rope_scaling={\"rope_type\":\"linear\","
                         "\"factor\":2.0},max_position_embeddings=16384'; values are JSON, "
                         "else text; checked against the model's config class; part of the "
                         "model's fingerprint; repeatable")
    group.addoption("--lceval-window", dest="lceval_window", default=None, metavar="TOKENS",
                    help="the model's context window, instead of its config's (or a server's): "
                         "longer cells are skipped, and effective length is set against it "
                         "(binary k allowed: 16k)")
    group.addoption("--lceval-judge", dest="lceval_judge", default=None,
                    help="judge model for the judged tasks (long-document QA, summaries), any "
                         "--model spec: openai:gpt-4o (the papers' judge), hf:PATH, smollm2...; "
                         f"env {JUDGE_ENV}")
    group.addoption("--lceval-judge2", dest="lceval_judge2", default=None,
                    help="a second judge that rates the same outputs (kappa, score difference)")
    group.addoption("--lceval-grid", dest="lceval_grid", default=None, choices=GRID_CHOICES,
                    help="default grid: auto (reduced to fit a CPU when a local model has no "
                         "GPU, else full), reduced, or full (the papers' grid)")
    group.addoption("--lengths", dest="lceval_lengths", default=None,
                    help=f"context lengths in tokens, binary k (default {DEFAULT_LENGTHS})")
    group.addoption("--depths", dest="lceval_depths", default=None,
                    help=f"depths of the key information in percent (default {DEFAULT_DEPTHS})")
    group.addoption("--samples", dest="lceval_samples", default=None,
                    help=f"cases per cell (default {DEFAULT_SAMPLES})")
    group.addoption("--lceval-seed", dest="lceval_seed", default=None,
                    help=f"seed of every generated case (default {DEFAULT_SEED})")
    group.addoption("--lceval-data", dest="lceval_data", default=None,
                    help=f"data directory (pg_essays/, llicl/, ...); env {DATA_ENV}")
    group.addoption("--lceval-out", dest="lceval_out", default=None,
                    help="folder for run outputs (default reports/)")
    group.addoption("--lceval-run", dest="lceval_run", default=None,
                    help="name of this run's folder under --lceval-out (default: time and model)")
    group.addoption("--lceval-store", dest="lceval_store", default=None,
                    help="response store (SQLite) shared by runs (default .lceval/store.sqlite)")
    group.addoption("--chat-template", dest="lceval_chat_template", default=None,
                    choices=CHAT_TEMPLATE_CHOICES,
                    help="apply the model's chat template: auto (if it has one, except for "
                         "the categories the reference code runs without one, e.g. recall), "
                         "on, off")
    group.addoption("--lceval-stop-newline", dest="lceval_stop_newline", default=None,
                    choices=STOP_CHOICES,
                    help="released (default): answers run their whole budget, as the released "
                         "reference code runs them; config: RAG, re-rank and ICL answers stop "
                         "at their first newline, as the reference configs "
                         "(stop_new_line: true) intend but its arguments.py never reads")
    group.addoption("--lceval-threshold", dest="lceval_threshold", action="append", default=None,
                    help="minimum cell score 0..1, global (0.5) or per task (json_kv=0.3); "
                         "repeatable")
    group.addoption("--lceval-tasks", dest="lceval_tasks", default=None,
                    help="comma list of tasks to run (default: all of each suite)")
    group.addoption("--lceval-dtype", dest="lceval_dtype", default=None,
                    help="weights dtype for local backends: auto, float32, bfloat16, float16")
    group.addoption("--lceval-device", dest="lceval_device", default=None,
                    help="device for local backends: auto, cpu, cuda, cuda:N")
    group.addoption("--lceval-rank", dest="lceval_rank", default=None,
                    help="how a local backend (hf:) ranks a classification stream's options: "
                         "top100 (default, the reference code's rule: an option outside the "
                         "100 most likely next tokens is unscored, none in them is no "
                         "prediction) or full (every option from the whole vocabulary)")
    group.addoption("--lceval-context-size", dest="lceval_context_size", default=None,
                    choices=SIZES,
                    help="how much context the recall, long-QA and summarisation prompts hold: "
                         "reference (default: the reference code's size search or fixed document "
                         "cut) "
                         "or fill (the prompt and generation budget fill 99-100 %% of the cell "
                         "for every task)")
    group.addoption("--lceval-batch-size", dest="lceval_batch_size", default=None,
                    help=f"requests per backend call (default {BATCH_SIZE_ON_CPU} for a model "
                         f"on this CPU, {BATCH_SIZE_ELSEWHERE} on a GPU or a server)")
    group.addoption("--lceval-lookahead", dest="lceval_lookahead", default=None,
                    help="cases measured together, from the running cell and the selected cells "
                         "after it, so one backend call holds many cells' requests: a number, "
                         "0 for one cell at a time, or auto (the default: 4 x "
                         "--lceval-batch-size for a model on a GPU or a server, 0 for one on "
                         "this CPU)")
    group.addoption("--prior-knowledge-threshold", dest="lceval_prior_knowledge_threshold",
                    default=None,
                    help="exclude QA cases whose no-context answer scores at least this, 0..1 "
                         f"(default {DEFAULT_PRIOR_KNOWLEDGE_THRESHOLD})")
    group.addoption("--lceval-ref-tokenizer", dest="lceval_ref_tokenizer", default=None,
                    help="count cell lengths in this tokenizer (a folder, tokenizer.json or "
                         ".gguf, e.g. Llama-2's as the papers counted) instead of the model's "
                         "own; the model still gets the same text and cells that overflow its "
                         "window are skipped")
    group.addoption("--lceval-log-samples", dest="lceval_log_samples", action="store_true",
                    default=None,
                    help="write every case of every cell (the prompt as sent, after the chat "
                         "template; the whole output; gold; score; request key) to "
                         "<run>/samples/, one gzipped JSONL file per cell (off by default: "
                         "long prompts make it large)")
    for name, help_text, kind in _INI_KEYS:
        parser.addini(name, help_text, type=kind)  # type: ignore[arg-type]


_INI_KEYS = [
    ("lceval_model", "default --model", "string"),
    ("lceval_model_args", "default --lceval-model-args, one KEY=VALUE per line", "linelist"),
    ("lceval_window", "default --lceval-window", "string"),
    ("lceval_grid", "default --lceval-grid", "string"),
    ("lceval_lengths", "default --lengths", "string"),
    ("lceval_depths", "default --depths", "string"),
    ("lceval_samples", "default --samples", "string"),
    ("lceval_seed", "default --lceval-seed", "string"),
    ("lceval_data", "default --lceval-data", "string"),
    ("lceval_out", "default --lceval-out", "string"),
    ("lceval_chat_template", "default --chat-template", "string"),
    ("lceval_stop_newline", "default --lceval-stop-newline", "string"),
    ("lceval_threshold", "default thresholds, one per line: 0.5 or task=0.3", "linelist"),
    ("lceval_tasks", "default --lceval-tasks", "string"),
    ("lceval_batch_size", "default --lceval-batch-size", "string"),
    ("lceval_lookahead", "default --lceval-lookahead", "string"),
    ("lceval_prior_knowledge_threshold", "default --prior-knowledge-threshold", "string"),
    ("lceval_ref_tokenizer", "default --lceval-ref-tokenizer", "string"),
    ("lceval_judge", "default --lceval-judge", "string"),
    ("lceval_judge2", "default --lceval-judge2", "string"),
    ("lceval_log_samples", "default --lceval-log-samples", "bool"),
]


def flag(name: str) -> str:
    """The command-line flag of option dest ``name``: lceval_lengths -> --lengths."""
    short = name.removeprefix("lceval_")
    if short in _UNPREFIXED:
        return "--" + short.replace("_", "-")
    return "--" + name.replace("_", "-")


_UNPREFIXED = {"model", "lengths", "depths", "samples", "chat_template",
               "prior_knowledge_threshold"}


def lookup(config: pytest.Config, name: str, env: str | None = None) -> tuple[Any, str]:
    """The raw value of setting ``name`` and where it came from (for error messages)."""
    value = config.getoption(name)
    if value not in (None, []):
        return value, flag(name)
    if env and os.environ.get(env):
        return os.environ[env], f"${env}"
    ini_value: Any = None
    with contextlib.suppress(ValueError):  # options without an ini key
        ini_value = config.getini(name)
    if ini_value not in (None, "", []):
        return ini_value, f"ini key {name}"
    return None, "default"


def convert(value: Any, where: str, option: str, parse: Callable[[Any], T], fix: str) -> T:
    """Parse a raw value, turning any failure into a UsageError that says where and how to fix."""
    try:
        return parse(value)
    except (ValueError, TypeError) as exc:
        shown = ",".join(redact_url(part) for part in str(value).split(",")) \
            if option.endswith("base-url") else value  # a URL may carry user:password
        raise pytest.UsageError(
            f"pytest-lceval: bad value {shown!r} for {option} (from {where}): {exc}. {fix}"
        ) from None


def _lookahead(text: Any) -> int | None:
    """None for auto (resolved against the batch size), else a whole number of cases."""
    if str(text).strip().lower() == "auto":
        return None
    number = int(str(text))
    if not 0 <= number <= MAX_LOOKAHEAD:
        raise ValueError(f"must be between 0 and {MAX_LOOKAHEAD:,}")
    return number


def _positive_int(text: Any, most: int | None = None) -> int:
    number = int(str(text))
    if number <= 0:
        raise ValueError("must be a positive whole number")
    if most is not None and number > most:
        raise ValueError(f"must be at most {most:,}")
    return number


def _length(text: str) -> int:
    tokens = parse_length(text)
    if tokens > MAX_LENGTH:
        raise ValueError(f"{text.strip()} is {tokens:,} tokens, above the bound of "
                         f"{MAX_LENGTH:,} (10m)")
    return tokens


def _comma_list(text: str, item: Callable[[str], T]) -> tuple[T, ...]:
    items = [part for part in str(text).split(",") if part.strip()]
    if not items:
        raise ValueError("the list is empty")
    return tuple(item(part) for part in items)


def _unit_score(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("scores are fractions 0..1 (write 0.5, not 50)")
    return value


@dataclass(frozen=True)
class NamedFractions:
    """A repeatable option of `0.5` and `name=0.3` items, as the run applies it."""

    default: float | None
    per_name: dict[str, float]
    replaced: tuple[str, ...] = ()
    """Items given again with another value: the last one wins, and the header says so
    ("0.3 replaced by 0.6")."""


def named_fractions(values: list[str]) -> NamedFractions:
    """`0.5` and `name=0.3` items (comma lists, repeated options): the default and per name."""
    given: dict[str | None, float] = {}
    replaced: list[str] = []
    for raw in values:
        for part in str(raw).split(","):
            if not part.strip():
                continue
            name: str | None = None
            number = part
            if "=" in part:
                name, _, number = (piece.strip() for piece in part.partition("="))
                if not name:
                    raise ValueError(f"{part!r} names no task before '='")
            value = _unit_score(number)
            if name in given and given[name] != value:
                said = "" if name is None else f"{name}="
                replaced.append(f"{said}{given[name]:g} replaced by {said}{value:g}")
            given[name] = value
    default = given.pop(None, None)
    return NamedFractions(default, {name: value for name, value in given.items()
                                    if name is not None}, tuple(replaced))


def option_value(config: pytest.Config, name: str, parse: Callable[[Any], T], default: T,
                 fix: str, env: str | None = None) -> T:
    """Option ``name`` (command line, then ``env``, then ini) parsed, or ``default`` when unset;
    a bad value is one UsageError line naming its flag, where it came from and ``fix``."""
    value, where = lookup(config, name, env)
    if value is None:
        return default
    return convert(value, where, flag(name), parse, fix)


def bounded(kind: Callable[[str], Any], value: Any, low: float,
            high: float | None = None) -> Any:
    """``kind(value)`` within ``low``..``high`` (NaN refused)."""
    number = kind(str(value))
    if not number >= low:  # also refuses nan
        raise ValueError(f"must be at least {low:g}")
    if high is not None and number > high:
        raise ValueError(f"must be at most {high:g}")
    return number


def resolve(config: pytest.Config, rootdir: Path) -> Settings:
    """Resolve every setting once; called in pytest_configure on controller and workers."""

    def get(name: str, parse: Callable[[Any], T], default: T, fix: str,
            env: str | None = None) -> T:
        return option_value(config, name, parse, default, fix, env)

    model = get("lceval_model", _model_spec, ModelSpec("smollm2"), "See --help for model specs.")
    device = get("lceval_device", _device, "auto", "Use auto, cpu, cuda, cuda:N or mps.")
    grid = grid_profile(get("lceval_grid", _grid_choice, "auto", "Use auto, reduced or full."),
                        model, device)
    defaults: dict[str, Any] = {"lengths": DEFAULT_LENGTHS, "depths": DEFAULT_DEPTHS,
                                "samples": DEFAULT_SAMPLES}
    if grid.reduced:
        defaults.update(REDUCED_CORE)
    lengths = get("lceval_lengths", lambda v: _comma_list(v, _length),
                  _comma_list(defaults["lengths"], _length),
                  "Give a comma list such as --lengths 1k,2k,4k.")
    depths = get("lceval_depths", lambda v: _comma_list(v, parse_depth),
                 _comma_list(defaults["depths"], parse_depth),
                 "Give percentages 0..100 such as --depths 0,50,100.")
    raw_thresholds, where = lookup(config, "lceval_threshold")
    threshold_values = raw_thresholds if isinstance(raw_thresholds, list) else []
    thresholds = convert(
        threshold_values, where, "--lceval-threshold", named_fractions,
        "Write --lceval-threshold 0.5 or --lceval-threshold json_kv=0.3.")
    data = get("lceval_data", lambda v: _existing_dir(str(v)), None,
               "Point it at a folder holding pg_essays/, llicl/, ... or leave it unset to use "
               "the offline fixtures.", env=DATA_ENV)
    out_root = get("lceval_out", _user_path, rootdir / "reports", "Give a folder path.")
    store = get("lceval_store", _user_path, rootdir / ".lceval" / "store.sqlite",
                "Give a file path.")
    batch_size = get("lceval_batch_size", lambda v: _positive_int(v, MAX_BATCH_SIZE),
                     auto_batch_size(model, device), "Give e.g. --lceval-batch-size 4.")
    lookahead = get("lceval_lookahead", _lookahead, None,
                    "Give a number of cases such as --lceval-lookahead 256, 0 or auto.")
    no_args: dict[str, Any] = {}
    model_args = get("lceval_model_args", lambda v: parse_model_args(list(v)), no_args,
                     "Write KEY=VALUE items, e.g. --lceval-model-args rope_theta=500000.")
    _check_model_args(model, model_args)
    return Settings(
        model=model,
        lengths=tuple(sorted(set(lengths))),
        depths=tuple(sorted(set(depths))),
        samples=get("lceval_samples", lambda v: _positive_int(v, MAX_SAMPLES),
                    defaults["samples"], "Give e.g. --samples 20."),
        seed=get("lceval_seed", lambda v: int(str(v)), DEFAULT_SEED, "Give an integer seed."),
        data_dir=data,
        out_root=out_root if out_root.is_absolute() else rootdir / out_root,
        run_name=get("lceval_run", _run_name, None,
                     "Give a plain folder name such as --lceval-run nightly-1."),
        store_path=store if store.is_absolute() else rootdir / store,
        chat_template=get("lceval_chat_template", _chat_choice, "auto",
                          "Use auto, on or off."),
        stop_newline=get("lceval_stop_newline", _stop_choice, STOP_CHOICES[0],
                         "Use released or config."),
        threshold=DEFAULT_THRESHOLD if thresholds.default is None else thresholds.default,
        task_thresholds=thresholds.per_name,
        thresholds_replaced=thresholds.replaced,
        tasks=get("lceval_tasks", lambda v: tuple(dict.fromkeys(_comma_list(v, str.strip))), (),
                  "Give a comma list of task names."),
        dtype=get("lceval_dtype", _dtype_choice, "auto",
                  "Use auto, float32, bfloat16 or float16."),
        model_args=model_args,
        window=get("lceval_window", _length, None, "Give a number of tokens such as 16384 or 16k."),
        rank=get("lceval_rank", _rank_choice, "top100", "Use top100 or full."),
        device=device,
        batch_size=batch_size,
        lookahead=auto_lookahead(batch_size, model, device) if lookahead is None else lookahead,
        lookahead_auto=lookahead is None,
        threshold_explicit=thresholds.default is not None,
        prior_knowledge_threshold=get(
            "lceval_prior_knowledge_threshold", _unit_score, DEFAULT_PRIOR_KNOWLEDGE_THRESHOLD,
            "Give a fraction such as --prior-knowledge-threshold 0.5."),
        grid=grid,
        ref_tokenizer=get("lceval_ref_tokenizer", _existing_path, None,
                          "Give a tokenizer folder (e.g. a download of "
                          "meta-llama/Llama-2-7b-hf), a tokenizer.json or a .gguf file."),
        judge=get("lceval_judge", _spec_text, None, "Give a model spec such as openai:gpt-4o.",
                  env=JUDGE_ENV),
        judge2=get("lceval_judge2", _spec_text, None, "Give a model spec such as hf:PATH."),
        log_samples=get("lceval_log_samples", bool, False, "Write lceval_log_samples = true."),
        fetched_data=config.stash.get(FETCHED_DATA, None),
    )


def _check_model_args(model: ModelSpec, model_args: dict[str, Any]) -> None:
    """Config overrides need a model whose config this process reads (hf:, vllm:, a preset, or
    another plugin's spec, whose backend gets them): one line for a mock or a served model."""
    if not model_args or model.kind not in ("mock", "openai", "llamacpp"):
        return
    why = ("a served model's config is the server's: start it with the overrides (vLLM: "
           "--hf-overrides) and give --lceval-window for the window it serves"
           if model.served else "a mock model has no config")
    raise pytest.UsageError(f"pytest-lceval: {MODEL_ARGS} {args_text(model_args)} with "
                            f"--model={model}: {why}")


def window_line(settings: Settings) -> str | None:
    """The header's line on the model's variant and window, when the run chose either: where
    the window cells are skipped by (and effective length is set against) comes from."""
    if not settings.model_args and settings.window is None:
        return None
    variant = f"model args {args_text(settings.model_args)} ({MODEL_ARGS}); " \
        if settings.model_args else ""
    from_args = window_from(settings.model_args)
    if settings.window is not None:
        served = " (a served model's config cannot be read)" if settings.model.served else ""
        window = f"window {settings.window} tokens from --lceval-window{served}"
    elif from_args is not None:
        window = f"window {from_args} tokens from max_position_embeddings in {MODEL_ARGS}"
    else:
        window = "window from the model's own config"
    return f"lceval: {variant}{window}"


def grid_profile(requested: str, model: ModelSpec, device: str) -> GridProfile:
    """The run's default grid."""
    return choose(requested, _backend_kind(model), device, os.environ)


def _backend_kind(model: ModelSpec) -> str:
    """An unknown model spec is reported by the plugin, so it counts as a local model here."""
    return model.kind or "preset"


def auto_lookahead(batch_size: int, model: ModelSpec, device: str) -> int:
    """--lceval-lookahead auto: a few backend calls' worth of cases where more rows per call
    are nearly free (a GPU, a server); none for a model computing on this CPU, where every row
    of a batch costs its share and finished rows wait for the longest one (the embedded model's
    main job took 8 min 6 s measured together against 6 min 46 s one cell at a time)."""
    return 0 if _on_cpu(model, device) else batch_size * LOOKAHEAD_BATCHES


def auto_batch_size(model: ModelSpec, device: str) -> int:
    """--lceval-batch-size's default (see ``BATCH_SIZE_ELSEWHERE``)."""
    return BATCH_SIZE_ON_CPU if _on_cpu(model, device) else BATCH_SIZE_ELSEWHERE


def _on_cpu(model: ModelSpec, device: str) -> bool:
    return model_place(_backend_kind(model), device, os.environ).on_cpu


def _grid_choice(text: Any) -> str:
    if str(text) not in GRID_CHOICES:
        raise ValueError(f"choose one of {', '.join(GRID_CHOICES)}")
    return str(text)


def expand_user(text: Any) -> str:
    """A path option's text with ``~`` expanded as a shell would have (one written
    ``--lceval-out=~/x`` reaches pytest unexpanded): every path option reads through here. A
    hub id or ``tiktoken:NAME`` given to the same option is left as it is."""
    return os.path.expanduser(str(text))


def _user_path(text: Any) -> Path:
    return Path(expand_user(text))


def _existing_dir(text: str) -> Path:
    path = _user_path(text)
    if not path.is_dir():
        raise ValueError(f"{path} is not a directory")
    return path.resolve()


def _existing_path(text: Any) -> Path:
    path = _user_path(text)
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    return path.resolve()


def _model_spec(text: Any) -> ModelSpec:
    return ModelSpec(str(text))


def _spec_text(text: Any) -> ModelSpec:
    spec = str(text).strip()
    if not spec:
        raise ValueError("empty")
    return ModelSpec(spec)


def _chat_choice(text: str) -> str:
    if text not in CHAT_TEMPLATE_CHOICES:
        raise ValueError(f"choose one of {', '.join(CHAT_TEMPLATE_CHOICES)}")
    return text


def _stop_choice(text: str) -> str:
    if text not in STOP_CHOICES:
        raise ValueError(f"choose one of {', '.join(STOP_CHOICES)}")
    return text


def _rank_choice(text: str) -> str:
    if text not in RANK_CHOICES:
        raise ValueError(f"choose one of {', '.join(RANK_CHOICES)}")
    return text


def _dtype_choice(text: str) -> str:
    if text not in DTYPE_CHOICES:
        raise ValueError(f"choose one of {', '.join(DTYPE_CHOICES)}")
    return text


def _device(text: str) -> str:
    if not _DEVICE.fullmatch(str(text)):
        raise ValueError("not a device name")
    return str(text)


def _run_name(text: str) -> str:
    """A run folder's name: one path component, so runs stay side by side under --lceval-out
    (where ``latest`` points at the newest)."""
    name = str(text)
    if name in (".", "..", "latest") or not _RUN_NAME.fullmatch(name):
        raise ValueError("a run name is one folder name of letters, digits and _.+=@- "
                         "(not 'latest')")
    return name


# -- the serving backends' options (openai:, vllm:), resolved as the settings are -----------

SERVING = pytest.StashKey[ServingOptions]()
BASE_URL_ENV = "OPENAI_BASE_URL"
MAX_CONCURRENCY = 1024
"""Most requests in flight: each is a thread, and no server queues more usefully."""
MAX_TIMEOUT = 86_400.0
"""Longest wait for one request (a day): more is a typo that would hang a stuck run."""
MAX_RETRIES = 100
"""Most retries: with backoff, 100 already wait over ten minutes per request."""


def resolve_serving(config: pytest.Config) -> ServingOptions:
    """The serving options, validated (CLI > env > ini), each bad value a UsageError."""

    def get(name: str, parse: Any, default: Any, fix: str, env: str | None = None) -> Any:
        return option_value(config, name, parse, default, fix, env)

    return ServingOptions(
        base_url=get("lceval_base_url", parse_urls, None,
                     "Give an http(s) URL ending in /v1, or several, comma-separated.",
                     env=BASE_URL_ENV),
        api_mode=get("lceval_api_mode", _one_of(API_MODES), None, "Use chat or completions."),
        concurrency=get("lceval_concurrency", lambda v: bounded(int, v, 1, MAX_CONCURRENCY),
                        DEFAULT_CONCURRENCY, "Give a whole number >= 1."),
        timeout=get("lceval_timeout", lambda v: bounded(float, v, 0.001, MAX_TIMEOUT),
                    DEFAULT_TIMEOUT, "Give seconds > 0."),
        retries=get("lceval_retries", lambda v: bounded(int, v, 0, MAX_RETRIES),
                    DEFAULT_RETRIES, "Give a whole number >= 0."),
        tokenizer=get("lceval_tokenizer", expand_user, None,
                      "Give a folder, an HF id or tiktoken:NAME."),
        tensor_parallel=get("lceval_tensor_parallel", lambda v: bounded(int, v, 1), 1,
                            "Give a whole number >= 1."),
        pipeline_parallel=get("lceval_pipeline_parallel", lambda v: bounded(int, v, 1), 1,
                              "Give a whole number >= 1."),
        executor=get("lceval_vllm_executor", _one_of(VLLM_EXECUTORS), None,
                     f"Use {' or '.join(VLLM_EXECUTORS)}."),
        compile=get("lceval_vllm_compile", _one_of(("on", "off")), "on", "Use on or off.")
        == "on",
        gpu_memory=get("lceval_gpu_memory", _fraction, None, "Give a fraction such as 0.5."),
    )


def serving_options(config: pytest.Config) -> ServingOptions:
    """What the model fixture passes to the backend factory."""
    return config.stash.get(SERVING, None) or resolve_serving(config)


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"choose one of {', '.join(choices)}")
        return str(value)
    return parse


def _fraction(value: Any) -> float:
    number = float(str(value))
    if not 0.0 < number <= 1.0:
        raise ValueError("must lie in (0, 1]")
    return number
