"""The default grid: reduced for a local model on a CPU, full with a GPU or a server."""

from __future__ import annotations

import pytest

from pytest_lceval.models.grid_profile import GridProfile, choose, header_line


def no_gpu() -> tuple[str, ...]:
    return ()


def one_gpu() -> tuple[str, ...]:
    return ("0",)


@pytest.mark.parametrize(
    ("requested", "kind", "device", "environ", "probe", "expected"),
    [
        ("auto", "preset", "auto", {}, no_gpu, "reduced"),
        ("auto", "hf", "auto", {}, no_gpu, "reduced"),
        ("auto", "preset", "auto", {}, one_gpu, "full"),
        ("auto", "preset", "auto", {"CUDA_VISIBLE_DEVICES": "2"}, no_gpu, "full"),
        ("auto", "preset", "auto", {"CUDA_VISIBLE_DEVICES": ""}, one_gpu, "reduced"),
        ("auto", "hf", "cuda:1", {}, no_gpu, "full"),
        ("auto", "hf", "cpu", {}, one_gpu, "reduced"),
        ("auto", "openai", "auto", {}, no_gpu, "full"),
        ("auto", "vllm", "auto", {}, no_gpu, "full"),
        ("auto", "mock", "auto", {}, no_gpu, "full"),
        ("full", "preset", "auto", {}, no_gpu, "full"),
        ("reduced", "openai", "auto", {}, one_gpu, "reduced"),
    ],
)
def test_choice(requested: str, kind: str, device: str, environ: dict[str, str],
                probe: object, expected: str) -> None:
    profile = choose(requested, kind, device, environ, probe)  # type: ignore[arg-type]
    assert profile.name == expected
    assert profile.reason


def test_header_names_the_full_grid_option_only_when_reduced() -> None:
    reduced = header_line(GridProfile("reduced", "no GPU"), "lengths 1k,2k")
    assert "REDUCED" in reduced and "--lceval-grid=full" in reduced and "1k,2k" in reduced
    full = header_line(GridProfile("full", "GPU 0 visible"), "lengths 8k")
    assert "--lceval-grid=full" not in full and "full (GPU 0 visible)" in full


SUITE = """
import pytest

pytestmark = pytest.mark.lceval(suite="recall")


def test_recall(lc_cell, lc_eval):
    lc_eval.check(lc_eval.run(lc_cell))
"""


@pytest.fixture
def recall_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_recall=SUITE)
    return pytester


def test_reduced_grid_is_the_default_and_explicit_options_win(
        recall_suite: pytest.Pytester) -> None:
    """A mock model stands in for a local one through --lceval-grid=reduced: collection only."""
    reduced = recall_suite.runpytest("--model", "mock:grep", "--lceval-grid", "reduced",
                                     "--collect-only", "-q", "-k", "niah_single_1")
    reduced.stdout.fnmatch_lines(["*test_recall[[]niah_single_1-1k-50[]]",
                                  "*test_recall[[]niah_single_1-2k-50[]]",
                                  "2/* tests collected*"])
    explicit = recall_suite.runpytest("--model", "mock:grep", "--lceval-grid", "reduced",
                                      "--depths", "0,100", "--collect-only", "-q",
                                      "-k", "niah_single_1")
    explicit.stdout.fnmatch_lines(["4/* tests collected*"])


def test_header_says_reduced_and_how_to_get_the_full_grid(
        recall_suite: pytest.Pytester) -> None:
    outcome = recall_suite.runpytest("--model", "mock:grep", "--lceval-grid", "reduced",
                                     "--collect-only")
    outcome.stdout.fnmatch_lines(["lceval: grid REDUCED*lengths 1k,2k, depths 50, 2 cases per cell*"
                                  "--lceval-grid=full runs the papers' full grid",
                                  "lceval: longscore base lengths 1k (*"])
