"""What a GGUF file's header says without loading it: how long the file must be, the model's
context window, and how large a vocabulary its tokenizer has (if it carries one).

A download cut short still has a sound header, and the loader then fails deep in the weights with
numpy's words ("cannot reshape array of size 399424 into shape (576,960)"). The header alone says
how long the file must be: where the tensor data starts (after the key-value pairs and the tensor
table, aligned) and where each tensor ends (its offset plus its element count in its type's
block size). Reading it skips every value: SmolLM2's header (49,152 vocabulary strings) takes
0.5 s. The layout is GGUF versions 2 and 3, little-endian (what llama.cpp writes); the
quantisation block sizes come from the ``gguf`` package.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAGIC = b"GGUF"
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
          12: "d"}
"""GGUF value types of a fixed size, as struct formats (8 is a string, 9 an array)."""
_STRING, _ARRAY = 8, 9
_UINTS = (4, 10)
_DEFAULT_ALIGNMENT = 32


class GGUFTruncated(ValueError):
    """The file is shorter than its header promises; the message gives both sizes."""


@dataclass
class _Header:
    architecture: str = ""
    context_length: int | None = None
    alignment: int = _DEFAULT_ALIGNMENT
    promised: int | None = None
    """Bytes the file must have (None until the tensor table is read)."""
    vocabulary: int | None = None
    """Entries of ``tokenizer.ggml.tokens``: None for a GGUF without a tokenizer."""
    rope_scaling: str = ""
    """``<architecture>.rope.scaling.type`` ('linear', 'yarn'...); '' when not recorded."""


def check_gguf_size(path: Path) -> None:
    """Raise GGUFTruncated when ``path`` is shorter than its header promises. A file that is no
    GGUF at all, of another version, or with values this reader does not know is left to the
    loader to name (as is a missing ``gguf`` package)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        try:
            header = _read(handle, tensors=True)
        except (ImportError, ValueError):
            return
        except EOFError:
            raise GGUFTruncated(f"{path} looks truncated: its {size:,} bytes end inside its "
                                f"header; download it again") from None
    if header is not None and header.promised is not None and size < header.promised:
        raise GGUFTruncated(f"{path} looks truncated: it has {size:,} bytes but its header "
                            f"promises {header.promised:,}; download it again")


def gguf_window(path: Path) -> int | None:
    """The ``<architecture>.context_length`` the header records; None when it has none or the
    file cannot be read as GGUF (``path`` may be the first part of a GGUF split in parts)."""
    header = _header(path)
    return header.context_length if header is not None else None


def gguf_vocabulary(path: Path) -> int | None:
    """How many tokens the tokenizer the header carries has; None when it carries none (or the
    file cannot be read as GGUF)."""
    header = _header(path)
    return header.vocabulary if header is not None else None


def gguf_rope_scaled(path: Path) -> bool:
    """Whether the header records a RoPE scaling (``<architecture>.rope.scaling.type`` other
    than none); False when it records none or the file cannot be read as GGUF."""
    header = _header(path)
    return header is not None and header.rope_scaling not in ("", "none")


def _header(path: Path) -> _Header | None:
    try:
        with path.open("rb") as handle:
            return _read(handle, tensors=False)
    except (OSError, ValueError, EOFError):
        return None


def _read(handle: BinaryIO, tensors: bool) -> _Header | None:
    """The header's facts; the tensor table (for ``promised``) only when ``tensors``."""
    if handle.read(4) != MAGIC:
        return None
    version, count, pairs = _unpack(handle, "<IQQ")
    if version not in (2, 3):
        return None
    header = _Header()
    for _ in range(pairs):
        key = _string(handle)
        (kind,) = _unpack(handle, "<I")
        if key == "general.architecture" and kind == _STRING:
            header.architecture = _string(handle)
        elif key == "general.alignment" and kind in _UINTS:
            (header.alignment,) = _unpack(handle, "<" + _FIXED[kind])
        elif key == f"{header.architecture}.context_length" and kind in _UINTS:
            (header.context_length,) = _unpack(handle, "<" + _FIXED[kind])
        elif key == f"{header.architecture}.rope.scaling.type" and kind == _STRING:
            header.rope_scaling = _string(handle)
        elif key == "tokenizer.ggml.tokens" and kind == _ARRAY:
            item, header.vocabulary = _unpack(handle, "<IQ")
            for _ in range(header.vocabulary):
                _skip_value(handle, item)
        else:
            _skip_value(handle, kind)
    if tensors:
        ends = [0]
        for _ in range(count):
            _string(handle)
            (dims,) = _unpack(handle, "<I")
            shape = _unpack(handle, f"<{dims}Q")
            kind, offset = _unpack(handle, "<IQ")
            ends.append(offset + _tensor_bytes(kind, math.prod(shape)))
        data_start = -(-handle.tell() // header.alignment) * header.alignment
        header.promised = data_start + max(ends)
    return header


def _tensor_bytes(kind: int, elements: int) -> int:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    return elements // block * size


def _unpack(handle: BinaryIO, layout: str) -> tuple[int, ...]:
    """Raises EOFError where the file ends (struct's own errors are ValueErrors)."""
    size = struct.calcsize(layout)
    data = handle.read(size)
    if len(data) < size:
        raise EOFError
    return struct.unpack(layout, data)


def _string(handle: BinaryIO) -> str:
    (length,) = _unpack(handle, "<Q")
    data = handle.read(length)
    if len(data) < length:
        raise EOFError
    return data.decode("utf-8", "replace")


def _skip_value(handle: BinaryIO, kind: int) -> None:
    if kind in _FIXED:
        handle.seek(struct.calcsize("<" + _FIXED[kind]), 1)
    elif kind == _STRING:
        (length,) = _unpack(handle, "<Q")
        handle.seek(length, 1)
    elif kind == _ARRAY:
        item, count = _unpack(handle, "<IQ")
        if item in _FIXED:
            handle.seek(count * struct.calcsize("<" + _FIXED[item]), 1)
        else:
            for _ in range(count):
                _skip_value(handle, item)
    else:
        raise ValueError(f"unknown GGUF value type {kind}")
