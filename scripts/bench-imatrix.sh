#!/usr/bin/env bash
# How much an importance matrix buys, and whether ours buys as much as llama.cpp's: synth-k
# (../shared/models/synth-k.gguf, F32) quantized to Q4_K_M, IQ4_XS and Q3_K_M three ways, then
# every file scored against the F32 model on the calibration text itself by `deskside score`:
#   plain   deskside quantize, no imatrix (= llama-quantize's bytes without one)
#   ours    deskside imatrix on the text, then deskside quantize --imatrix
#   llama   llama-imatrix's file of the same text (../shared/models/synth-k.imatrix, made by the peer
#           build with -c 128), then the peer's llama-quantize --imatrix
# Prints deskside score's table (mean KLD, top-1 agreement, ...) and writes it as CSV.
#
# usage: scripts/bench-imatrix.sh [--deskside BIN] [--out DIR]
#   the peer comes from scripts/build-llama-cpp.sh (DESKSIDE_PEER_TARGETS=llama-quantize).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
deskside="$repo/build/deskside"
out="$(mktemp -d)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --deskside) deskside="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "bench-imatrix.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$deskside" ]] || { echo "bench-imatrix.sh: no deskside binary at $deskside (--deskside BIN)" >&2; exit 1; }
peer="$(DESKSIDE_PEER_TARGETS=llama-quantize "$repo/scripts/build-llama-cpp.sh" | tail -n 1)"
shared="$repo/../shared"
model="$shared/models/synth-k.gguf"
text="$shared/reference/ppl-text-gpl3.txt"
mkdir -p "$out"

"$deskside" imatrix -m "$model" --text "$text" -o "$out/ours.imatrix" -c 128 > /dev/null
models=(-m "$model")
for type in Q4_K_M IQ4_XS Q3_K_M; do
  t="${type,,}"
  "$deskside" quantize "$model" "$out/plain-$t.gguf" --type "$type" > /dev/null
  "$deskside" quantize "$model" "$out/ours-$t.gguf" --type "$type" --imatrix "$out/ours.imatrix" > /dev/null
  "$peer/llama-quantize" --imatrix "$shared/models/synth-k.imatrix" "$model" "$out/llama-$t.gguf" "$type" 2 \
    > "$out/llama-quantize-$t.log" 2>&1
  models+=(-m "$out/plain-$t.gguf" -m "$out/ours-$t.gguf" -m "$out/llama-$t.gguf")
done
"$deskside" score "${models[@]}" --text "$text" -c 128 --csv "$out/scores.csv"
echo "files and scores.csv in $out" >&2
