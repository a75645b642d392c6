"""``--lceval-cite-nli``: the entailment scorer behind the cite suite's citation recall/precision.

ALCE judges citations with an NLI model (TRUE, a T5-XXL); this project names none by default
and records the citation metrics as absent until the user names one. ``hf:/path`` loads a local
Hugging Face sequence classifier trained on NLI (any MNLI-style model); its entailment class is
found by name in ``config.id2label``. A judge backend can serve as the scorer too: anything that
satisfies ``tasks.cite_metrics.EntailmentScorer``.
"""

from __future__ import annotations

from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import pytest

from .cite import NLI
from .cite_metrics import EntailmentScorer

HF_PREFIX = "hf:"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-cite-nli", dest="lceval_cite_nli", default=None, metavar="SPEC",
                    help="entailment scorer for the cite suite's citation recall/precision: "
                         "hf:/path/to/local-nli-classifier (default: none, the metrics are "
                         "recorded as absent)")


def pytest_configure(config: pytest.Config) -> None:
    spec = config.getoption("lceval_cite_nli")
    NLI.scorer = scorer_for(spec) if spec else None


def pytest_unconfigure(config: pytest.Config) -> None:
    """The slot outlives the session (in-process pytester runs): leave it empty."""
    NLI.scorer = None


def scorer_for(spec: str) -> EntailmentScorer:
    """The scorer a ``--lceval-cite-nli`` spec names; UsageError for one it does not."""
    if not spec.startswith(HF_PREFIX):
        raise pytest.UsageError(f"--lceval-cite-nli={spec}: expected hf:/path/to/a local NLI "
                                f"sequence classifier")
    path = Path(spec[len(HF_PREFIX):]).expanduser()
    if not (path / "config.json").is_file():
        raise pytest.UsageError(f"--lceval-cite-nli={spec}: {path} is not a Hugging Face model "
                                f"folder (no config.json)")
    return HFEntailment(path)


class HFEntailment:
    """A local NLI classifier: premise and hypothesis as a sentence pair, entailment when the
    entailment class scores highest. Its labels are checked at configure time; the weights load
    on first use, so a run without cite cells pays nothing. Answers are memoised (a claim with
    several citations asks the same pair again)."""

    def __init__(self, path: Path) -> None:
        from transformers import AutoConfig

        self.path = path
        self.label = f"{HF_PREFIX}{path}"
        self.entailment = entailment_index(AutoConfig.from_pretrained(path).id2label, path)
        self._cached = lru_cache(maxsize=65536)(self._entails)

    def entails(self, premise: str, hypothesis: str) -> bool:
        return self._cached(premise, hypothesis)

    @cached_property
    def _model(self) -> tuple[Any, Any]:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.path)
        model = AutoModelForSequenceClassification.from_pretrained(self.path)
        model.to("cuda" if torch.cuda.is_available() else "cpu").eval()
        return tokenizer, model

    def _entails(self, premise: str, hypothesis: str) -> bool:
        import torch

        tokenizer, model = self._model
        limit = min(tokenizer.model_max_length,
                    getattr(model.config, "max_position_embeddings", None) or 512)
        inputs = tokenizer(premise, hypothesis, truncation="only_first", max_length=limit,
                           return_tensors="pt").to(model.device)
        with torch.inference_mode():
            logits = model(**inputs).logits[0]
        return int(logits.argmax()) == self.entailment


def entailment_index(id2label: dict[int, str], path: Path) -> int:
    """The class whose label names entailment ('ENTAILMENT', 'entailment', 'LABEL_ENTAILMENT');
    a model whose labels name none cannot be read safely, so it is refused."""
    found = [int(i) for i, label in id2label.items()
             if "entail" in label.lower() and "not" not in label.lower()]
    if len(found) != 1:
        raise pytest.UsageError(f"--lceval-cite-nli: {path} labels its classes "
                                f"{dict(id2label)}; exactly one must name entailment")
    return found[0]
