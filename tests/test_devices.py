"""One GPU per xdist worker: the mapping, where the GPU list comes from, and the wiring through
pytest (header line, CUDA_VISIBLE_DEVICES in each worker before any fixture). No GPU needed."""

from __future__ import annotations

import json
import subprocess

import pytest

from pytest_lceval.models import devices
from pytest_lceval.models.devices import DeviceError, GpuPlan, make_plan


def no_probe() -> tuple[str, ...]:
    raise AssertionError("nvidia-smi must not be asked when the list is known")


@pytest.mark.parametrize(("gpus", "workers", "expected"), [
    ("0,1", 2, {"gw0": ("0",), "gw1": ("1",)}),
    ("0,1", 5, {"gw0": ("0",), "gw1": ("1",), "gw2": ("0",), "gw3": ("1",), "gw4": ("0",)}),
    ("4,6,7", 4, {"gw0": ("4",), "gw1": ("6",), "gw2": ("7",), "gw3": ("4",)}),
])
def test_worker_k_takes_gpu_k_mod_g(gpus: str, workers: int,
                                    expected: dict[str, tuple[str, ...]]) -> None:
    assert make_plan(gpus, {}, probe=no_probe).table(workers) == expected


def test_tensor_parallel_workers_take_consecutive_groups() -> None:
    plan = make_plan("0,1,2,3", {}, per_worker=2, probe=no_probe)
    assert plan.table(3) == {"gw0": ("0", "1"), "gw1": ("2", "3"), "gw2": ("0", "1")}
    assert devices.workers_for(plan) == 2
    with pytest.raises(DeviceError, match="needs 4 GPUs"):
        make_plan("0,1", {}, per_worker=4, probe=no_probe)


def test_gpu_list_comes_from_override_then_environment_then_nvidia_smi() -> None:
    environ = {devices.CUDA_ENV: "2,3"}
    assert make_plan("5", environ, probe=no_probe).gpus == ("5",)
    plan = make_plan(None, environ, probe=no_probe)
    assert (plan.gpus, plan.source) == (("2", "3"), "$CUDA_VISIBLE_DEVICES")
    probed = make_plan(None, {}, probe=lambda: ("0", "1", "2"))
    assert (probed.gpus, probed.source) == (("0", "1", "2"), "nvidia-smi")
    assert make_plan(None, {devices.CUDA_ENV: ""}, probe=no_probe).gpus == ()
    with pytest.raises(ValueError, match="twice"):
        make_plan("0,0", {}, probe=no_probe)


