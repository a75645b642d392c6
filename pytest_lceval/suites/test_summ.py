"""HELMET's summarisation, judged by a model (--lceval-judge): task x length.

Each test is one cell: N documents (the same at every length, cut at their end to fit it), each
with two demonstration summaries; the judge scores recall of key points, precision against the
expert summary and fluency, checked against ROUGE-Lsum F1. Without a judge the suite has no
cells.
"""

import pytest

pytestmark = pytest.mark.lceval(suite="summ")


def test_summ(lc_cell, lc_eval):
    lc_eval.check(lc_eval.run(lc_cell))
