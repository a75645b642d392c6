"""``--lceval-cite-nli``: the entailment scorer behind the cite suite's citation recall/precision.

ALCE judges citations with an NLI model (TRUE, a T5-XXL); this project names none by default
and records the citation metrics as absent until the user names one. ``hf:/path`` loads a local
Hugging Face sequence classifier trained on NLI (any MNLI-style model); its entailment class is
found by name in ``config.id2label``. It is offered to the core as a scoring model
(``pytest_lceval_scoring_models``), so its ratings are stored under its fingerprint as the judge's
verdicts are, and a rerun asks it nothing it has rated.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from ...models.scoring import ScoringModel
from ...models.weights import weights_identity
from ...results.records import stable_hash
from .cite import NLI_SCORER

HF_PREFIX = "hf:"
SCORER = pytest.StashKey["HFEntailment | None"]()
"""The session's classifier, checked at configure time."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-cite-nli", dest="lceval_cite_nli", default=None, metavar="SPEC",
                    help="entailment scorer for the cite suite's citation recall/precision: "
                         "hf:/path/to/local-nli-classifier (default: none, the metrics are "
                         "recorded as absent)")


def pytest_configure(config: pytest.Config) -> None:
    spec = config.getoption("lceval_cite_nli")
    config.stash[SCORER] = scorer_for(spec) if spec else None


@pytest.hookimpl
def pytest_lceval_scoring_models(config: pytest.Config) -> dict[str, ScoringModel]:
    scorer = config.stash.get(SCORER, None)
    return {} if scorer is None else {NLI_SCORER: scorer}


def scorer_for(spec: str) -> HFEntailment:
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
    """A local NLI classifier (a ScoringModel): premise and hypothesis as a sentence pair,
    entailed when the entailment class scores highest. Its labels are checked at configure time;
    the weights load on first use, so a run without cite cells pays nothing."""

    def __init__(self, path: Path) -> None:
        from transformers import AutoConfig

        self.path = path
        self.label = f"{HF_PREFIX}{path}"
        self.entailment = entailment_index(AutoConfig.from_pretrained(path).id2label, path)

    @cached_property
    def fingerprint(self) -> str:
        import torch
        import transformers

        return stable_hash({"nli": weights_identity(str(self.path), None),
                            "entailment": self.entailment, "decision": "argmax",
                            "transformers": transformers.__version__,
                            "torch": torch.__version__})

    def score(self, items: Sequence[tuple[str, ...]]) -> list[bool]:
        return [self.entails(premise, hypothesis) for premise, hypothesis in items]

    @cached_property
    def _model(self) -> tuple[Any, Any]:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.path)
        model = AutoModelForSequenceClassification.from_pretrained(self.path)
        model.to("cuda" if torch.cuda.is_available() else "cpu").eval()
        return tokenizer, model

    def entails(self, premise: str, hypothesis: str) -> bool:
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