def test_nvidia_smi_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices.shutil, "which", lambda name: None)
    assert devices.probe_gpus() == ()
    monkeypatch.setattr(devices.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    listing = subprocess.CompletedProcess([], 0, stdout="0\n1\n", stderr="")
    monkeypatch.setattr(devices.subprocess, "run", lambda *args, **kwargs: listing)
    assert devices.probe_gpus() == ("0", "1")

    def broken(*args: object, **kwargs: object) -> None:
        raise subprocess.CalledProcessError(9, "nvidia-smi")

    monkeypatch.setattr(devices.subprocess, "run", broken)
    assert devices.probe_gpus() == ()


def test_apply_sets_the_worker_gpu_and_leaves_cpu_runs_alone() -> None:
    environ: dict[str, str] = {}
    assert devices.apply(GpuPlan(("0", "1"), "test"), "gw3", environ) == "1"
    assert environ == {devices.CUDA_ENV: "1"}
    untouched = {devices.CUDA_ENV: "0,1"}
    assert devices.apply(GpuPlan((), "nvidia-smi"), "gw0", untouched) is None
    assert devices.apply(GpuPlan(("0",), "x", enabled=False), "gw0", untouched) is None
    assert untouched == {devices.CUDA_ENV: "0,1"}
    with pytest.raises(DeviceError):
        GpuPlan(("0",), "x").for_worker("main")


def test_header_line_says_which_worker_holds_which_gpu() -> None:
    plan = GpuPlan(("0", "1"), "--lceval-gpus")
    assert devices.header_line(plan, 3) == \
        "lceval: GPUs 0,1 (from --lceval-gpus): gw0->0, gw1->1, gw2->0"
    assert devices.header_line(GpuPlan((), "nvidia-smi"), 2) is None
    assert "off" in (devices.header_line(GpuPlan((), "x", enabled=False), 2) or "")


PROBE_SUITE = """
import json, os
from pathlib import Path

import pytest

@pytest.mark.parametrize("n", range(4))
def test_device(n, worker_id):
    Path(f"device-{worker_id}-{n}.json").write_text(
        json.dumps(os.environ.get("CUDA_VISIBLE_DEVICES")))
"""


def test_each_xdist_worker_gets_its_gpu_before_tests_run(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(devices.CUDA_ENV, raising=False)
    pytester.makepyfile(test_probe=PROBE_SUITE)
    result = pytester.runpytest_subprocess("-n", "auto", "--lceval-gpus", "3,5",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["created: 2/2 workers"])  # -n auto: one worker per GPU
    result.stdout.fnmatch_lines(["lceval: GPUs 3,5 (from --lceval-gpus): gw0->3, gw1->5"])
    seen = {path.name: json.loads(path.read_text()) for path in pytester.path.glob("device-*")}
    assert len(seen) == 4
    for name, value in seen.items():
        assert value == {"gw0": "3", "gw1": "5"}[name.split("-")[1]], name


def test_bad_gpu_settings_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest("--lceval-gpus", "0,1", "--lceval-tensor-parallel", "4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--lceval-gpus*needs 4 GPUs*"])


def test_workers_sharing_a_gpu_count_each_other() -> None:
    one = GpuPlan(("0",), "x")
    assert [one.sharers(f"gw{k}", 2) for k in range(2)] == [2, 2]
    two = GpuPlan(("0", "1"), "x")
    assert [two.sharers(f"gw{k}", 3) for k in range(3)] == [2, 1, 2]  # gw2 is back on GPU 0
    assert two.sharers("gw0", 2) == 1
    pairs = GpuPlan(("0", "1", "2", "3"), "x", per_worker=2)
    assert [pairs.sharers(f"gw{k}", 4) for k in range(4)] == [2, 2, 2, 2]
    assert GpuPlan((), "nvidia-smi").sharers("gw0", 8) == 1
    assert GpuPlan(("0",), "x", enabled=False).sharers("gw0", 8) == 1


MEMORY_SUITE = """
import json
from pathlib import Path

from pytest_lceval.settings import serving_options

def test_share(pytestconfig, worker_id):
    Path(f"share-{worker_id}.json").write_text(
        json.dumps(serving_options(pytestconfig).gpu_memory))
"""


@pytest.mark.parametrize(("given", "expected"), [
    ((), {"gw0": 0.45, "gw1": None, "gw2": 0.45}),
    (("--lceval-gpu-memory", "0.3"), {"gw0": 0.3, "gw1": 0.3, "gw2": 0.3})])
def test_workers_on_one_gpu_split_its_memory_unless_a_share_is_given(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, given: tuple[str, ...],
        expected: dict[str, float | None]) -> None:
    """Three workers on two GPUs: gw0 and gw2 share GPU 3, so each may fill half of the default
    0.9 (two vLLM engines or HF batches at 0.9 each would not fit); gw1 keeps the default."""
    monkeypatch.delenv(devices.CUDA_ENV, raising=False)
    pytester.makepyfile(test_share=MEMORY_SUITE)
    result = pytester.runpytest_subprocess("-n", "3", "--dist", "each", "--lceval-gpus", "3,5",
                                           *given, "-p", "no:randomly")
    result.assert_outcomes(passed=3)  # --dist each: the test runs once in every worker
    seen = {path.stem.split("-")[1]: json.loads(path.read_text())
            for path in pytester.path.glob("share-*.json")}
    assert seen == expected
