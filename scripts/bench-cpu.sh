#!/usr/bin/env bash
# deskside against llama.cpp on the CPU, in one run, on the same model files and thread count.
#
#   1. builds the llama.cpp peer (scripts/build-llama-cpp.sh; cached outside the repository),
#   2. writes the synthetic Llama model (scripts/make-synthetic-model.py, F16) and quantizes it with
#      llama-quantize to each type (cached in ~/.cache/deskside/bench),
#   3. measures the memory read bandwidth (scripts/membw.c, a C/OpenMP read test),
#   4. per type: `deskside bench` and `llama-bench`, same -p/-n/-r/-t,
#   5. prints pp and tg of both, the ratios deskside/llama.cpp, and the fraction of the memory
#      roofline each tg reaches: tg t/s x bytes read per token / read bandwidth, where the bytes
#      read per token are every weight except the token-embedding table (one row of it is read).
#
# usage: scripts/bench-cpu.sh [--deskside BIN] [--threads N] [--reps R] [-p 512] [-n 128]
#                             [--types "Q4_0 Q8_0 Q4_K_M"] [--layers 16]
# The machine's load (uptime) is printed before and after each measurement: on a shared machine
# the absolute numbers move with it, the ratios much less (both engines run back to back).
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
deskside="${DESKSIDE_BIN:-}"
threads="$(nproc)"
reps=5
n_prompt=512
n_gen=128
types="Q4_0 Q8_0 Q4_K_M"
layers=16
while [[ $# -gt 0 ]]; do
  case "$1" in
    --deskside) deskside="$2"; shift 2 ;;
    --threads|-t) threads="$2"; shift 2 ;;
    --reps|-r) reps="$2"; shift 2 ;;
    -p) n_prompt="$2"; shift 2 ;;
    -n) n_gen="$2"; shift 2 ;;
    --types) types="$2"; shift 2 ;;
    --layers) layers="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench-cpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$deskside" ]]; then
  for b in "$repo_root"/build/deskside "$repo_root"/build-*/deskside; do
    [[ -x "$b" ]] && { deskside="$b"; break; }
  done
fi
[[ -x "$deskside" ]] || { echo "bench-cpu.sh: no deskside binary; build it or pass --deskside BIN" >&2; exit 1; }
python="$repo_root/.venv/bin/python"
[[ -x "$python" ]] || python=python3

cache="${DESKSIDE_BENCH_DIR:-$HOME/.cache/deskside/bench}"
mkdir -p "$cache"
# Only the two peer tools this script runs (the server and completion tools are for other scripts).
peer_bin="$(DESKSIDE_PEER_TARGETS="${DESKSIDE_PEER_TARGETS:-llama-bench llama-quantize}" \
  "$repo_root/scripts/build-llama-cpp.sh" | tail -n 1)"

f16="$cache/synth-llama-${layers}l-f16.gguf"
if [[ ! -f "$f16" ]]; then
  echo "== writing $f16" >&2
  "$python" "$repo_root/scripts/make-synthetic-model.py" --layers "$layers" "$f16.tmp" >&2
  mv "$f16.tmp" "$f16"
fi
for t in $types; do
  q="$cache/synth-llama-${layers}l-$(echo "$t" | tr 'A-Z' 'a-z').gguf"
  if [[ ! -f "$q" ]]; then
    echo "== quantizing to $t" >&2
    "$peer_bin/llama-quantize" "$f16" "$q.tmp" "$t" "$threads" > "$cache/quantize-$t.log" 2>&1 ||
      { echo "bench-cpu.sh: llama-quantize failed, see $cache/quantize-$t.log" >&2; exit 1; }
    mv "$q.tmp" "$q"
  fi
done

membw="$cache/membw"
if [[ ! -x "$membw" || "$repo_root/scripts/membw.c" -nt "$membw" ]]; then
  cc -O3 -march=native -fopenmp "$repo_root/scripts/membw.c" -o "$membw"
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; load $(load)"
echo "== deskside: $deskside; llama.cpp: $peer_bin ($(basename "$(dirname "$peer_bin")"))"
read -r bw_wall bw_cpu < <("$membw" 1024 "$threads" 5 2>/dev/null)
echo "== memory read bandwidth (scripts/membw.c, 1 GiB, $threads threads): $bw_wall GB/s wall clock," \
     "$bw_cpu GB/s per CPU-second x threads; load $(load)"
echo "$bw_wall" > "$out/bw"

for t in $types; do
  lower="$(echo "$t" | tr 'A-Z' 'a-z')"
  q="$cache/synth-llama-${layers}l-$lower.gguf"
  echo "== $t: deskside bench (load $(load))" >&2
  "$deskside" bench -m "$q" -p "$n_prompt" -n "$n_gen" -r "$reps" -t "$threads" --json > "$out/deskside-$lower.json"
  echo "== $t: llama-bench (load $(load))" >&2
  "$peer_bin/llama-bench" -m "$q" -p "$n_prompt" -n "$n_gen" -r "$reps" -t "$threads" -o json \
    > "$out/llama-$lower.json" 2> "$out/llama-$lower.err" ||
    { cat "$out/llama-$lower.err" >&2; exit 1; }
  echo "$(load)" > "$out/load-$lower"
done

"$python" - "$out" "$types" "$layers" "$cache" <<'EOF'
import json, sys
from pathlib import Path
from gguf import GGUFReader

out, types, layers, cache = Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3], Path(sys.argv[4])
bw = float((out / "bw").read_text())
print(f"| type | test | deskside t/s | llama.cpp t/s | deskside/llama.cpp | roofline deskside | roofline llama.cpp | load after |")
print(f"| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
for t in types:
    lower = t.lower()
    path = cache / f"synth-llama-{layers}l-{lower}.gguf"
    tensors = GGUFReader(str(path)).tensors
    embd = next(x for x in tensors if x.name == "token_embd.weight")
    per_token = sum(int(x.n_bytes) for x in tensors) - int(embd.n_bytes) + int(embd.n_bytes) // int(embd.shape[1])
    ours = {r["test"]: r for r in json.loads((out / f"deskside-{lower}.json").read_text())}
    peer = {}
    for r in json.loads((out / f"llama-{lower}.json").read_text()):
        name = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
        peer[name] = r
    load = (out / f"load-{lower}").read_text().strip()
    for test in ours:
        a, b = ours[test], peer.get(test)
        ratio = f"{a['avg_ts'] / b['avg_ts']:.2f}x" if b else "-"
        roof = lambda r: f"{r['avg_ts'] * per_token / 1e9 / bw:.0%}" if test.startswith("tg") and r else ""
        peer_ts = f"{b['avg_ts']:.2f} ± {b['stddev_ts']:.2f}" if b else "-"
        print(f"| {t} | {test} | {a['avg_ts']:.2f} ± {a['stddev_ts']:.2f} | {peer_ts} | {ratio} | {roof(a)} | {roof(b)} | {load} |")
print(f"\nbytes read per generated token (weights less the embedding table) and bandwidth {bw} GB/s give the roofline column.")
EOF
echo "== done; load $(load)"
