#!/usr/bin/env bash
# CI: the HF backend's tests on the lowest transformers that pyproject.toml's `hf` extra allows.
# The old version comes as an overlay put first on PYTHONPATH: only the packages pip would have
# to change in the running interpreter's environment (transformers and what its pins demand),
# installed with --no-deps into a folder of their own. Everything else is the environment's own,
# so this works the same from the system interpreter, a venv or conda (a
# `venv --system-site-packages` would see the base interpreter's packages, not an active venv's).
# Run alone: bash .ci/lowest_transformers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The bound as the hf extra writes it ("transformers>=5.17,<5.25"); a plain text match, since
# tomllib is not in every Python the project supports.
lowest="$(sed -n 's/.*"transformers>=\([0-9.]*\)[,"].*/\1/p' pyproject.toml | head -n 1)"
if [ -z "$lowest" ]; then
  echo "pyproject.toml names no lower bound for transformers (\"transformers>=X\")" >&2
  exit 1
fi
case "$lowest" in *.*.*) ;; *) lowest="$lowest.0" ;; esac

python3 -m pip install -q --disable-pip-version-check --dry-run --report "$work/plan.json" \
  "transformers==$lowest"
python3 - "$work/plan.json" >"$work/overlay.txt" <<'PY'
import json
import sys

with open(sys.argv[1]) as file:
    for item in json.load(file)["install"]:
        print(f'{item["metadata"]["name"]}=={item["metadata"]["version"]}')
PY
echo "overlay for transformers $lowest: $(tr '\n' ' ' <"$work/overlay.txt")"
python3 -m pip install -q --disable-pip-version-check --no-deps --target "$work/overlay" \
  -r "$work/overlay.txt"

export PYTHONPATH="$work/overlay${PYTHONPATH:+:$PYTHONPATH}"
# The transformers under test must be the one meant, not the environment's own.
python3 - "$lowest" <<'PY'
import sys

import transformers

print(f"testing transformers {transformers.__version__} from {transformers.__file__}")
if transformers.__version__ != sys.argv[1]:
    sys.exit(f"expected transformers {sys.argv[1]}, imported {transformers.__version__}")
PY
python3 -m pytest tests/test_hf_backend.py tests/test_hf_greedy.py tests/test_batch_memory.py \
  tests/test_haystack_hf.py tests/test_decode_attention.py tests/test_cpu_products.py \
  tests/test_decoder_probe.py \
  -p no:randomly -q
