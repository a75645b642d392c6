"""Make a deliberately degraded SmolLM2: the same weights, attention limited to the last N tokens.

The save-then-compare flow of docs/reports-and-ci.md needs a model that got worse in a known
way. SmolLM2 is a Llama; Mistral is the same architecture plus a sliding attention window, so
relabelling the config gives a model that answers exactly as SmolLM2 within N tokens and cannot
see anything further back: recall cells whose needle lies more than N tokens before the
question degrade, the others do not. Weights and tokenizer are linked, not copied, so prompts
(and case keys) stay identical and the runs pair case by case.

    python docs/examples/smollm2_short_window.py /tmp/smollm2-window256 256
    pytest suites/test_recall.py --model=smollm2 --lengths 1k --lceval-save=base
    pytest suites/test_recall.py --model=hf:/tmp/smollm2-window256 --lengths 1k \
        --lceval-compare=base --html=reports/compare.html
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pytest_lceval.models.presets import preset_directory


def make_short_window(target: Path, window: int) -> Path:
    source = preset_directory("smollm2")
    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.name != "config.json" and not (target / path.name).exists():
            (target / path.name).symlink_to(path)
    config = json.loads((source / "config.json").read_text())
    config.update(architectures=["MistralForCausalLM"], model_type="mistral",
                  sliding_window=window)
    (target / "config.json").write_text(json.dumps(config, indent=2))
    return target


if __name__ == "__main__":
    print(make_short_window(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 256))
