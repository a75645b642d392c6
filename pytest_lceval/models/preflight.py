"""Cheap checks of a ``--model`` spec before anything loads: the folder or file exists and holds a
model, the device asked for exists, the server answers.

A model that cannot load would otherwise fail on every xdist worker, after collection, with the
loader's own words (a hub repo-id rule for a missing folder, "install sentencepiece" for an empty
one). These checks run once on the controller at session start and name the real cause. They
import torch only when a CUDA or MPS device is asked for, and openai only for a served model;
what cannot be checked cheaply (a hub id, offline) is left to the load, and so is a spec that
another plugin's ``pytest_lceval_make_backend`` answers.

Each backend kind declares its check and its window hint where it is declared
(``models/registry.py``'s ``BACKENDS``), so a new kind states whether it has a start-up check;
this module holds the checks, the registry calls the one a spec's kind declares.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .chat_probe import TemplateRefuses, check_folder_template
from .gguf_header import GGUFTruncated, check_gguf_size, gguf_rope_scaled, gguf_window
from .hf_text import config_rope_scaled, config_window
from .model_args import override_config, scales_rope, window_from
from .options import LoadOptions

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.safetensors.index.json",
                   "*.bin.index.json")
"""Files that hold (or index) a Hugging Face model's weights."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json",
                   "vocab.txt", "spiece.model")
"""Files of which a model folder needs at least one for its tokenizer to load."""
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
"""'org/name' or 'name': what the hub accepts; anything else can only be a path."""


class PreflightError(ValueError):
    """The model cannot load; the message says why and what to do."""


def check_preset(kind: str, target: str, options: LoadOptions) -> None:
    """A preset: its package is installed, the device exists, the overrides fit its config."""
    from .presets import check_installed

    check_installed(target)
    check_device(options.device)
    check_overrides("preset", target, options)


def check_hf(kind: str, target: str, options: LoadOptions) -> None:
    """A transformers model: its folder or file, the device, the overrides, the template."""
    check_source(target, "hf")
    check_device(options.device)
    check_overrides("hf", target, options)
    _check_template(target, options)


def check_vllm(kind: str, target: str, options: LoadOptions) -> None:
    """A vLLM model: its folder or file, the overrides, the template (vLLM picks the device)."""
    check_source(target, "vllm")
    check_overrides("vllm", target, options)
    _check_template(target, options)


def check_mock(kind: str, target: str, options: LoadOptions) -> None:
    """A mock: building it is pure and instant, and validates its name and parameters."""
    from .mock import load_mock

    load_mock(target, options)


def _check_template(rest: str, options: LoadOptions) -> None:
    """A local folder's chat template renders a probe message (unless the template is off)."""
    if options.chat_template != "off" and Path(rest).expanduser().is_dir():
        try:
            check_folder_template(Path(rest).expanduser())
        except TemplateRefuses as exc:
            raise PreflightError(str(exc)) from None


def check_source(rest: str, kind: str) -> None:
    """A local folder must hold a model, a .gguf file must exist; a hub id passes."""
    if not rest:
        raise PreflightError(f"give a model folder, a .gguf file or a hub id after '{kind}:'")
    path = Path(rest).expanduser()
    if rest.endswith(".gguf"):
        if not path.is_file():
            raise PreflightError(f"no GGUF file {path}: check the path")
        try:
            check_gguf_size(path)
        except GGUFTruncated as exc:
            raise PreflightError(str(exc)) from None
        return
    if path.is_dir():
        _check_folder(path)
    elif path.exists():
        raise PreflightError(f"{path} is a file, not a model folder: give the folder that holds "
                             f"config.json and the weights, or a .gguf file")
    elif not _HUB_ID.fullmatch(rest):
        raise PreflightError(f"no model folder {path}: check the path (or give a hub id such as "
                             f"HuggingFaceTB/SmolLM2-135M-Instruct)")


