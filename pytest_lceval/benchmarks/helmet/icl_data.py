"""The five intent/question classification sets of HELMET's many-shot ICL category, read from
their public release formats in the data directory (``--lceval-data``).

HELMET loads them from the Hugging Face hub (``CogComp/trec``, ``PolyAI/banking77``,
``clinc_oos`` "plus", ``xingkunliuxtracta/nlu_evaluation_data``); machines without a hub read
the original releases instead, in the layout of ``shared/data/README.md``:

- ``trec/``: ``train_5500.label`` and ``TREC_10.label``, one ``COARSE:fine question`` per line
  (latin-1: one 0xF0 byte, which the hub's loader turns into a space, as here);
- ``banking77/``: ``train.csv`` and ``test.csv`` with columns ``text,category``;
- ``clinc150/``: ``data_full.json``; train = ``train`` + ``oos_train``, test = ``val`` +
  ``oos_val`` (HELMET tests on the validation split and keeps "oos" as the 151st class);
- ``nlu/``: cross-validation fold 1, ``KFold_1/trainset/*.csv`` and
  ``KFold_1/testset/csv/*.csv``, ``;``-separated; the label is ``scenario_intent``, the text the
  de-annotated ``answer_from_anno``.

A class's id is its place in the hub's ``ClassLabel`` (``icl_hub_classes``), as in HELMET:
its label map shuffles those ids, so which integer a class is shown as depends on them. (Before,
ids were the sorted names: on TREC coarse 232 of 500 gold integers differed from HELMET's.)
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ...foundation.data import DataError, DataSource
from . import icl_hub_classes as hub


@dataclass(frozen=True)
class Example:
    """One labelled text; ``label`` indexes ``LabelledSet.classes``."""

    text: str
    label: int


@dataclass(frozen=True)
class LabelledSet:
    """A classification set: its demonstration pool, its test inputs and class names."""

    train: tuple[Example, ...]
    test: tuple[Example, ...]
    classes: tuple[str, ...]
    """The hub's class names in its ``ClassLabel`` order (``Example.label`` indexes them); a
    local release may lack some (NLU's fold: 64 of 68)."""
    source: str
    """``data:<folder>``: recorded with every result."""

    @property
    def train_classes(self) -> int:
        """Classes the demonstration pool holds: HELMET's balanced rounds hold one of each."""
        return len({example.label for example in self.train})


Rows = list[tuple[str, str]]
"""(text, class name) pairs in file order."""


@dataclass(frozen=True)
class Layout:
    """Where a set lives in the data directory and how its release is read."""

    folder: str
    files: str
    """What the folder must hold, for the error message."""
    read: Callable[[Path], tuple[Rows, Rows]]
    classes: tuple[str, ...]
    """The hub's ClassLabel names, in order (``icl_hub_classes``)."""


def load(data: DataSource, layout: Layout, task: str) -> LabelledSet:
    """The set of ``layout`` from the data directory; DataError names the missing folder."""
    folder = data.folder(layout.folder)
    if folder is None:
        where = f"in {data.root}" if data.root is not None else "(no --lceval-data given)"
        raise DataError(f"{task} needs the folder {layout.folder}/ ({layout.files}) in the data "
                        f"directory {where}: pass --lceval-data DIR with that folder")
    return _load(folder, layout)


@cache
def _load(folder: Path, layout: Layout) -> LabelledSet:
    train, test = layout.read(folder)
    if not train or not test:
        raise DataError(f"{folder} has an empty train or test split: restore "
                        f"{layout.files}")
    ids = {name: i for i, name in enumerate(layout.classes)}
    unknown = sorted({name for _, name in (*train, *test)} - ids.keys())
    if unknown:
        raise DataError(f"{folder} has classes the hub's {layout.folder} does not "
                        f"({', '.join(unknown[:5])}): restore {layout.files} from the release")

    def examples(rows: Rows) -> tuple[Example, ...]:
        return tuple(Example(text, ids[name]) for text, name in rows)

    return LabelledSet(examples(train), examples(test), layout.classes, f"data:{layout.folder}")


def _file(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        raise DataError(f"{path} is missing: restore it from the data set's release")
    return path


def _trec_rows(path: Path, fine: bool) -> Rows:
    rows = []
    try:
        text = path.read_bytes().replace(b"\xf0", b" ").decode("latin-1")
    except OSError as exc:
        raise DataError(f"cannot read {path} ({exc.strerror or exc}): restore it from the data "
                        f"set's release") from None
    for number, line in enumerate(text.splitlines(), start=1):
        label, _, question = line.strip().partition(" ")
        if ":" not in label or not question:
            raise DataError(f"{path} line {number} is not 'COARSE:fine question': {line!r}")
        rows.append((question, label if fine else label.split(":")[0]))
    return rows


def _trec(fine: bool) -> Callable[[Path], tuple[Rows, Rows]]:
    def read(folder: Path) -> tuple[Rows, Rows]:
        return (_trec_rows(_file(folder, "train_5500.label"), fine),
                _trec_rows(_file(folder, "TREC_10.label"), fine))
    return read


def _csv_rows(path: Path, text: str, label: Callable[[dict[str, str]], str],
              delimiter: str = ",") -> Rows:
    rows = []
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle, delimiter=delimiter)
            for number, row in enumerate(reader, start=2):
                if not row.get(text):
                    raise DataError(f"{path} line {number} has no {text!r} field")
                rows.append((row[text], label(row)))
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path} ({getattr(exc, 'strerror', None) or exc}): "
                        f"restore it from the data set's release") from None
    return rows


def _banking77(folder: Path) -> tuple[Rows, Rows]:
    def split(name: str) -> Rows:
        return _csv_rows(_file(folder, name), "text", lambda row: row["category"])
    return split("train.csv"), split("test.csv")


def _nlu(folder: Path) -> tuple[Rows, Rows]:
    def split(files: Iterable[Path]) -> Rows:
        return [pair for path in sorted(files) for pair in _csv_rows(
            path, "answer_from_anno", lambda row: f"{row['scenario']}_{row['intent']}", ";")]
    fold = folder / "KFold_1"
    return split(fold.glob("trainset/*.csv")), split(fold.glob("testset/csv/*.csv"))


def _clinc150(folder: Path) -> tuple[Rows, Rows]:
    path = _file(folder, "data_full.json")
    try:
        splits = json.loads(path.read_text(encoding="utf-8"))
        return ([(text, intent) for text, intent in splits["train"] + splits["oos_train"]],
                [(text, intent) for text, intent in splits["val"] + splits["oos_val"]])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path} is not CLINC150's data_full.json (lists of [text, intent] "
                        f"under train/val/oos_train/oos_val): {exc!r}") from None


TREC_FILES = "train_5500.label, TREC_10.label"
TREC_COARSE = Layout("trec", TREC_FILES, _trec(fine=False), hub.TREC_COARSE)
TREC_FINE = Layout("trec", TREC_FILES, _trec(fine=True), hub.TREC_FINE)
BANKING77 = Layout("banking77", "train.csv, test.csv", _banking77, hub.BANKING77)
CLINC150 = Layout("clinc150", "data_full.json", _clinc150, hub.CLINC150)
NLU = Layout("nlu", "KFold_1/trainset/*.csv, KFold_1/testset/csv/*.csv", _nlu, hub.NLU)
