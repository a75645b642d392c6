"""The plugin's own tests do not depend on where pytest was started from: an outer run started
outside the checkout (or through the ``pytest`` script, whose path holds no checkout) imports the
package before anything puts the checkout on sys.path, and an inner run must not then mark it for
assertion rewriting (tests/conftest.py says how that happened)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]
INNER_RUN_UNDER_ERRORS = "tests/test_bad_runs.py::test_scores_reach_junit_xml_without_a_warning"


@pytest.mark.skipif(not any(CHECKOUT.glob("*.egg-info")),
                    reason="no editable install's egg-info in this checkout (a copy of the "
                           "files only): nothing an inner run could find on sys.path")
def test_an_inner_run_under_warnings_as_errors_passes_from_outside_the_checkout(
        tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(CHECKOUT / INNER_RUN_UNDER_ERRORS), "-q",
         "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert "already imported so cannot be rewritten" not in done.stdout + done.stderr
    assert done.returncode == 0, done.stdout[-3000:]
