"""Feeding HELMET's hub loaders (``load_narrativeqa``, ``load_infbench``, ``load_multi_lexsum``)
local rows, and reading back the exact text HELMET would send to the model.

HELMET reads these data sets from the Hugging Face hub and counts their lengths with Llama-2's
tokenizer; neither is reachable here. The conformance tests give the reference:

- the rows the project built its case from, as a ``datasets.Dataset`` in the hub's structure,
  where the loader calls ``load_dataset``;
- SmolLM2's tokenizer where it loads Llama-2's (``truncate_llama2``, ``filter_length``), so the
  document is cut in the project's length tokenizer, at the count HELMET's own configs give for
  the length (``helmet_cut_at``). The substitutes' documents are shorter than
  HELMET's length filter (65,536 or 131,072 Llama-2 tokens), so the length checks are told every
  document passes (``PassesLengthFilter``); the cut itself sees the real tokens;
- the project's demonstrations where HELMET draws them unseeded (``Dataset.shuffle()`` without a
  seed keeps the order the test gave); seeded shuffles run as they are;
- ``num_proc`` dropped from ``map``/``filter`` and caching off (they change only the speed).

``rendered`` then runs HELMET's ``model_utils.tokenize`` and returns the string it tokenised: the
chat template applied to the user message (no system message: HELMET's ``--system_message``
defaults to None), or ``prompt_template`` without one, after any cut ``tokenize`` makes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

OMITTED = " ... [the rest of the text is omitted]"
FILTER_PASS = 131_073
"""More tokens than any of HELMET's length filters asks for."""


class PassesLengthFilter:
    """A tokenizer that is the real one for the cut (offsets) and the marker's length, and says
    every other text is longer than HELMET's length filters."""

    def __init__(self, hf: Any) -> None:
        self.hf = hf

    def __call__(self, text: Any, **kwargs: Any) -> Any:
        encoded = self.hf(text, **kwargs)
        if kwargs.get("return_offsets_mapping") or text == OMITTED:
            return encoded
        ids = list(encoded["input_ids"])
        return {"input_ids": ids + [0] * max(0, FILTER_PASS - len(ids))}


@contextmanager
def hub(monkeypatch: pytest.MonkeyPatch, data_module: ModuleType, hf: Any,
        splits: Mapping[str, Any]) -> Iterator[None]:
    """While open, HELMET's ``data`` module reads ``splits`` (name -> list of rows, or a
    ``datasets.Dataset``) from ``load_dataset`` whatever it asks for."""
    import datasets

    tokenizer = PassesLengthFilter(hf)
    dataset_dict = datasets.DatasetDict({
        name: rows if isinstance(rows, datasets.Dataset) else datasets.Dataset.from_list(rows)
        for name, rows in splits.items()})

    def load_dataset(*args: Any, features: Any = None, **kwargs: Any) -> Any:
        if features is None:
            return dataset_dict
        return datasets.DatasetDict({name: split.cast(features)
                                     for name, split in dataset_dict.items()})

    shuffle, map_, filter_ = datasets.Dataset.shuffle, datasets.Dataset.map, \
        datasets.Dataset.filter

    def fixed_order(self: Any, seed: Any = None, *args: Any, **kwargs: Any) -> Any:
        return self if seed is None and not kwargs.get("generator") else \
            shuffle(self, seed, *args, **kwargs)

    def serial_map(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("num_proc", None)
        return map_(self, *args, **kwargs)

    def serial_filter(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("num_proc", None)
        return filter_(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(datasets, "load_dataset", load_dataset)
        patch.setattr(data_module, "load_dataset", load_dataset)
        patch.setattr(data_module, "AutoTokenizer",
                      SimpleNamespace(from_pretrained=lambda *a, **k: tokenizer))
        patch.setattr(datasets.Dataset, "shuffle", fixed_order)
        patch.setattr(datasets.Dataset, "map", serial_map)
        patch.setattr(datasets.Dataset, "filter", serial_filter)
        datasets.disable_progress_bars()
        caching = datasets.is_caching_enabled()
        datasets.disable_caching()  # else every map hashes the tokenizer for its fingerprint
        try:
            yield
        finally:
            if caching:
                datasets.enable_caching()


class Recorder:
    """The tokenizer handed to HELMET's ``tokenize``: the real one, remembering the last text
    it was asked to tokenise as a batch (the prompt)."""

    def __init__(self, hf: Any) -> None:
        self.hf = hf
        self.prompts: list[str] = []

    def __call__(self, text: Any, **kwargs: Any) -> Any:
        if isinstance(text, list):
            self.prompts.append(text[0])
        return self.hf(text, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.hf, name)


def rendered(model_utils: ModuleType, hf: Any, sample: Mapping[str, Any],
             data: Mapping[str, Any], length: int, max_new_tokens: int,
             chat_template: bool) -> str:
    """The text HELMET's ``tokenize`` feeds the model for ``sample`` (a copy: ``tokenize``
    cuts the sample's context in place when the prompt is too long)."""
    recorder = Recorder(hf)
    model_utils.tokenize(dict(sample), data, tokenizer=recorder, max_length=length,
                         generation_max_length=max_new_tokens, use_chat_template=chat_template,
                         system_message=None)
    return recorder.prompts[-1]


def helmet_cut_at(configs: ModuleType, dataset: str, length: int) -> int:
    """HELMET's ``truncate_llama2`` count for ``dataset`` at ``length``, as HELMET decides it:
    the dataset suffix its ``scripts/generate_configs.py`` writes for each of its lengths is
    the length less one margin (prompt, buffer and generation budget), which is checked, and
    that margin is taken off ``length`` (HELMET has no config below 4k)."""
    margins = {config["input_length"] - int(config["name_postfix"].removeprefix("_"))
               for config in configs.master_mapping[dataset].values()}
    assert len(margins) == 1, margins
    return length - margins.pop()
