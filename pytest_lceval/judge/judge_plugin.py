"""Feature plugin of the judge: its serving knobs, the start-up check of the judges' specs, the
header line, and the panel each process judges with (loaded at the first judged cell, so a run
that judges nothing, or whose verdicts are all stored, never loads a judge)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..foundation.data import DataError
from ..foundation.grid import Cell
from ..models.base import Backend
from ..models.options import LoadOptions, MissingDependencyError, UnknownModelError
from ..models.registry import check_model, check_spec, make_backend
from ..models.serving import DEFAULT_CONCURRENCY, ServingOptions, parse_urls, redact_url
from ..run.lookahead import selected_cells
from ..run.model_usage import RUN_STARTED
from ..run.suite import Suite, suites_of
from ..settings import SETTINGS, Settings, bounded, expand_user, flag, option_value, serving_options
from ..store.database import Store
from ..tasks.judged import JudgedTask
from .panel import DEFAULT_MAX_NEW_TOKENS, Judge, JudgePanel, JudgeSpec

JUDGES = pytest.StashKey[tuple[JudgeSpec, ...]]()
PROMPT_TEXTS = pytest.StashKey[dict[str, str]]()
"""The prompt texts the plugins offer (``pytest_lceval_judge_texts``; empty when none does): the
session's judge panel asks its rubrics in them."""
DEFAULT_JUDGE_CONCURRENCY = 2 * DEFAULT_CONCURRENCY
DEFAULT_JUDGE_BATCH = 16
_KNOBS = ("lceval_judge_base_url", "lceval_judge2_base_url", "lceval_judge_tokenizer",
          "lceval_judge_concurrency", "lceval_judge_batch_size", "lceval_judge_max_tokens")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-judge-base-url", dest="lceval_judge_base_url", default=None,
                    help="OpenAI-compatible endpoint of an openai: judge (default "
                         "$OPENAI_BASE_URL, else OpenAI)")
    group.addoption("--lceval-judge2-base-url", dest="lceval_judge2_base_url", default=None,
                    help="endpoint of an openai: second judge")
    group.addoption("--lceval-judge-tokenizer", dest="lceval_judge_tokenizer", default=None,
                    help="openai: judges: HF tokenizer (folder or id) or tiktoken:NAME that "
                         "counts the judge's tokens, as --lceval-tokenizer does for the model")
    group.addoption("--lceval-judge-prefill", dest="lceval_judge_prefill", action="store_true",
                    default=False,
                    help="begin each judge reply with its JSON's first field (a small local "
                         "judge then gives scores, without the reasoning the prompts ask for "
                         "first)")
    group.addoption("--lceval-judge-concurrency", dest="lceval_judge_concurrency", default=None,
                    help=f"judge requests in flight per server judge (default "
                         f"{DEFAULT_JUDGE_CONCURRENCY})")
    group.addoption("--lceval-judge-batch-size", dest="lceval_judge_batch_size", default=None,
                    help=f"judge requests per backend call (default {DEFAULT_JUDGE_BATCH})")
    group.addoption("--lceval-judge-max-tokens", dest="lceval_judge_max_tokens", default=None,
                    help=f"most tokens a judge writes per reply (default "
                         f"{DEFAULT_MAX_NEW_TOKENS})")
    for name in _KNOBS:
        parser.addini(name, f"default {flag(name)}")


def _at_least_one(value: Any) -> int:
    return int(bounded(int, value, 1))


def resolve_judges(config: pytest.Config, settings: Settings) -> tuple[JudgeSpec, ...]:
    """The judges the settings name, with their knobs; each bad value one UsageError line."""

    def get(name: str, parse: Any, default: Any, fix: str) -> Any:
        return option_value(config, name, parse, default, fix)

    knobs = {
        "concurrency": get("lceval_judge_concurrency", _at_least_one, DEFAULT_JUDGE_CONCURRENCY,
                           "Give a whole number >= 1."),
        "batch_size": get("lceval_judge_batch_size", _at_least_one, DEFAULT_JUDGE_BATCH,
                          "Give a whole number >= 1."),
        "max_new_tokens": get("lceval_judge_max_tokens", _at_least_one, DEFAULT_MAX_NEW_TOKENS,
                              "Give a whole number of tokens such as 1024."),
        "tokenizer": get("lceval_judge_tokenizer", expand_user, None,
                         "Give a folder, an HF id or tiktoken:NAME."),
        "prefill": bool(config.getoption("lceval_judge_prefill")),
    }
    specs = []
    for option, spec, url_option in (("--lceval-judge", settings.judge, "lceval_judge_base_url"),
                                     ("--lceval-judge2", settings.judge2,
                                      "lceval_judge2_base_url")):
        url = get(url_option, parse_urls, None, "Give an http(s) URL ending in /v1, or "
                  "several, comma-separated.")
        if spec is None:
            if url is not None:
                raise pytest.UsageError(f"pytest-lceval: {flag(url_option)} is set but "
                                        f"{option} is not; name the judge with {option}=SPEC")
            continue
        try:
            check_spec(config.pluginmanager, spec)
        except UnknownModelError as exc:
            raise pytest.UsageError(f"pytest-lceval: {option}: {exc}") from None
        specs.append(JudgeSpec(spec, option, url, **knobs))
    if settings.judge is None and settings.judge2 is not None:
        raise pytest.UsageError("pytest-lceval: --lceval-judge2 needs --lceval-judge (the "
                                "second judge is compared with the first)")
    if len(specs) == 2 and (specs[0].spec, specs[0].base_url) == (specs[1].spec,
                                                                  specs[1].base_url):
        where = f" at {specs[0].base_url}" if specs[0].base_url else ""
        raise pytest.UsageError(
            f"pytest-lceval: --lceval-judge2={specs[1].spec} is the same judge as "
            f"--lceval-judge{where}: it agrees with itself by construction (kappa 1.000), which "
            f"says nothing of agreement; name a different second judge, or leave "
            f"--lceval-judge2 out")
    return tuple(specs)


