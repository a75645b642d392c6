"""Each backend kind declares its start-up check and window hint where it is declared
(models/registry.py's BACKENDS): a kind without one cannot be declared, and start-up runs the
one a spec's kind declares."""

from __future__ import annotations

import pytest

from pytest_lceval.models import preflight, registry
from pytest_lceval.models.options import LoadOptions
from pytest_lceval.models.preflight import PreflightError
from pytest_lceval.models.registry import ModelSpec, check_model, window_hint


def test_every_built_in_kind_declares_a_check_from_preflight() -> None:
    factories = {**registry.BACKENDS, "preset": registry._PRESET}
    checks = {kind: factory.check for kind, factory in factories.items()}
    assert {kind: getattr(check, "__module__", None) for kind, check in checks.items()} == \
        dict.fromkeys(factories, preflight.__name__)


def test_a_kind_that_declares_no_check_is_refused() -> None:
    with pytest.raises(TypeError, match="check"):
        registry._Factory("pkg.mod", "load", None, "a new engine")  # type: ignore[call-arg]


def _refuse(kind: str, target: str, options: LoadOptions) -> None:
    raise PreflightError(f"{kind}:{target}: refused by its kind's own check")


def test_start_up_runs_the_check_its_kind_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BACKENDS, "engine", registry._Factory(
        "pkg.engine", "load", None, "a new engine", _refuse, lambda kind, target, options: 4096,
        None))
    spec = ModelSpec("engine:model-a")
    assert spec.kind == "engine"
    with pytest.raises(PreflightError, match="engine:model-a: refused by its kind's own check"):
        check_model(spec, LoadOptions())
    assert window_hint(spec, LoadOptions()) == 4096
    assert window_hint(spec, LoadOptions(window=512)) == 512


def test_a_kind_declared_with_no_check_starts_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BACKENDS, "engine", registry._Factory(
        "pkg.engine", "load", None, "a new engine", None, None, None))
    spec = ModelSpec("engine:model-a")
    check_model(spec, LoadOptions())
    assert window_hint(spec, LoadOptions()) is None


def test_a_built_in_kind_reaches_its_own_check() -> None:
    with pytest.raises(PreflightError, match="give the served model's name: --model=openai:NAME"):
        check_model(ModelSpec("openai:"), LoadOptions())
    assert window_hint(ModelSpec("mock:grep?window=300"), LoadOptions()) == 300
