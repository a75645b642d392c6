"""How the conformance layer (tests/conformance/conftest.py) treats its reference folder: with
none configured every test skips and the summary says why even under ``-q``; a configured folder
that is not there stops the run with one line naming it; a file the layer imports that the
folder lacks fails the test with one line naming the file, RULER's scripts at HELMET's commit
and Lifelong-ICL's notebook included (plain files of the reference folder, no git history)."""

from __future__ import annotations

from pathlib import Path

import pytest

LAYER = Path(__file__).parent / "conformance" / "conftest.py"
USES_HELMET = """
def test_reads_helmet(reference):
    reference("helmet", "data")
"""


@pytest.fixture
def layer(pytester: pytest.Pytester) -> pytest.Pytester:
    """A copy of the layer's conftest with one test that loads HELMET's ``data``, far from any
    ``shared/reference`` folder."""
    (pytester.path / "conformance").mkdir()
    (pytester.path / "conformance" / "conftest.py").write_text(LAYER.read_text())
    (pytester.path / "conformance" / "test_uses_helmet.py").write_text(USES_HELMET)
    return pytester


def test_without_a_reference_the_layer_skips_and_the_summary_says_why(
        layer: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LCEVAL_REFERENCE", raising=False)
    result = layer.runpytest("-q", "-p", "conformance_tally", "conformance")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["conformance layer not run: no reference configured "
                                 "($LCEVAL_REFERENCE is unset and * is absent*): 1 tests skipped"])


def test_a_configured_folder_that_is_missing_stops_the_run_in_one_line(
        layer: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "refrence"
    monkeypatch.setenv("LCEVAL_REFERENCE", str(missing))
    result = layer.runpytest("-q", "-p", "conformance_tally", "conformance")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert errors == [f"ERROR: LCEVAL_REFERENCE={missing}: no such folder, so the conformance "
                      f"layer cannot run: point it at the papers' reference code (the commits "
                      f"in docs/fidelity.md) or unset it"]


def test_a_file_the_layer_imports_that_is_missing_fails_in_one_line_naming_it(
        layer: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "helmet").mkdir()
    (tmp_path / "helmet" / "utils.py").write_text("")
    monkeypatch.setenv("LCEVAL_REFERENCE", str(tmp_path))
    result = layer.runpytest("-q", "-p", "conformance_tally", "conformance")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{tmp_path / 'helmet' / 'data.py'} is missing: the "
                                 f"conformance layer imports it from the reference at "
                                 f"{tmp_path}; restore the pinned copy (docs/fidelity.md)"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize("fixture,lacking", [
    ("ruler", "ruler-f682453/scripts/data/tokenizer.py"),
    ("lifelong_notebook", "lifelong_icl/playground/analysis_niath.ipynb")])
def test_rulers_older_commit_and_the_verdict_notebook_are_files_of_the_reference(
        layer: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        fixture: str, lacking: str) -> None:
    """A reference holding every other file but this one: the test that needs it fails naming
    it, rather than skipping or looking anywhere outside the reference folder."""
    (tmp_path / "helmet").mkdir()
    monkeypatch.setenv("LCEVAL_REFERENCE", str(tmp_path))
    call = 'ruler("f682453", "niah")' if fixture == "ruler" else "lifelong_notebook"
    (layer.path / "conformance" / "test_uses_helmet.py").write_text(
        f"def test_reads_it({fixture}):\n    {call}\n")
    result = layer.runpytest("-q", "-p", "conformance_tally", "conformance")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{tmp_path / lacking} is missing: the conformance layer *; "
                                 f"restore the pinned copy (docs/fidelity.md)"])
    assert "Traceback" not in result.stdout.str()
