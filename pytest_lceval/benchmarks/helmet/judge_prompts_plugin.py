"""``--lceval-helmet-judge-prompts=PATH``: the judge asks HELMET's rubrics (``rubrics.py``) in
HELMET's own judge prompts, read from a HELMET checkout (``judge_prompts.py``), instead of this
project's wording. The prompts are offered to the judge through ``pytest_lceval_judge_texts``;
the judge panel asks each rubric in them, and only HELMET's rubrics have a use for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from .judge_prompts import read_helmet_prompts


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lceval")
    group.addoption("--lceval-helmet-judge-prompts", dest="lceval_helmet_judge_prompts",
                    default=None, metavar="PATH",
                    help="a HELMET checkout: ask the helmet_* rubrics in HELMET's own judge "
                         "prompts, read from its scripts/eval_gpt4_*.py (default: this "
                         "project's wording)")


@pytest.hookimpl
def pytest_lceval_judge_texts(config: pytest.Config) -> dict[str, str] | None:
    """HELMET's prompts from the checkout the option names; a checkout without them is one
    usage error."""
    checkout = config.getoption("lceval_helmet_judge_prompts")
    if not checkout:
        return None
    try:
        return read_helmet_prompts(Path(checkout).expanduser())
    except ValueError as exc:
        raise pytest.UsageError(f"--lceval-helmet-judge-prompts={checkout}: {exc}") from None
