#!/usr/bin/env bash
# deskside against llama.cpp on the CPU, in one run, on the same model files and thread count.
#
#   1. builds the llama.cpp peer (scripts/build-llama-cpp.sh; cached outside the repository): the
#      native build, and on an AVX-512 CPU also the AVX-512 build without AMX (--variant avx512),
#   2. writes the synthetic Llama model (scripts/make-synthetic-model.py, F16) and quantizes it with
#      llama-quantize to each type (cached in ~/.cache/deskside/bench); by default with enough
#      layers that the smallest file reads at least twice the last-level cache lscpu reports per
#      token, so that decode measures memory, not cache,
#   3. measures the memory read bandwidth (scripts/membw.c, a C/OpenMP read test),
#   4. per type: `deskside bench` and `llama-bench`, same -p/-n/-r/-t; llama.cpp runs pp and tg
#      separately in each of its configurations (native; native with --repack 0; the AVX-512
#      build where the CPU has AVX-512), and each test takes the fastest one that completes (the
#      native build's AMX path crashes on some Xeons); the output names it,
#   5. prints the ISA level deskside's kernels run at and the CPU's AMX state, a table of pp and tg
#      of both, and one line per type: `tg128 x<ratio>`, `pp512 x<ratio>` and the share of the
#      read bandwidth each engine's tg reaches (tg t/s x bytes read per token / bandwidth, where the
#      bytes read per token are every weight except the token-embedding table, one row of which
#      is read).
#
# usage: scripts/bench-cpu.sh [--deskside BIN] [--threads N] [--reps R] [-p 512] [-n 128]
#                             [--types "Q4_0 Q4_K_M Q8_0 IQ4_XS"] [--layers N (default: auto)]
#                             [--peer-configs "native norepack avx512"]
# The machine's load (uptime) is printed before and after each measurement: on a shared machine
# the absolute numbers move with it, the ratios much less (both engines run back to back).
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
deskside="${DESKSIDE_BIN:-}"
threads="$(nproc)"
reps=5
n_prompt=512
n_gen=128
types="Q4_0 Q4_K_M Q8_0 IQ4_XS"
layers=auto
peer_configs="native norepack avx512"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --deskside) deskside="$2"; shift 2 ;;
    --threads|-t) threads="$2"; shift 2 ;;
    --reps|-r) reps="$2"; shift 2 ;;
    -p) n_prompt="$2"; shift 2 ;;
    -n) n_gen="$2"; shift 2 ;;
    --types) types="$2"; shift 2 ;;
    --layers) layers="$2"; shift 2 ;;
    --peer-configs) peer_configs="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "bench-cpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for config in $peer_configs; do
  case "$config" in
    native|norepack|avx512) ;;
    *) echo "bench-cpu.sh: unknown peer configuration '$config' (native, norepack, avx512)" >&2; exit 2 ;;
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
has_flag() { grep -m1 '^flags' /proc/cpuinfo | grep -qw "$1"; }
# Only the two peer tools this script runs (the server and completion tools are for other scripts).
peer_bin="$(DESKSIDE_PEER_TARGETS="${DESKSIDE_PEER_TARGETS:-llama-bench llama-quantize}" \
  "$repo_root/scripts/build-llama-cpp.sh" | tail -n 1)"
peer_avx512_bin=""
if [[ " $peer_configs " == *" avx512 "* ]] && has_flag avx512f; then
  peer_avx512_bin="$(DESKSIDE_PEER_TARGETS=llama-bench "$repo_root/scripts/build-llama-cpp.sh" --variant avx512 | tail -n 1)"
fi

# The last-level cache as lscpu reports it (all instances), and enough layers that the smallest
# file (IQ4_XS, 4.25 bits per weight) reads twice that per token: at TinyLlama-1.1B's widths a
# layer holds 44.0 M weights and the output matrix 65.5 M.
llc_bytes="$(lscpu -B -C=ALL-SIZE,LEVEL 2>/dev/null | awk 'NR > 1 && $2 > lvl { lvl = $2; size = $1 } END { print size + 0 }')"
if [[ "$layers" == auto ]]; then
  per_layer=$((44040192 * 425 / 800))
  output=$((65536000 * 425 / 800))
  layers=$(( (2 * llc_bytes - output + per_layer - 1) / per_layer ))
  (( layers >= 16 )) || layers=16
fi

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
echo "== deskside: $deskside; llama.cpp: $peer_bin${peer_avx512_bin:+ and $peer_avx512_bin}"
isa="$("$deskside" env --json 2>/dev/null | "$python" -c 'import json, sys; print(json.load(sys.stdin)["isa"])' || echo unknown)"
amx="the CPU has no AMX"
if has_flag amx_tile; then
  amx="the CPU has AMX ($(grep -m1 '^flags' /proc/cpuinfo | grep -ow 'amx_[a-z0-9]*' | xargs)): deskside does not use it yet, llama.cpp's native build does"
