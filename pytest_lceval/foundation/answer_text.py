"""How an answer's text is compared with a gold answer: SQuAD's normalisation, which the
papers' exact-match metrics and the mock judge share, so a test judge and the metrics it stands
beside agree on what "the same answer" means."""

from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (SQuAD's normalisation)."""
    text = text.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())
