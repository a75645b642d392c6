"""What the HELMET conformance tests share: HELMET's ``eval.py`` imported once with the modules
it brought in (its ``data``, ``model_utils`` and ``utils`` namespaces), the text HELMET's own
``tokenize`` sends to the model, a stand-in model that lets ``eval.run_test`` run end to end,
files in HELMET's release formats made from the shared public data, and hostile outputs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_lceval.models.hf_text import HFText


@dataclass(frozen=True)
class Helmet:
    """HELMET's ``eval`` module and the namespaces of the modules it imported."""

    eval: ModuleType

    @property
    def data(self) -> dict[str, Any]:
        """``data.py``'s globals (``load_qa``, ``load_dataset``, ...)."""
        namespace: dict[str, Any] = self.eval.load_data.__globals__
        return namespace

    @property
    def model_utils(self) -> dict[str, Any]:
        namespace: dict[str, Any] = self.eval.load_LLM.__globals__
        return namespace

    @property
    def utils(self) -> dict[str, Any]:
        namespace: dict[str, Any] = self.data["parse_output"].__globals__
        return namespace


def load_helmet(reference: Callable[..., ModuleType]) -> Helmet:
    return Helmet(reference("helmet", "eval"))


def cache_datasets_in(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``datasets`` writes its Arrow caches under ``tmp``, not the user's cache."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp)


class _Capture:
    """A tokenizer that remembers the last text it was asked to tokenise (HELMET's ``tokenize``
    tokenises the finished prompt last)."""

    def __init__(self, hf: Any) -> None:
        self.hf = hf
        self.last = ""

    def __call__(self, texts: list[str], **kwargs: Any) -> Any:
        self.last = texts[0]
        return self.hf(texts, **kwargs)

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        return self.hf.apply_chat_template(*args, **kwargs)


def helmet_prompt(helmet: Helmet, sample: dict[str, Any], data: dict[str, Any], text: HFText,
                  max_length: int, generation_max_length: int,
                  chat: bool) -> tuple[str, list[int]]:
    """The text HELMET's ``model_utils.tokenize`` builds for ``sample`` and the ids it feeds the
    model, with SmolLM2's tokenizer and no system message (``arguments.py``'s default)."""
    capture = _Capture(text.hf)
    inputs = helmet.model_utils["tokenize"](
        dict(sample), data, tokenizer=capture, max_length=max_length,
        generation_max_length=generation_max_length, use_chat_template=chat,
        system_message=None)
    return capture.last, [int(i) for i in inputs["input_ids"][0]]


def run_args(dataset: str, output_dir: Path, *, chat: bool, max_length: int,
             generation_max_length: int, max_test_samples: int, shots: int,
             seed: int = 42) -> argparse.Namespace:
    """The arguments ``eval.run_test`` reads, as ``arguments.py`` would give them."""
    return argparse.Namespace(
        tag="eval", datasets=dataset, popularity_threshold=3, output_dir=str(output_dir),
        overwrite=True, max_test_samples=max_test_samples, num_workers=0, shots=shots,
        input_max_length=max_length, do_sample=False, generation_max_length=generation_max_length,
        generation_min_length=0, temperature=0.0, top_p=1.0, stop_newline=False,
        system_message=None, seed=seed, no_cuda=True, use_chat_template=chat, thinking=False,
        debug=False, count_tokens=False)


def run_test(helmet: Helmet, args: argparse.Namespace, text: HFText, test_file: str,
             demo_file: str, outputs: Callable[[int, dict[str, Any]], str],
             ) -> tuple[list[str], list[dict[str, Any]]]:
    """``eval.run_test`` end to end with a stand-in HF model that answers item i with
    ``outputs(i, item)``: the prompts HELMET built (as ``tokenize`` formatted them) and its
    per-item results (its post-processing, after what ``eval.py`` adds to the output)."""
    hf_model = helmet.model_utils["HFModel"]
    tokenize = helmet.model_utils["tokenize"]
    prompts: list[str] = []
    items: list[dict[str, Any]] = []

    class Stand(hf_model):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:  # HELMET's attributes, without loading weights
            self.tokenizer = text.hf
            self.max_length = args.input_max_length
            self.generation_max_length = args.generation_max_length
            self.use_chat_template = args.use_chat_template
            self.system_message = args.system_message

        def prepare_inputs(self, test_item: Any, data: Any) -> Any:
            capture = _Capture(text.hf)
            inputs = tokenize(test_item, data, tokenizer=capture, max_length=self.max_length,
                              generation_max_length=self.generation_max_length,
                              use_chat_template=self.use_chat_template,
                              system_message=self.system_message)
            prompts.append(capture.last)
            items.append(dict(test_item))
            return inputs

        def generate_batch(self, inputs: Any = None, prompt: Any = None,
                           **kwargs: Any) -> list[dict[str, Any]]:
            return [{"output": outputs(i, item), "input_len": int(ids.input_ids.shape[1]),
                     "output_len": 1, "input_text": None}
                    for i, (item, ids) in enumerate(zip(items, inputs, strict=True))]

    path = helmet.eval.run_test(args, Stand(), args.datasets, test_file, demo_file)
    results = json.loads(Path(path).read_text())["data"]
    return prompts, results


# -- files in HELMET's release formats, made from the shared public data -----------------------

def oracle_rows(shared: Path) -> list[dict[str, Any]]:
    """NQ-open questions with their gold passage (lost-in-the-middle's oracle file)."""
    with gzip.open(shared / "nq_oracle" / "nq-open-oracle.jsonl.gz", "rt", encoding="utf-8") \
            as handle:
        return [json.loads(line) for line in handle]


def gold_of(row: dict[str, Any]) -> dict[str, str]:
    gold = next(ctx for ctx in row["ctxs"] if ctx.get("isgold"))
    return {"title": gold["title"], "text": gold["text"]}


def kilt_rows(questions: Sequence[dict[str, Any]], pool: Sequence[dict[str, str]], k: int,
              depths: int, golds: int, rng: random.Random, key: Callable[[int], Any],
              extra: Callable[[int], dict[str, Any]] = lambda i: {}) -> list[dict[str, Any]]:
    """Rows in HELMET's KILT format (``*_k{k}_dep{depths}``): each question ``depths`` times,
    its ``golds`` gold passages (the question's own and, for two, the next question's) moved
    through the ``k`` passages, the distractors drawn from ``pool`` in a fixed order."""
    rows = []
    for index, question in enumerate(questions):
        own = [gold_of(question)] + ([gold_of(questions[(index + 1) % len(questions)])]
                                     if golds == 2 else [])
        distractors = [doc for doc in rng.sample(list(pool), k) if doc not in own][:k - golds]
        for depth in range(depths):
            docs = list(distractors)
            if golds == 1:
                docs.insert(round(depth / (depths - 1) * (k - 1)), own[0])
            else:  # HotpotQA's three permutations: both first, both in the middle, both last
                spot = round(depth / (depths - 1) * (k - 2))
                pair = own if depth != 1 else own[::-1]
                docs[spot:spot] = pair
            rows.append({"id": key(index), "question": question["question"],
                         "answers": question["answers"],
                         "ctxs": [{"id": f"{key(index)}-{i}", **doc}
                                  for i, doc in enumerate(docs)], **extra(index)})
    return rows


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def msmarco_pools(shared: Path) -> dict[str, dict[str, Any]]:
    """TREC DL 2019 and 2020 queries with their BM25 hits graded by NIST's qrels (unjudged
    hits grade 0), the material of HELMET's MS MARCO files."""
    folder = shared / "msmarco_dl"
    pools: dict[str, dict[str, Any]] = {}
    for year in ("dl19", "dl20"):
        grades: dict[tuple[str, str], int] = {}
        for line in (folder / f"qrels.{year}-passage.txt").read_text().splitlines():
            qid, _, docid, grade = line.split()
            grades[(qid, docid)] = int(grade)
        runs = json.loads((folder / "retrieve_results" / "BM25" /
                           f"retrieve_results_{year}.json").read_text())
        for entry in runs:
            hits = entry["hits"]
            qid = str(hits[0]["qid"])
            pools[qid] = {"query": entry["query"], "hits": [
                {"id": str(hit["docid"]), "text": hit["content"],
                 "label": grades.get((qid, str(hit["docid"])), 0)} for hit in hits]}
    return pools


def rerank_rows(pools: dict[str, dict[str, Any]], qids: Sequence[str], k: int,
                rng: random.Random) -> list[dict[str, Any]]:
    """Rows in HELMET's re-ranking format (``*_k{k}_dep3``): each query three times, the same
    k passages (a label-balanced draw) in three shuffled orders."""
    rows = []
    for qid in qids:
        by_grade: dict[int, list[dict[str, Any]]] = {}
        for hit in pools[qid]["hits"]:
            by_grade.setdefault(hit["label"], []).append(hit)
        dealt: list[dict[str, Any]] = []
        for round_ in range(max(len(group) for group in by_grade.values())):
            dealt += [group[round_] for _, group in sorted(by_grade.items(), reverse=True)
                      if round_ < len(group)]
        chosen = dealt[:k]
        for _ in range(3):
            order = list(chosen)
            rng.shuffle(order)
            rows.append({"qid": qid, "query": pools[qid]["query"], "ctxs": order})
    return rows


# -- outputs a model might give, hostile ones included -----------------------------------------

UNICODE = ("Ünïcödé ßtraße", "東京タワー", "مرحبا", "emoji 🚀🔥", "zero\u200bwidth", "ﬁne ligature",
           "KELVIN \u212a", "ſtraight")


def hostile_outputs(golds: Sequence[str], prefix: str, count: int, seed: int) -> list[str]:
    """``count`` outputs around a case's gold strings: right, wrong, empty, on a later line,
    after a repeated or differently cased prefix, with citations only, in other scripts, and
    10k characters long."""
    gold = golds[0] if golds else ""
    forms = [
        "", " ", "\n", f" {gold}", gold, f"\n{gold}", f"\n\n{gold}\n", f" {gold.upper()}",
        f" {gold.lower()}.", f"{prefix} {gold}", f" {prefix} {gold}", f"{prefix}{gold}",
        f"{prefix.upper()} {gold}", f" {prefix} {prefix} {gold}", f" I think\n{prefix} {gold}",
        f" wrong\n{gold}", f" {gold}\nwrong", " [1][2][3]", f" {gold} [1][2]", "[1]",
        " The", " a", " an the", " " + "x" * 10_000 + f" {gold}", f" {gold} " + "y" * 10_000,
        " " + "\n".join(["line"] * 50), f" not {gold[:max(1, len(gold) // 2)]}",
        " " + " ".join(golds), f"\t{gold}\r\n", f" «{gold}»", f" ({gold})",
        f"{prefix}\n{gold}", f" {prefix}", " 0", " 1", " 3 > 1 > 2", " ID: 7 > ID: 3",
        " unanswerable", " None",
    ] + [f" {text}" for text in UNICODE] + [f" {gold} {text}" for text in UNICODE]
    rng = random.Random(seed)
    outputs = list(forms)
    while len(outputs) < count:
        a, b = rng.sample(forms, 2)
        outputs.append(a[:200] + rng.choice(["\n", " ", "", ". "]) + b[:200])
    return outputs[:count]



def ranking_outputs(ids: Sequence[str], gold: Sequence[str], count: int, seed: int) -> list[str]:
    """``count`` re-ranking outputs over a case's passage ids: the gold order, shuffled and
    partial orders, other spellings of ids, repeats, numbers that are not ids, and the hostile
    outputs of any task."""
    rng = random.Random(seed)
    forms = [" " + " > ".join(gold), " " + " > ".join(reversed(gold)),
             " " + " > ".join(f"[ID: {i}]" for i in gold), " " + " > ".join(f"ID{i}" for i in gold),
             " " + " > ".join(gold[:3]), " " + " > ".join([*gold[:2], gold[0], *gold[2:5]]),
             " " + ", ".join(gold), " " + " >> ".join(gold), f" {gold[0]}",
             f" 1 > 2\n{' > '.join(gold)}", " " + " > ".join(gold) + "\nRanking: 1 > 2 > 3",
             "Ranking: " + " > ".join(gold[::2]), " 999999 > " + " > ".join(gold[:4]),
             " " + " > ".join(gold).replace(" > ", ">"), f" {gold[0]}>{gold[1]} > x > {gold[2]}"]
    forms += hostile_outputs(list(gold[:1]), "Ranking:", 60, seed)
    outputs = list(forms)
    while len(outputs) < count:
        shown = list(ids)
        rng.shuffle(shown)
        outputs.append(" " + " > ".join(shown[:rng.randint(1, len(shown))]))
    return outputs[:count]


# -- HELMET's hub data sets, from the project's reading of the local releases ------------------

@dataclass(frozen=True)
class HubSet:
    """How ``load_icl`` reads one set from the hub: its name, the splits it asks for and the
    label column."""

    hub: str
    train: str
    test: str
    label: str


HUB_SETS = {
    "icl_trec_coarse": HubSet("CogComp/trec", "train", "test", "coarse_label"),
    "icl_trec_fine": HubSet("CogComp/trec", "train", "test", "fine_label"),
    "icl_banking77": HubSet("PolyAI/banking77", "train", "test", "label"),
    "icl_clinic150": HubSet("clinc_oos", "train", "validation", "intent"),
    "icl_nlu": HubSet("xingkunliuxtracta/nlu_evaluation_data", "train", "test", "label"),
}


class _Features(dict[str, Any]):
    pass


class _TrainRows(list[dict[str, Any]]):
    """A split as ``load_icl`` uses its demonstration pool: iterated as rows, with ``features``
    (a plain list, so that drawing demonstrations for every test input stays fast)."""

    features: _Features
    test: Any = None

    def train_test_split(self, test_size: float, seed: int) -> dict[str, Any]:
        """NLU's split: the local release's own fold, not HELMET's random 90/10 split."""
        return {"train": self, "test": self.test}


def hub_stand_in(task: str, train: Sequence[tuple[str, int]], test: Sequence[tuple[str, int]],
                 classes: Sequence[str]) -> Callable[..., dict[str, Any]]:
    """A ``load_dataset`` that gives ``load_icl`` the local rows (text, class id) under the
    hub's split and column names, the class names as the label's ``ClassLabel``."""
    import datasets

    spec = HUB_SETS[task]
    label = datasets.ClassLabel(names=list(classes))
    features = datasets.Features({"text": datasets.Value("string"), spec.label: label})
    test_set = datasets.Dataset.from_list(
        [{"text": text, spec.label: label_id} for text, label_id in test], features=features)
    rows = _TrainRows({"text": text, spec.label: label_id} for text, label_id in train)
    rows.features = _Features({spec.label: label})
    rows.test = test_set

    def load_dataset(name: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        assert name == spec.hub, f"{task} asked the hub for {name}"
        return {spec.train: rows, spec.test: test_set}

    return load_dataset


def without_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``load_icl`` maps with ``num_proc=40``; the same map in this process (2 cores here)."""
    import datasets

    plain = datasets.Dataset.map

    def map_here(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("num_proc", None)
        return plain(self, *args, **kwargs)

    monkeypatch.setattr(datasets.Dataset, "map", map_here)