fi
echo "== deskside's kernels at ISA level $isa (DESKSIDE_CPU_ISA=${DESKSIDE_CPU_ISA:-unset}); $amx"
echo "== last-level cache $((llc_bytes / 1048576)) MiB (lscpu); the model has $layers layers"
read -r bw_wall bw_cpu < <("$membw" 1024 "$threads" 5 2>/dev/null)
echo "== memory read bandwidth (scripts/membw.c, 1 GiB, $threads threads): $bw_wall GB/s wall clock," \
     "$bw_cpu GB/s per CPU-second x threads; load $(load)"
echo "$bw_wall" > "$out/bw"

# One llama-bench test (pp or tg) in one configuration; a crash is reported, not fatal.
peer_run() {  # CONFIG TYPE_LOWER pp|tg MODEL
  local config="$1" lower="$2" test="$3" q="$4" bin="$peer_bin" extra=() args=()
  case "$config" in
    norepack) extra=(--repack 0) ;;
    avx512) [[ -n "$peer_avx512_bin" ]] || return 0; bin="$peer_avx512_bin" ;;
  esac
  if [[ "$test" == pp ]]; then args=(-p "$n_prompt" -n 0); else args=(-p 0 -n "$n_gen"); fi
  echo "== $lower: llama-bench $test, $config (load $(load))" >&2
  local rc=0
  "$bin/llama-bench" -m "$q" "${args[@]}" -r "$reps" -t "$threads" "${extra[@]}" -o json \
    > "$out/llama-$lower-$test-$config.json" 2> "$out/llama-$lower-$test-$config.err" || rc=$?
  if (( rc != 0 )); then
    echo "   llama-bench $test ($config) failed, exit $rc: $(tail -n 1 "$out/llama-$lower-$test-$config.err")" >&2
    rm -f "$out/llama-$lower-$test-$config.json"
  fi
}

for t in $types; do
  lower="$(echo "$t" | tr 'A-Z' 'a-z')"
  q="$cache/synth-llama-${layers}l-$lower.gguf"
  echo "== $t: deskside bench (load $(load))" >&2
  "$deskside" bench -m "$q" -p "$n_prompt" -n "$n_gen" -r "$reps" -t "$threads" --json > "$out/deskside-$lower.json"
  for config in $peer_configs; do
    for test in pp tg; do peer_run "$config" "$lower" "$test" "$q"; done
  done
  echo "$(load)" > "$out/load-$lower"
done

"$python" - "$out" "$types" "$layers" "$cache" "$peer_configs" <<'EOF'
import json, sys
from pathlib import Path
from gguf import GGUFReader

out, types, layers, cache, configs = Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3], Path(sys.argv[4]), sys.argv[5].split()
names = {"native": "native", "norepack": "native --repack 0", "avx512": "AVX-512 build"}
bw = float((out / "bw").read_text())
print("| type | test | deskside t/s | llama.cpp t/s (its configuration) | deskside/llama.cpp | roofline deskside | roofline llama.cpp | load after |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
summary = []
for t in types:
    lower = t.lower()
    path = cache / f"synth-llama-{layers}l-{lower}.gguf"
    tensors = GGUFReader(str(path)).tensors
    embd = next(x for x in tensors if x.name == "token_embd.weight")
    per_token = sum(int(x.n_bytes) for x in tensors) - int(embd.n_bytes) + int(embd.n_bytes) // int(embd.shape[1])
    ours = {r["test"]: r for r in json.loads((out / f"deskside-{lower}.json").read_text())}
    # The fastest configuration that completed, per test; every one tried is listed.
    peer, tried = {}, {}
    for config in configs:
        for test in ("pp", "tg"):
            f = out / f"llama-{lower}-{test}-{config}.json"
            if not f.exists():
                continue
            for r in json.loads(f.read_text()):
                name = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
                tried.setdefault(name, []).append(f"{names[config]} {r['avg_ts']:.2f}")
                if name not in peer or r["avg_ts"] > peer[name][0]["avg_ts"]:
                    peer[name] = (r, names[config])
    load = (out / f"load-{lower}").read_text().strip()
    line = [f"{t}:"]
    for test in ours:
        a = ours[test]
        b, config = peer.get(test, (None, None))
        ratio = f"{a['avg_ts'] / b['avg_ts']:.2f}" if b else "-"
        roof = lambda r: f"{r['avg_ts'] * per_token / 1e9 / bw:.0%}" if test.startswith("tg") and r else ""
        peer_ts = f"{b['avg_ts']:.2f} ± {b['stddev_ts']:.2f} ({config})" if b else "- (no configuration completed)"
        print(f"| {t} | {test} | {a['avg_ts']:.2f} ± {a['stddev_ts']:.2f} | {peer_ts} | {ratio}x | {roof(a)} | {roof(b)} | {load} |")
        line.append(f"{test} x{ratio}" + (f" (llama.cpp {config})" if b else " (llama.cpp did not complete)"))
        if test.startswith("tg"):
            line.append(f"{roof(a)} of read bandwidth (llama.cpp {roof(b) or '-'})")
    summary.append(" ".join(line))
    for test, runs in tried.items():
        summary.append(f"    llama.cpp {test} t/s by configuration: " + ", ".join(runs))
print(f"\nbytes read per generated token (weights less the embedding table) and bandwidth {bw} GB/s give the roofline column.\n")
print("\n".join(summary))
EOF
echo "== done; load $(load)"
