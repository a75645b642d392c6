"""Lookup drafts: what followed the latest earlier occurrence of the last tokens."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from pytest_lceval.models.prompt_lookup import NGRAM, lookup_draft  # noqa: E402


def test_a_draft_continues_the_latest_occurrence_of_the_longest_run_found() -> None:
    assert NGRAM == 3
    tokens = [5, 6, 7, 1, 9, 6, 7, 2, 3, 5, 6, 7]
    assert lookup_draft(tokens, 4) == [1, 9, 6, 7]  # 5 6 7 matched at the start, not 6 7 later
    assert lookup_draft([4, 6, 7, 8, 8, 6, 7, 9, 0, 6, 7], 2) == [9, 0]  # latest 6 7
    assert lookup_draft([1, 2, 3, 4, 3], 10) == [4, 3]  # the last token alone, to the end


def test_no_draft_for_a_new_token_a_lone_token_or_no_room() -> None:
    assert lookup_draft([1, 2, 3], 5) == []
    assert lookup_draft([1], 5) == []
    assert lookup_draft([1, 2, 1, 2], 0) == []
