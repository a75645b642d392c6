"""What a backend factory is given, and the errors a load reports: a leaf module, so that the
registry, the factories and the start-up checks import it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    model_args: dict[str, Any] = field(default_factory=dict)
    """Overrides of the model's config (``--lceval-model-args``, models/model_args.py): the
    backends that read a config (hf, vllm, presets) apply them and fingerprint what changed."""
    window: int | None = None
    """The context window to use instead of the model's own (``--lceval-window``): what cells
    are skipped by and what effective length is set against. None = the model's."""
    rank: str = "top100"
    """How a local backend ranks (``topk_rank.RANK_CHOICES``): the reference's top 100, or
    ``full`` (every option from the whole vocabulary)."""


class UnknownModelError(ValueError):
    """The spec names no backend or preset."""


class MissingDependencyError(ImportError):
    """The backend's library is not installed; the message names the extra."""


class ModelUnavailable(RuntimeError):
    """The model did not load (whatever the loader raised); the message says why. Every later
    cell would fail the same way, so the run stops at the first."""


class RequestFailed(RuntimeError):
    """A request the model could not answer (a server that failed, ran past its deadline or sent
    no answer); the message says why and what to do. It fails its cell with that one line, and
    later cells are still asked."""
