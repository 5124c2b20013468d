#!/usr/bin/env bash
# Tokenizer throughput: time `deskside tokenize` on ~1 MB of English text (the perplexity text,
# repeated) and on a one-word text, and report the difference (loading the vocabulary is not
# counted) as MB/s. Times are CPU seconds (user + sys) so that other work on a shared machine
# does not count; the tokenizer is single-threaded. Not a test; numbers depend on the machine.
#
#   scripts/bench-tokenizer.sh [BUILD_DIR] [MODEL...]
#   default BUILD_DIR: build; default MODELs: the llama-spm, llama-bpe and qwen2 vocab files.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
shift || true
bin="$build/deskside"
[[ -x "$bin" ]] || { echo "no $bin: build the deskside target first" >&2; exit 1; }
vocab=../shared/models/vocab
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=("$vocab/ggml-vocab-llama-spm.gguf" "$vocab/ggml-vocab-llama-bpe.gguf" "$vocab/ggml-vocab-qwen2.gguf")

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
src=../shared/reference/ppl-text-gpl3.txt
while [[ $(stat -c %s "$tmp/text.txt" 2>/dev/null || echo 0) -lt 1000000 ]]; do cat "$src" >> "$tmp/text.txt"; done
printf 'Hello' > "$tmp/small.txt"
bytes=$(stat -c %s "$tmp/text.txt")

seconds() {  # CPU seconds of one tokenize run; the ids go to $tmp/out.json
  /usr/bin/time -f '%U + %S' -o "$tmp/time" "$bin" tokenize --no-bos -m "$1" -f "$2" > "$tmp/out.json"
  bc -l < "$tmp/time"
}

printf '%-40s %10s %10s %8s %8s\n' model tokens "cpu(s)" "load(s)" "MB/s"
for m in "${models[@]}"; do
  load=$(seconds "$m" "$tmp/small.txt")
  total=$(seconds "$m" "$tmp/text.txt")
  tokens=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$tmp/out.json")
  work=$(echo "$total - $load" | bc -l)
  mbs=$(echo "$bytes / 1000000 / $work" | bc -l)
  printf '%-40s %10d %10.3f %8.3f %8.2f\n' "$(basename "$m")" "$tokens" "$work" "$load" "$mbs"
done
