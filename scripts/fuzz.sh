#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs them for a bounded time in all (default 60 s,
# split between them): fuzz_gguf seeded with every GGUF file under ../shared/models, fuzz_http
# (request head, body framing, JSON -> request validation) seeded with tests/fuzz/corpus/http.
# Fails on any crash, leak or sanitizer report. Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
gguf_seconds=$(( (seconds + 1) / 2 ))
http_seconds=$(( seconds - gguf_seconds > 0 ? seconds - gguf_seconds : 1 ))
build=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDESKSIDE_FUZZ=ON \
  -DDESKSIDE_TESTS=OFF -DDESKSIDE_VULKAN=OFF -DDESKSIDE_CUDA=OFF > "$build-configure.log" 2>&1 \
  || { cat "$build-configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target fuzz_gguf fuzz_http
corpus="$(mktemp -d)"
trap 'rm -rf "$corpus"' EXIT
# Seeds are the first 64 KiB of each file: the reader's work is all in the header, and inputs
# are capped at that length (tensor data beyond it is only bounds-checked).
mkdir "$corpus/seeds" "$corpus/new" "$corpus/http"
n=0
while IFS= read -r -d '' f; do
  head -c 65536 "$f" > "$corpus/seeds/$n.gguf"
  n=$((n + 1))
done < <(find ../shared/models -name '*.gguf' -print0)
echo "fuzz_gguf: $n seed files, ${gguf_seconds} s"
"$build/tests/fuzz/fuzz_gguf" -max_total_time="$gguf_seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 "$corpus/new" "$corpus/seeds" 2>&1 | tail -n 25
echo "fuzz_gguf: no crash, leak or sanitizer report in ${gguf_seconds} s"
# New inputs go to a scratch copy; the committed corpus stays as it is.
echo "fuzz_http: $(ls tests/fuzz/corpus/http | wc -l) seed requests, ${http_seconds} s"
"$build/tests/fuzz/fuzz_http" -max_total_time="$http_seconds" -max_len=16384 -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 "$corpus/http" tests/fuzz/corpus/http 2>&1 | tail -n 25
echo "fuzz_http: no crash, leak or sanitizer report in ${http_seconds} s"
