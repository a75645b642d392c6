"""torch's idle CPU threads sleep in a pytest-lceval run unless the user chose how they wait:
libgomp reads the policy once, so the plugin has to set it before torch is imported."""

from __future__ import annotations

import pytest

from pytest_lceval.foundation.cpu_wait import WAIT_ENVIRONMENT, sleep_when_idle

PRINT_POLICY = """
import os
import sys

def test_policy():
    print("torch imported:", "torch" in sys.modules)
    print("wait:", os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"))
"""


def test_threads_sleep_when_nothing_says_how_they_wait() -> None:
    environ: dict[str, str] = {}
    sleep_when_idle(environ)
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE"}


@pytest.mark.parametrize("name, value", [("OMP_WAIT_POLICY", "ACTIVE"),
                                         ("GOMP_SPINCOUNT", "3000")])
def test_the_users_own_wait_wins(name: str, value: str) -> None:
    environ = {name: value}
    sleep_when_idle(environ)
    assert environ == {name: value}


@pytest.mark.parametrize("user, expected", [({}, "wait: PASSIVE None"),
                                            ({"OMP_WAIT_POLICY": "ACTIVE"}, "wait: ACTIVE None"),
                                            ({"GOMP_SPINCOUNT": "3000"}, "wait: None 3000")])
def test_the_plugin_sets_the_wait_before_torch_loads(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     user: dict[str, str],
                                                     expected: str) -> None:
    for name in WAIT_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    for name, value in user.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_print=PRINT_POLICY)
    outcome = pytester.runpytest_subprocess("-s", "--model", "mock:grep")
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*torch imported: False*", f"*{expected}*"])