@pytest.hookimpl
def pytest_lceval_configure(config: pytest.Config, settings: Settings) -> None:
    config.stash[JUDGES] = resolve_judges(config, settings)
    config.stash[PROMPT_TEXTS] = {
        name: text for offered in config.hook.pytest_lceval_judge_texts(config=config)
        for name, text in (offered or {}).items()}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist the controller collects nothing, and it checks the judges before starting
    the workers (tryfirst) when any suite's grid has cells of a judged task."""
    config = session.config
    if _checks_judges(config) and _distributed(config) and any(
            _judged(config, cell) for suite in suites_of(config).values()
            for cell in _grid(suite, config.stash[SETTINGS])):
        _check_judges(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """In one process, the judges are checked once the selected cells are known, when one of
    them is a judged task's, before the plan line and the first cell: a run that judges nothing
    does not need a judge that works."""
    config = session.config
    if _checks_judges(config) and not _distributed(config) and any(
            _judged(config, cell) for _, cell in selected_cells(session)):
        _check_judges(config)


def _checks_judges(config: pytest.Config) -> bool:
    return not (hasattr(config, "workerinput") or config.option.collectonly
                or not config.stash.get(JUDGES, ()))


def _distributed(config: pytest.Config) -> bool:
    return getattr(config.option, "dist", "no") != "no"


def _grid(suite: Suite, settings: Settings) -> list[Cell]:
    """The suite's cells; none when its data is broken (collection reports that)."""
    try:
        return suite.grid(settings)
    except (DataError, pytest.UsageError):
        return []


def _judged(config: pytest.Config, cell: Cell) -> bool:
    try:
        return isinstance(suites_of(config)[cell.suite].task(cell.task), JudgedTask)
    except KeyError:  # a suite whose tasks are not objects (a stream suite's)
        return False


def _check_judges(config: pytest.Config) -> None:
    """A judge that cannot load (no such folder, no model name, no key, a server that does not
    answer) is one usage error naming the judge's options, as the model under test is at
    start-up (run/startup.py)."""
    for judge in config.stash[JUDGES]:
        try:
            check_model(judge.spec, _load_options(config, judge))
        except (ValueError, MissingDependencyError) as exc:
            raise pytest.UsageError(
                f"pytest-lceval: {judge.option}={judge.spec}: {exc}") from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    judges = config.stash.get(JUDGES, ())
    if not judges:
        return []
    first = judges[0]
    where = [f"{j.option}={j.spec}" + (f" at {redact_url(j.base_url)}" if j.base_url else "")
             for j in judges]
    begun = "; replies begun with their JSON (--lceval-judge-prefill)" if first.prefill else ""
    lines = [f"lceval: judge {', '.join(where)} (max {first.max_new_tokens} tokens a reply"
             f"{begun}, batch {first.batch_size}, concurrency {first.concurrency}; verdicts "
             f"stored under the judge's fingerprint)"]
    model = config.stash[SETTINGS].model
    for judge in judges:
        if judge.spec == model:
            shared = "it shares the model's backend, so the weights load once" \
                if _shares_model(config, judge) else \
                "loaded apart, as its options differ from the model's"
            lines.append(f"lceval: {judge.option}={judge.spec} is the model under test: it "
                         f"judges its own answers ({shared})")
    return lines


def judge_panel(config: pytest.Config, store: Store, model: Backend) -> JudgePanel | None:
    """The process's judges over ``store``; None when the run names none. A judge that is the
    model under test, with the same options, is ``model`` itself (see ``_shares_model``)."""
    judges = [Judge(spec, _loader(config, model), store, config.stash.get(RUN_STARTED, None))
              for spec in config.stash.get(JUDGES, ())]
    return JudgePanel(judges[0], judges[1] if len(judges) > 1 else None,
                      config.stash.get(PROMPT_TEXTS, {})) if judges else None


def _load_options(config: pytest.Config, spec: JudgeSpec) -> LoadOptions:
    """A served judge waits and retries as the model under test does (--lceval-timeout,
    --lceval-retries): each of its requests has the same wall-clock deadline."""
    settings, model = config.stash[SETTINGS], serving_options(config)
    return LoadOptions("auto", settings.dtype, settings.device, serving=ServingOptions(
        base_url=spec.base_url, concurrency=spec.concurrency, tokenizer=spec.tokenizer,
        timeout=model.timeout, retries=model.retries, url_option=f"{spec.option}-base-url"))


def _shares_model(config: pytest.Config, spec: JudgeSpec) -> bool:
    """Whether the judge can be the model's own backend: the same spec, loaded with the same
    options (the judge renders with the template as ``auto`` does; a served one must be asked
    at the same endpoint with the same tokenizer), so loading it again would give the same
    backend and a second copy of the weights."""
    settings, serving = config.stash[SETTINGS], serving_options(config)
    if spec.spec != settings.model or settings.chat_template != "auto":
        return False
    return not spec.spec.served or (
        spec.base_url == serving.base_url and spec.tokenizer == serving.tokenizer)


def _loader(config: pytest.Config, model: Backend) -> Callable[[JudgeSpec], Backend]:
    def load(spec: JudgeSpec) -> Backend:
        if _shares_model(config, spec):
            return model
        return make_backend(config, spec.spec, _load_options(config, spec), spec.option)

    return load
