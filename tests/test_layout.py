"""The layout's rules, checked on the source: the core imports no benchmark package, and the
package's top level stays small (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
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


BENCHMARK_NAMES = re.compile(r"longscore|helmet|haystack|ruler|longbench", re.IGNORECASE)
PLUGIN_LIST = {"plugin.py"}
"""The core module that names the benchmarks' plugins, as strings in its list."""


def code_tokens(source: str) -> list[str]:
    """The tokens of ``source`` outside its docstrings and comments (``prose`` is the rest)."""
    docstrings = {(node.value.lineno, node.value.col_offset)
                  for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                  and isinstance(node.value.value, str)}
    return [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type != tokenize.COMMENT
            and not (token.type == tokenize.STRING and token.start in docstrings)]


def benchmark_names(source: str) -> list[str]:
    """The benchmarks' names in the code of ``source`` (its docstrings and comments may cite
    the papers)."""
    return [name for token in code_tokens(source) for name in BENCHMARK_NAMES.findall(token)]


def test_the_core_names_no_benchmark_outside_its_prose() -> None:
    found = {str(path.relative_to(PACKAGE)): len(names) for path in core_modules()
             if path.name not in PLUGIN_LIST
             and (names := benchmark_names(path.read_text(encoding="utf-8")))}
    assert found == {}


@pytest.mark.parametrize(("source", "found"), [
    ('x = "helmet"', ["helmet"]),
    ("RULER_THRESHOLD = 85.6", ["RULER"]),
    ("undefined = result.metrics.get('longscore_undefined')", ["longscore"]),
    ("from .task_haystack import run", ["haystack"]),
    ('"""the HELMET prompts, the RULER needles."""\n# LongScore, Task Haystack\nx = 1', []),
    ('def f() -> int:\n    """100-LongBench\'s base."""\n    return 1  # longbench100', []),
    ('class A:\n    x = 1\n    """RULER\'s threshold."""', []),
])
def test_the_name_rule_reads_code_not_prose(source: str, found: list[str]) -> None:
    assert benchmark_names(source) == found


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


