"""HELMET's long-document QA: task x length.

Each test is one cell: N questions, each after a long document cut (or padded, for the
NarrativeQA substitute) to the cell's length. NarrativeQA is scored by the judge
(--lceval-judge), the ∞Bench-style tasks by ROUGE-L F1 and accuracy. The questions are fixed per
seed, so the lengths pair.
"""

from pytest_lceval.suites.test_longqa import pytestmark, test_longqa  # noqa: F401
