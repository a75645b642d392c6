"""100-LongBench's length-controllable tasks: task x length, real articles packed to each length.

Each test is one cell: N cases of a task (KV retrieval, counting stars, passage retrieval,
passage count, yes/no single-document QA with the prior-knowledge filter; with --lceval-judge
also open single- and multi-document QA and single- and multi-document summaries, scored by the
judge) whose context is packed from whole articles to just under the cell's length. Cells at
the base lengths (2k, 4k, 6k by default) report the model's base ability; longer cells record
LongScore, LC = (S - Base) / Base, and with --longscore-min=-20 they fail when the model keeps
less than 80 % of its base ability.
"""

from pytest_lceval.suites.test_longbench100 import pytestmark, test_longbench100  # noqa: F401