def _check_folder(path: Path) -> None:
    entries = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
    if not entries:
        raise PreflightError(f"model folder {path} is empty: download or convert the model "
                             f"into it (config.json and *.safetensors)")
    config = path / "config.json"
    if not config.is_file():
        ggufs = sorted(path.glob("*.gguf"))
        if ggufs:
            raise PreflightError(f"{path} holds GGUF files, not a Hugging Face folder: give "
                                 f"the file, e.g. --model=hf:{ggufs[0]}")
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise PreflightError(f"{path} is not a model folder: it has no config.json (it has "
                             f"{shown})")
    try:
        json.loads(config.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PreflightError(f"{config} is not valid JSON ({exc}): re-download it") from None
    if not any(next(path.glob(pattern), None) for pattern in WEIGHT_PATTERNS):
        raise PreflightError(f"{path} has config.json but no weights (*.safetensors or *.bin): "
                             f"download them into it")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise PreflightError(f"{path} has no tokenizer ({', '.join(TOKENIZER_FILES[:2])}, ...): "
                             f"copy the model's tokenizer files into it")


def check_overrides(kind: str, rest: str, options: LoadOptions) -> None:
    """``--lceval-model-args`` against the config class of a local model (a preset, a folder, a
    .gguf file): an unknown key or a value the class refuses is ModelArgsError, one line. A hub
    id's config is read, and the overrides checked, when it loads."""
    if not options.model_args:
        return
    from transformers import AutoConfig

    if kind == "preset":
        from .presets import preset_directory

        source, gguf = str(preset_directory(rest, options)), None
    else:
        path = Path(rest).expanduser()
        if not path.exists():
            return
        source, gguf = (str(path.parent), path.name) if rest.endswith(".gguf") else \
            (str(path), None)
    override_config(AutoConfig.from_pretrained(source, gguf_file=gguf), options.model_args)


def check_device(device: str) -> None:
    """A CUDA or MPS device must exist in this torch; 'auto' and 'cpu' always do."""
    if not device.startswith(("cuda", "mps")):
        return
    import torch

    if device == "mps":
        if not torch.backends.mps.is_available():
            raise PreflightError("--lceval-device mps: this machine's torch has no MPS backend: "
                                 "use --lceval-device cpu or auto")
        return
    if not torch.cuda.is_available():
        raise PreflightError(f"--lceval-device {device}: torch {torch.__version__} sees no CUDA "
                             f"GPU (a CPU build, or no GPU visible): use --lceval-device cpu or "
                             f"auto, or install a CUDA build of torch")
    _, _, index = device.partition(":")
    count = torch.cuda.device_count()
    if index and int(index) >= count:
        raise PreflightError(f"--lceval-device {device}: only {count} CUDA GPU(s) visible "
                             f"(cuda:0..cuda:{count - 1})")


def check_served(kind: str, target: str, options: LoadOptions) -> None:
    """A served model: a model name, a tokenizer folder that exists, a server that answers."""
    if not target:
        raise PreflightError(f"give the served model's name: --model={kind}:NAME")
    tokenizer = options.serving.tokenizer
    if tokenizer and not tokenizer.startswith("tiktoken:") and not Path(tokenizer).expanduser() \
            .exists() and not _HUB_ID.fullmatch(tokenizer):
        raise PreflightError(f"--lceval-tokenizer {tokenizer}: no such folder; give the served "
                             f"model's tokenizer folder, an HF id or tiktoken:NAME")
    from .openai_setup import health_check

    health_check(options.serving)


def window_of_mock(kind: str, target: str, options: LoadOptions) -> int | None:
    """A mock's window, from its parameters."""
    from .mock import load_mock

    return load_mock(target, options).context_window


def window_of_preset(kind: str, target: str, options: LoadOptions) -> int | None:
    """A preset's window: the overrides' or its GGUF header's."""
    from .presets import preset_parts

    given = window_from(options.model_args)
    return given if given is not None else gguf_window(preset_parts(target)[0])


def scaled_preset(kind: str, target: str, options: LoadOptions) -> bool:
    """Whether a preset's RoPE is scaled: by the overrides, or in its GGUF header."""
    from .presets import preset_parts

    return scales_rope(options.model_args) or gguf_rope_scaled(preset_parts(target)[0])


def scaled_local(kind: str, target: str, options: LoadOptions) -> bool:
    """Whether a model folder's or .gguf file's RoPE is scaled: by the overrides, its
    config.json or its header."""
    path = Path(target).expanduser()
    return scales_rope(options.model_args) or (
        gguf_rope_scaled(path) if target.endswith(".gguf") else config_rope_scaled(str(path)))


def window_of_local(kind: str, target: str, options: LoadOptions) -> int | None:
    """A model folder's or .gguf file's window: the overrides', its config.json's or header's."""
    given, path = window_from(options.model_args), Path(target).expanduser()
    if given is not None:
        return given
    return gguf_window(path) if target.endswith(".gguf") else config_window(str(path))
