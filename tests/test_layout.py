"""The layout's rules, checked on the source: the core imports no benchmark package, and the
package's top level stays small (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from toy_suite import JUDGED_TASK

import pytest_lceval

PACKAGE = Path(pytest_lceval.__file__).parent
NAMES_BENCHMARKS = {"builtin_suites.py"}
"""The one core module that names the built-in suites (plugin.py lists plugins as strings)."""


def imported_modules(path: Path, source: str | None = None) -> list[str]:
    """Absolute names of what the module at ``path`` (or ``source`` as if it were there)
    imports, relative imports resolved."""
    package = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)[:-1]
    text = path.read_text(encoding="utf-8") if source is None else source
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return found


def core_modules() -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py"))
            if path.relative_to(PACKAGE).parts[0] not in ("benchmarks", "suites", "fixtures")
            and path.name not in NAMES_BENCHMARKS]


def test_the_core_imports_no_benchmark() -> None:
    crossing = {str(path.relative_to(PACKAGE)): name for path in core_modules()
                for name in imported_modules(path)
                if name.startswith("pytest_lceval.benchmarks")}
    assert crossing == {}


@pytest.mark.parametrize("source", ["from ..benchmarks.ruler import tasks",
                                    "from ..benchmarks import ruler",
                                    "import pytest_lceval.benchmarks.helmet.rag"])
def test_the_rule_sees_a_crossing_however_it_is_written(source: str) -> None:
    names = imported_modules(PACKAGE / "run" / "evaluation.py", source)
    assert any(name.startswith("pytest_lceval.benchmarks") for name in names)


def test_the_top_level_keeps_at_most_a_dozen_modules() -> None:
    assert len(list(PACKAGE.glob("*.py"))) <= 12


def module_path(name: str) -> Path | None:
    """The package's file of module ``name``; None for a name outside it (or an attribute)."""
    parts = name.split(".")
    if parts[0] != PACKAGE.name:
        return None
    base = PACKAGE.parent.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_within(path: Path) -> set[str]:
    """Every module of the package that importing ``path`` imports, directly or not."""
    seen: set[str] = set()
    todo = [path]
    while todo:
        for name in imported_modules(todo.pop()):
            found = module_path(name)
            if found is not None and name not in seen:
                seen.add(name)
                todo.append(found)
    return seen


def test_no_plugin_module_is_imported_before_pytest_loads_it() -> None:
    """pytest rewrites a plugin module's asserts, and warns that it cannot (an error under
    ``-W error::pytest.PytestWarning``), when something imported the module first: a plugin
    of the list that an earlier one imports must come before it."""
    from pytest_lceval.plugin import pytest_plugins

    early = {}
    for position, plugin in enumerate(pytest_plugins):
        path = module_path(plugin)
        assert path is not None, plugin
        imported = imported_within(path)
        early.update({later: plugin for later in pytest_plugins[position + 1:]
                      if later in imported})
    assert early == {}


AUTHOR_SOURCES = {
    **{str(path.relative_to(PACKAGE.parent)): path.read_text(encoding="utf-8")
       for path in sorted((PACKAGE.parent / "docs" / "examples" / "row_lookup").glob("*.py"))},
    "tests/toy_task.py": (Path(__file__).parent / "toy_task.py").read_text(encoding="utf-8"),
    "tests/toy_suite.py:JUDGED_TASK": JUDGED_TASK,
}
"""What a suite, task or criterion author writes: the out-of-tree example and the toy tasks the
plugin's own tests register."""


def package_imports(source: str) -> list[str]:
    """The modules of this package that ``source`` imports (absolute imports only: an author's
    file is outside the package)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        found += [name for name in names if name.split(".")[0] == PACKAGE.name]
    return found


@pytest.mark.parametrize("name", sorted(AUTHOR_SOURCES))
def test_an_authors_file_imports_only_the_public_api(name: str) -> None:
    internal = [module for module in package_imports(AUTHOR_SOURCES[name])
                if module != "pytest_lceval.api"]
    assert internal == []


@pytest.mark.parametrize("source", ["from pytest_lceval.run.grid import Cell",
                                    "import pytest_lceval.run.suite as suite",
                                    "from pytest_lceval import api"])
def test_the_public_api_rule_sees_an_internal_import(source: str) -> None:
    assert [module for module in package_imports(source) if module != "pytest_lceval.api"]


def test_the_public_api_names_what_its_docstring_lists() -> None:
    """Every exported name resolves, and the docstring says what each one is for."""
    from pytest_lceval import api

    assert api.__doc__ is not None
    undocumented = [name for name in api.__all__ if f"``{name}``" not in api.__doc__]
    assert undocumented == []
    assert all(hasattr(api, name) for name in api.__all__)
