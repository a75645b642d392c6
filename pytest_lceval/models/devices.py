"""One GPU (or one tensor-parallel group) per xdist worker, chosen before any backend loads.

With ``-n N`` on a machine with G visible GPUs, worker ``gwK`` takes GPU ``K mod G`` (with a
tensor-parallel size T, the T GPUs starting at ``K*T mod G``). The choice is written into
``CUDA_VISIBLE_DEVICES`` in the worker's ``pytest_configure``, before the model fixture runs,
because CUDA reads that variable once, when a process first touches the GPU: setting it later
does nothing. The controller finds the GPUs once and hands the list to every worker, so all
processes agree on the plan and the report header can show it before any worker starts.

Everything here is plain functions of strings and integers, so the mapping is tested without a
GPU; the only side effects are ``probe_gpus`` (runs ``nvidia-smi``) and ``apply``.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass

CUDA_ENV = "CUDA_VISIBLE_DEVICES"
DISABLED = ("none", "off")
"""``--lceval-gpus`` values that leave CUDA_VISIBLE_DEVICES untouched in every worker."""
_WORKER_ID = re.compile(r"^gw(\d+)$")
_PROBE_SECONDS = 10.0


class DeviceError(ValueError):
    """A GPU plan that cannot work (e.g. more GPUs per worker than are visible)."""


@dataclass(frozen=True)
class GpuPlan:
    """Which GPUs exist for this run and how many each worker takes."""

    gpus: tuple[str, ...]
    """Visible GPU ids (indices or UUIDs as CUDA_VISIBLE_DEVICES spells them); empty = none."""
    source: str
    """Where the list came from, for the header: '--lceval-gpus', '$CUDA_VISIBLE_DEVICES'..."""
    per_worker: int = 1
    """GPUs each worker holds (tensor x pipeline parallel size)."""
    enabled: bool = True
    """False when the user switched assignment off (--lceval-gpus none)."""

    def for_worker(self, worker_id: str) -> tuple[str, ...]:
        """The GPUs of worker ``gwK``: ``per_worker`` ids starting at ``K * per_worker mod G``."""
        match = _WORKER_ID.match(worker_id)
        if not match:
            raise DeviceError(f"{worker_id!r} is not an xdist worker id (gw0, gw1, ...)")
        if not self.gpus:
            return ()
        start = int(match.group(1)) * self.per_worker
        return tuple(self.gpus[(start + i) % len(self.gpus)] for i in range(self.per_worker))

    def table(self, workers: int) -> dict[str, tuple[str, ...]]:
        return {f"gw{k}": self.for_worker(f"gw{k}") for k in range(workers)}

    def sharers(self, worker_id: str, workers: int) -> int:
        """How many of the ``workers`` hold one of this worker's GPUs, itself included: they
        divide its memory. 1 without GPUs or with assignment off (nothing is known then)."""
        if not self.enabled or not self.gpus:
            return 1
        mine = set(self.for_worker(worker_id))
        return sum(1 for held in self.table(workers).values() if mine & set(held))


def parse_gpu_list(text: str) -> tuple[str, ...]:
    """'0,1, 3' -> ('0', '1', '3'); '' -> (); ids may be indices or GPU UUIDs."""
    ids = tuple(part.strip() for part in text.split(",") if part.strip())
    if len(set(ids)) != len(ids):
        raise ValueError(f"GPU list {text!r} names a GPU twice")
    return ids


def probe_gpus() -> tuple[str, ...]:
    """Indices of the GPUs nvidia-smi sees; () when it is absent or fails (a CPU machine)."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return ()
    try:
        listing = subprocess.run(
            [tool, "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
            text=True, timeout=_PROBE_SECONDS, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in listing.splitlines() if line.strip().isdigit())


@functools.cache
def visible_gpus() -> tuple[str, ...]:
    """``probe_gpus`` once per process: the default grid and the GPU plan both ask."""
    return probe_gpus()


def make_plan(override: str | None, environ: MutableMapping[str, str], per_worker: int = 1,
              probe: Callable[[], tuple[str, ...]] = visible_gpus) -> GpuPlan:
    """The run's GPU plan: the override, else CUDA_VISIBLE_DEVICES, else what nvidia-smi sees.

    Raises DeviceError when a worker would need more GPUs than are visible.
    """
    if override is not None and override.strip().lower() in DISABLED:
        return GpuPlan((), "--lceval-gpus", per_worker, enabled=False)
    if override is not None:
        gpus, source = parse_gpu_list(override), "--lceval-gpus"
    elif CUDA_ENV in environ:
        gpus, source = parse_gpu_list(environ[CUDA_ENV]), f"${CUDA_ENV}"
    else:
        gpus, source = probe(), "nvidia-smi"
    if gpus and per_worker > len(gpus):
        raise DeviceError(f"each worker needs {per_worker} GPUs (tensor x pipeline "
                          f"parallel size) but only "
                          f"{len(gpus)} are visible ({','.join(gpus)} from {source})")
    return GpuPlan(gpus, source, per_worker)


def apply(plan: GpuPlan, worker_id: str | None, environ: MutableMapping[str, str]) -> str | None:
    """Point this process at its GPUs; returns the value set, or None when nothing was changed.

    Outside xdist (no worker id) the process keeps every GPU the plan lists.
    """
    if not plan.enabled or not plan.gpus:
        return None
    chosen = plan.for_worker(worker_id) if worker_id else plan.gpus
    value = ",".join(chosen)
    if _cuda_already_started() and environ.get(CUDA_ENV) != value:
        warnings.warn(f"pytest-lceval: CUDA was initialised before the GPU plan was applied; "
                      f"{CUDA_ENV}={value} will not take effect in this process", stacklevel=2)
    environ[CUDA_ENV] = value
    return value


def _cuda_already_started() -> bool:
    """Whether torch already created a CUDA context here (then the variable comes too late)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    is_initialized = getattr(cuda, "is_initialized", None)
    return bool(is_initialized and is_initialized())


def header_line(plan: GpuPlan, workers: int) -> str | None:
    """The report-header line saying which worker holds which device; None when there is no GPU
    and no override (a CPU run needs no line)."""
    if not plan.enabled:
        return f"lceval: GPU assignment off (--lceval-gpus none); {CUDA_ENV} left as it is"
    if not plan.gpus:
        return None
    visible = f"GPUs {','.join(plan.gpus)} (from {plan.source})"
    if workers <= 0:
        return f"lceval: {visible}: one process uses all of them"
    pairs = ", ".join(f"{worker}->{'+'.join(ids)}" for worker, ids in plan.table(workers).items())
    return f"lceval: {visible}: {pairs}"


def workers_for(plan: GpuPlan) -> int | None:
    """Worker count for ``-n auto``: one per GPU group; None (xdist's default) without GPUs."""
    if not plan.enabled or not plan.gpus:
        return None
    return max(1, len(plan.gpus) // plan.per_worker)


def worker_count(tx: Sequence[object] | None) -> int:
    """How many xdist workers the controller will start (its --tx list, one per worker)."""
    return len(tx or ())

