#!/usr/bin/env bash
# Model-file fuzzing with the sanitizer build: `deskside inspect` and a 2-token `deskside generate`
# over truncations, bit flips and crafted headers (byte-patched counts, types, dimensions and
# offsets; absurd hyper-parameters written with gguf-py) of one GGUF per architecture and tensor
# type under ../shared/models (scripts/fuzz-models.py). Fails on a crash, a hang, a sanitizer
# report or an error exit that does not say what is wrong; failing files are kept in
# fuzz-models-failures/.
#   scripts/fuzz-models.sh [BUILD_DIR] [--quick]   (BUILD_DIR: default build-test, scripts/test.sh's
#   ASan/UBSan build; --quick: the bounded run scripts/test.sh makes)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-test
quick=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=(--quick) ;;
    *) build="$arg" ;;
  esac
done
[ -x "$build/deskside" ] || { echo "fuzz-models: $build/deskside is not built (scripts/test.sh builds build-test)"; exit 1; }
exec .venv/bin/python scripts/fuzz-models.py "$build" "${quick[@]}"
