#!/usr/bin/env bash
# Builds scripts/peer/dump_logits.cpp against the llama.cpp peer that scripts/build-llama-cpp.sh
# builds (static libraries, outside the repo). The tool is a measuring instrument for
# docs/ENGINE.md's logits section, never part of deskside.
#   scripts/peer/build-dump-logits.sh [OUT_BINARY]   (default ~/.cache/deskside/peer/dump_logits)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
peer="${DESKSIDE_PEER_DIR:-$HOME/.cache/deskside/peer}"
src="$(ls -d "$peer"/src/llama_cpp_python-*/vendor/llama.cpp | head -n1)"
build="$(ls -d "$peer"/build-llama_cpp_python-* | head -n1)"
out="${1:-$peer/dump_logits}"
for lib in src/libllama.a ggml/src/libggml.a ggml/src/libggml-cpu.a ggml/src/libggml-base.a; do
    [[ -f "$build/$lib" ]] || { echo "build-dump-logits: $build/$lib missing (run scripts/build-llama-cpp.sh)" >&2; exit 1; }
done
nice -n 10 g++ -std=c++17 -O2 -I"$src/include" -I"$src/ggml/include" "$here/dump_logits.cpp" -o "$out" \
    "$build/src/libllama.a" "$build/ggml/src/libggml.a" "$build/ggml/src/libggml-cpu.a" \
    "$build/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl
echo "$out"

# deskside's side (dump_deskside.cpp), linked against the static libraries of a deskside build
# directory: DESKSIDE_BUILD_DIR (default build/).
ds_build="${DESKSIDE_BUILD_DIR:-$(cd "$here/../.." && pwd)/build}"
root="$(cd "$here/../.." && pwd)"
if [[ -f "$ds_build/libdeskside_engine.a" ]]; then
    nice -n 10 g++ -std=c++20 -O2 -march=native -I"$root" "$here/dump_deskside.cpp" -o "$(dirname "$out")/dump_deskside" \
        "$ds_build/libdeskside_engine.a" "$ds_build/libdeskside_models.a" "$ds_build/libdeskside_backends.a" \
        "$ds_build/libdeskside_quant.a" $(pkg-config --libs libpcre2-8 sentencepiece) -lcurl -lpthread
    echo "$(dirname "$out")/dump_deskside"
else
    echo "build-dump-logits: no $ds_build/libdeskside_engine.a; dump_deskside not built" >&2
fi
