#!/usr/bin/env bash
# The one prepared check of the CUDA backend on an NVIDIA machine (docs/CUDA.md): op conformance
# against the CPU, llama.cpp references, greedy equality across placements, the server, and speed
# against the measured memory bandwidth, in at most 8 minutes. The steps, their budgets and the
# environment (DEVICE, DRY_RUN, TOTAL_BUDGET_S, ...) are described in scripts/gpu/gpu_check.py.
#
# usage: scripts/gpu-check.sh BUNDLE_DIR OUT_DIR     (BUNDLE_DIR from scripts/gpu-bundle.sh)
#        DRY_RUN=1 scripts/gpu-check.sh .gpu-bundle /tmp/check     (here, on the CPU: tiny models)
# Prints the table and writes it to OUT_DIR/gpu-check.md, with gpu-check.json, gpu-check.log and
# devices.json. Exit status: 1 if a step failed, 3 if a correctness step timed out, else 0.
set -euo pipefail

[[ $# -eq 2 ]] || { sed -n '2,10p' "$0"; exit 2; }
bundle="$1"
if [[ ! -x "$bundle/run" ]]; then
  echo "gpu-check: $bundle is not a bundle (make one with scripts/gpu-bundle.sh)" >&2
  exit 2
fi
mkdir -p "$2"
# The checkout's check (it travels with the bundle); the bundle's copy where the script runs without it.
check="$(dirname "$0")/gpu/gpu_check.py"
[[ -f "$check" ]] || check="$bundle/scripts/gpu/gpu_check.py"
export PYTHONUNBUFFERED=1
exec python3 "$check" "$bundle" "$2"