@pytest.mark.parametrize("source", ["from pytest_lceval.foundation.grid import Cell",
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


FOLDERS = {path.name for path in PACKAGE.rglob("*") if path.is_dir() and path.name != "__pycache__"}
"""Every folder of the package, at any depth: a path in prose that starts with one names a file
of the package (a reference repository's path, ``scripts/...``, starts with none)."""
TOP_LEVEL = {PACKAGE.name, *(path.stem for path in PACKAGE.iterdir()
                             if path.suffix == ".py" or (path / "__init__.py").is_file())}
"""The first part of a dotted name of this package's modules (``foundation.grid``,
``pytest_lceval.foundation.grid``)."""
PROSE_PATH = re.compile(r"(?<![\w/.-])((?:[A-Za-z_]\w*/)+[A-Za-z_]\w*\.py)\b")
PROSE_DOTTED = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w(/-])")
FILE_SUFFIXES = {"py", "json", "jsonl", "md", "html", "csv", "txt", "sqlite", "png", "svg", "xml"}


def prose(source: str) -> list[str]:
    """The docstrings (module, class, function and attribute ones) and comments of ``source``."""
    found = [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    return found + [node.value.value for node in ast.walk(ast.parse(source))
                    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)]


def top_level_names(path: Path) -> set[str]:
    """What module ``path`` defines or imports at its top level (``foundation.measuring._thread``
    names one)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def stale_names(text: str) -> list[str]:
    """The module names in ``text`` that name nothing in the package: a path (``run/plan.py``,
    ``helmet/pipeline.py``) no file of the package or the repository ends with, a dotted name
    (``foundation.grid.Cell``, ``plugin.fetch``) whose module is not there or does not define what
    follows it."""
    files = [path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")]
    stale = [name for name in PROSE_PATH.findall(text) if name.split("/")[0] in FOLDERS
             and not (PACKAGE.parent / name).is_file()
             and not any(f"/{file}".endswith(f"/{name}") for file in files)]
    for name in PROSE_DOTTED.findall(text):
        parts = name.split(".")
        if parts[0] not in TOP_LEVEL or parts[-1] in FILE_SUFFIXES:
            continue
        parts = parts if parts[0] == PACKAGE.name else [PACKAGE.name, *parts]
        found = max(range(1, len(parts) + 1),
                    key=lambda n: n if module_path(".".join(parts[:n])) else 0)
        module = module_path(".".join(parts[:found]))
        if module is None or (found < len(parts) and parts[found] not in top_level_names(module)
                              and module_path(".".join(parts[:found + 1])) is None):
            stale.append(name)
    return stale


LISTED = re.compile(r"``([a-z_][a-z0-9_]*)``")


def unlisted_modules(init: Path, docstring: str) -> list[str]:
    """The bare names (````plugin````) in a package's ``__init__`` docstring, which lists its
    modules, that are no module or folder of that package."""
    present = {path.stem for path in init.parent.iterdir()
               if path.suffix == ".py" or (path / "__init__.py").is_file()}
    return [name for name in LISTED.findall(docstring) if name not in present]


def test_a_packages_docstring_lists_only_its_modules() -> None:
    stale = {f"{init.relative_to(PACKAGE)}: {name}" for init in sorted(PACKAGE.rglob("__init__.py"))
             for name in unlisted_modules(init, ast.get_docstring(ast.parse(
                 init.read_text(encoding="utf-8"))) or "")}
    assert sorted(stale) == []


def test_the_listing_rule_sees_a_module_that_moved() -> None:
    init = PACKAGE / "judge" / "__init__.py"
    assert unlisted_modules(init, "``panel`` asks, ``judge_plugin`` and ``plugin`` wire") == \
        ["plugin"]


def test_docstrings_and_comments_name_only_modules_that_exist() -> None:
    stale = {f"{path.relative_to(PACKAGE)}: {name}" for path in sorted(PACKAGE.rglob("*.py"))
             for text in prose(path.read_text(encoding="utf-8")) for name in stale_names(text)}
    assert sorted(stale) == []


@pytest.mark.parametrize(("text", "stale"), [
    ("the newline rule (benchmarks/helmet/newline.py)", ["benchmarks/helmet/newline.py"]),
    ("the newline rule (helmet/newline.py)", ["helmet/newline.py"]),
    ("repaired by ``store.store_repair``", ["store.store_repair"]),
    ("the plugin's ``plugin.fetch``", ["plugin.fetch"]),
    ("``pytest_lceval.foundation.grid.Celll``", ["pytest_lceval.foundation.grid.Celll"]),
    ("``foundation.grid.Cell``, foundation/grid.py, helmet/pipeline.py, HELMET's scripts/eval.py, "
     "results.jsonl, ``models.stored``, pytest_lceval.fetch", []),
])
def test_the_module_name_rule_tells_a_stale_name_from_a_live_one(text: str,
                                                                  stale: list[str]) -> None:
    assert stale_names(text) == stale


FLOORS = {"results": 0, "foundation": 1, "store": 2, "models": 3, "tasks": 4, "settings": 5,
          "fetch": 6, "run": 7, "verdicts": 8, "judge": 8, "report": 9, "benchmarks": 10,
          "suites": 10}
"""The floor of each core folder (and top-level module), from the bottom, one folder to a floor
where one imports the other: records, the foundational types (cells, data sources,
measurements), the store, models, tasks, the settings, fetch, the run loop, verdicts / judge,
reports, then the benchmarks; the pytest wiring (every ``*_plugin.py``, plugin, hookspecs,
builtin_suites, api) is the top floor. No module may import one on a floor above its own."""
WIRING = {"__init__", "plugin", "hookspecs", "builtin_suites", "api"}
WIRING_FLOOR = max(FLOORS.values()) + 1


def floor(path: Path) -> int:
    relative = path.relative_to(PACKAGE)
    if path.stem.endswith("_plugin") or path.stem in WIRING and len(relative.parts) == 1:
        return WIRING_FLOOR
    return FLOORS[relative.parts[0].removesuffix(".py")]


def short_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def wrong_way(path: Path, source: str | None = None) -> set[tuple[str, str]]:
    """The imports of the module at ``path`` (or of ``source`` as if it were there) that reach a
    module on a floor above its own."""
    return {(short_name(path), short_name(target)) for name in imported_modules(path, source)
            if (target := module_path(name)) is not None and name != PACKAGE.name
            and floor(path) < floor(target)}


def test_no_core_module_imports_a_floor_above_its_own() -> None:
    found = set().union(*(wrong_way(path) for path in sorted(PACKAGE.rglob("*.py"))
                          if path.relative_to(PACKAGE).parts[0] != "fixtures"))
    assert sorted(found) == [], "an import goes up a floor"


@pytest.mark.parametrize(("module", "source", "found"), [
    ("tasks/packing.py", "from ..run.plan import PlannedCell", ("tasks.packing", "run.plan")),
    ("results/records.py", "import pytest_lceval.store.database", ("results.records",
                                                                   "store.database")),
    ("run/plan.py", "from ..run.serving_plugin import serving_options",
     ("run.plan", "run.serving_plugin")),
    ("models/reference_tokenizer.py", "from ..tasks.base import BuildContext",
     ("models.reference_tokenizer", "tasks.base")),
    ("settings.py", "from .run.plan import PlannedCell", ("settings", "run.plan")),
    ("benchmarks/ruler/tasks.py", "from ...plugin import pytest_plugins",
     ("benchmarks.ruler.tasks", "plugin")),
])
def test_the_floor_rule_names_a_wrong_way_import(module: str, source: str,
                                                 found: tuple[str, str]) -> None:
    assert wrong_way(PACKAGE / module, source) == {found}


def test_an_import_down_or_across_a_floor_is_allowed() -> None:
    assert wrong_way(PACKAGE / "run" / "plan.py", "from ..models.base import Backend\n"
                     "from ..foundation.grid import Cell\n"
                     "from ..results.records import Case") == set()
