"""Key points of a reference summary, which the recall question lists. HELMET ships key points
with its data (GPT-4o wrote them from the expert summaries); a case whose data has them
(``meta["keypoints"]``) uses them, and any other case has the judge write them once from its
reference summary. That request goes through the store under the judge's fingerprint, like every
judge request, so a rerun reads them back and a different judge writes its own."""

from __future__ import annotations

import re

from . import prompts

_POINT = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+?)\s*$", re.MULTILINE)

RETRY = """{prompt}

Your earlier reply was:
<start of reply>{reply}<end of reply>
It could not be used: it holds no numbered line. Reply again with only the numbered list.
"""


def keypoint_prompt(reference: str) -> str:
    return prompts.KEYPOINTS.format(reference=reference.strip())


def parse_keypoints(reply: str) -> list[str]:
    """The numbered (or bulleted) lines of ``reply``; empty when it has none."""
    return [point for point in _POINT.findall(reply) if point]
