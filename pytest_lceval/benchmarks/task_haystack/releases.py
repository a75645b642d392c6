"""Task Haystack's public data (Lifelong ICL's llicl-data), which 100-LongBench reads too
(llicl/boolq, for its yes/no QA); ``--haystack-fetch`` fetches it alone."""

from __future__ import annotations

from ...fetch.catalog import GITHUB, Origin, Release

LLICL = Release(
    "llicl", "Task Haystack's 80 tasks (config, five few-shot resamples, 100 test cases)",
    "GitHub INK-USC/llicl-data", "per task (Lifelong ICL paper, Table 6; the permissive 16 "
    "in Table 8)", ("task_haystack", "longbench100"), ("llicl",),
    origins=(Origin(f"{GITHUB}/INK-USC/llicl-data/HEAD/", "llicl",
                    ("*/config.json", "*/train_*.jsonl", "*/test.jsonl")),),
    flag="haystack_fetch")
