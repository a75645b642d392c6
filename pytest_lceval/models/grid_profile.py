"""Which default grid a run gets: the papers' full grid, or a reduced one that fits a CPU.

The papers' grids (six depths, ten samples, Task Haystack's 5 x 5 at test size 100) take hours
on a laptop CPU, so a newcomer's first ``pytest suites/`` would show nothing for an afternoon.
A run of a local model (a preset or ``hf:``) on a machine with no visible GPU therefore gets a
reduced grid; with a GPU, or a served model (the server does the work), the full grid is the
default. Only *defaults* change: every option the user gives still wins, the report header says
that the grid is reduced and names the one option that runs the full grid, and every result
records the profile it ran under.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from . import devices

GRID_CHOICES = ("auto", "reduced", "full")
FULL_GRID_FLAG = "--lceval-grid=full"
LOCAL_BACKENDS = ("preset", "hf")
"""Backend kinds that compute on this machine's CPU unless a GPU is there."""
OTHER_PLACES = {"mock": "a mock model, which computes nothing",
                "vllm": "a vLLM engine, which runs on GPUs"}
"""Where the other backends compute, as the header says it; a kind not named runs on a
server (openai:, llamacpp:, another plugin's)."""


@dataclass(frozen=True)
class GridProfile:
    """The default grid of this run and why it was chosen."""

    name: str
    """'full' (the papers' grid) or 'reduced' (fits a CPU in minutes)."""
    reason: str

    @property
    def reduced(self) -> bool:
        return self.name == "reduced"


REDUCED_CORE = {"lengths": "1k,2k", "depths": "50", "samples": 2}
"""Reduced recall/100-LongBench axes: two lengths (a trend), the middle depth, two cases per
cell, so that every task runs and the main job of the embedded model ends within ten minutes on
two CPU cores (measured: README)."""


def choose(requested: str, backend_kind: str, device: str, environ: Mapping[str, str],
           probe: Callable[[], tuple[str, ...]] = devices.visible_gpus) -> GridProfile:
    """The profile for ``--lceval-grid=requested`` (auto, reduced or full)."""
    if requested == "full":
        return GridProfile("full", f"{FULL_GRID_FLAG} was given")
    if requested == "reduced":
        return GridProfile("reduced", "--lceval-grid=reduced was given")
    where = model_place(backend_kind, device, environ, probe)
    return GridProfile("reduced" if where.on_cpu else "full", where.reason)


@dataclass(frozen=True)
class ModelPlace:
    """Whether the model under test computes on this machine's CPU, and why we think so."""

    on_cpu: bool
    reason: str


def model_place(backend_kind: str, device: str, environ: Mapping[str, str],
                probe: Callable[[], tuple[str, ...]] = devices.visible_gpus) -> ModelPlace:
    """Where the model computes: outside this process, on a GPU, or on this CPU (which the
    reduced grid and the default lookahead are sized for)."""
    if backend_kind not in LOCAL_BACKENDS:
        return ModelPlace(False, OTHER_PLACES.get(backend_kind, "the model runs on a server"))
    if device.startswith("cuda"):
        return ModelPlace(False, f"--lceval-device={device}")
    if device == "cpu":
        return ModelPlace(True, "--lceval-device=cpu")
    visible = environ.get(devices.CUDA_ENV)
    gpus = devices.parse_gpu_list(visible) if visible is not None else probe()
    if gpus:
        return ModelPlace(False, f"GPU {','.join(gpus)} visible")
    return ModelPlace(True, "no GPU visible and the model runs on this CPU")


def header_line(profile: GridProfile, axes: str) -> str:
    """The report-header line; ``axes`` describes the grid's defaults as resolved."""
    if not profile.reduced:
        return f"lceval: grid full ({profile.reason}): {axes}"
    return (f"lceval: grid REDUCED to fit a CPU ({profile.reason}): {axes}; "
            f"{FULL_GRID_FLAG} runs the papers' full grid")
