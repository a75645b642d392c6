"""``--lceval-helmet-judge-prompts=PATH``: HELMET's own judge prompts, word for word, for the
``helmet_*`` rubrics.

The project ships its own wording of HELMET's rubrics (``judge/prompts.py``), never HELMET's
text. A user with a HELMET checkout can have the judge asked in HELMET's words: the prompt
strings are read from its ``scripts/eval_gpt4_longqa.py`` (``judge_prompt``) and
``scripts/eval_gpt4_summ.py`` (``fluency_prompt``, ``recall_prompt``, ``precision_prompt`` and
their ``_book`` variants) as the scripts' syntax tree holds them; nothing of the scripts runs.
``judge_prompts_plugin`` reads them once per process and offers them to the judge
(``pytest_lceval_judge_texts``), whose panel asks each rubric in them (``Rubric.worded``);
HELMET's rubrics then fill them as the scripts do (``rubrics.HelmetQA``,
``rubrics.HelmetSummary``).
"""

from __future__ import annotations

import ast
from pathlib import Path

SCRIPTS: dict[str, tuple[str, ...]] = {
    "eval_gpt4_longqa.py": ("judge_prompt",),
    "eval_gpt4_summ.py": ("fluency_prompt", "fluency_prompt_book", "recall_prompt",
                          "recall_prompt_book", "precision_prompt", "precision_prompt_book"),
}
"""HELMET's judge scripts and the prompt strings each defines."""


def read_helmet_prompts(checkout: Path) -> dict[str, str]:
    """HELMET's judge prompts from ``checkout`` (HELMET's repository, or its ``scripts/``);
    ValueError saying what is missing."""
    folder = checkout / "scripts" if (checkout / "scripts").is_dir() else checkout
    texts: dict[str, str] = {}
    for script, names in SCRIPTS.items():
        path = folder / script
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from None
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id in names \
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                texts[node.targets[0].id] = node.value.value
        absent = [name for name in names if name not in texts]
        if absent:
            raise ValueError(f"{path} defines no {', '.join(absent)}: it must be HELMET's "
                             f"judge script")
    return texts
