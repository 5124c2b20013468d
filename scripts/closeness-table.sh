#!/usr/bin/env bash
# Prints the closeness table of docs/ENGINE.md ("Matching llama.cpp's logits"): every reference file
# of tests/engine/reference_check.h (kReferenceFiles) on the CPU at each instruction-set level this
# machine has and on vulkan0 with both shader variants, teacher-forced and free-running against
# ../shared/reference, beside the bar llama.cpp's own builds set (../shared/reference/SPREAD.md).
# Rows are sorted by file; the last column names what a row misses (empty: as close as llama.cpp).
#
# usage: scripts/closeness-table.sh [BUILD_DIR]     (default build/; needs deskside_tests built)
#        NO_VULKAN=1 scripts/closeness-table.sh     (the CPU rows only; lavapipe takes ~1 min per file)
#        DESKSIDE_CLOSENESS_FILES=stem1,stem2 ...    (those files' rows only)
set -euo pipefail
cd "$(dirname "$0")/.."
tests="${1:-build}/tests/deskside_tests"
[[ -x "$tests" ]] || { echo "closeness-table: no $tests (build the deskside_tests target)" >&2; exit 1; }

rows=$("$tests" "[closeness-table]" 2>&1 | grep '^| ' || true)
if [[ "${NO_VULKAN:-0}" != 1 ]]; then
  rows+=$'\n'$("$tests" "[vulkan-closeness-table]" 2>&1 | grep '^| ' || true)
fi
grep '^| file |' <<<"$rows" | head -1
echo "|---|---|---:|---:|---:|---:|---|---|---|"
grep -v '^| file |' <<<"$rows" | grep . | sort -s -t '|' -k2,2
