"""``--lceval-summ-prompts``: the words of the summarisation suite's prompts.

HELMET's prompts (``data.py`` ``load_infbench`` "sum_eng", ``load_multi_lexsum``) are the
default, word for word, also on the substitutes; ``adapted`` asks each substitute in words that
fit it (a government report, a TV episode, an account of a lawsuit, and about its references'
length rather than ∞Bench's 1000 to 1200 words).
"""

from __future__ import annotations

import pytest

from .summ import WORDINGS


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-summ-prompts", dest="lceval_summ_prompts", default=WORDINGS[0],
                    choices=WORDINGS,
                    help="summarisation prompts: helmet (HELMET's words, default) or adapted "
                         "(words and lengths fitted to each substitute data set)")
