#!/usr/bin/env bash
# Serving benchmark (issue #4): deskside serve against llama.cpp's llama-server, same model file,
# same slot count, same threads, same requests. For each C in --clients: C concurrent clients x R
# streamed requests each, fixed prompt length (token ids, a different first token per request so
# nothing is reused) and fixed output length (max_tokens with ignore_eos, which both servers take).
# Prints, per C, aggregate generated tokens/s and time-to-first-token p50/p99 for both, and the
# ratios deskside / llama.cpp (tokens/s: higher is better; TTFT: lower is better).
# The client is scripts/bench-server.py (.venv). The machine's load is printed before each run.
#
# usage: scripts/bench-server.sh [--deskside BIN] [--peer-bin DIR] [-m MODEL] [--clients "1 4 8"]
#                                [--requests R] [--prompt P] [--gen N] [--threads T] [--slots S]
#                                [--no-peer]  (deskside only, e.g. while the peer is still building)
#   defaults: gemma3-270m (scripts/fetch-gemma3-270m.sh), clients "1 4 8", R 4, P 128, N 128,
#   T nproc, S the largest C. The peer: DESKSIDE_PEER_BIN or scripts/build-llama-cpp.sh's bin dir.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
deskside="${DESKSIDE_BIN:-}"
peer_bin="${DESKSIDE_PEER_BIN:-}"
model=""
clients="1 4 8"
reqs=4
n_prompt=128
n_gen=128
threads="$(nproc)"
slots=""
peer=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --deskside) deskside="$2"; shift 2 ;;
    --peer-bin) peer_bin="$2"; shift 2 ;;
    -m|--model) model="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --requests|-r) reqs="$2"; shift 2 ;;
    --prompt|-p) n_prompt="$2"; shift 2 ;;
    --gen|-n) n_gen="$2"; shift 2 ;;
    --threads|-t) threads="$2"; shift 2 ;;
    --slots) slots="$2"; shift 2 ;;
    --no-peer) peer=0; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "bench-server.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$deskside" ]]; then
  for b in "$repo"/build/deskside "$repo"/build-*/deskside; do
    [[ -x "$b" ]] && { deskside="$b"; break; }
  done
fi
[[ -x "$deskside" ]] || { echo "bench-server.sh: no deskside binary; build it or pass --deskside BIN" >&2; exit 1; }
if [[ "$peer" == 1 ]]; then
  [[ -n "$peer_bin" ]] || peer_bin="$("$repo/scripts/build-llama-cpp.sh" | tail -n 1)"
  [[ -x "$peer_bin/llama-server" ]] || { echo "bench-server.sh: no llama-server in $peer_bin (or pass --no-peer)" >&2; exit 1; }
fi
[[ -n "$model" ]] || model="$("$repo/scripts/fetch-gemma3-270m.sh")"
[[ -n "$slots" ]] || slots="$(printf '%s\n' $clients | sort -n | tail -n 1)"
python="$repo/.venv/bin/python"
[[ -x "$python" ]] || python=python3
ctx=$(( (n_prompt + n_gen + 64 + 15) / 16 * 16 ))  # positions per slot

# The model's vocabulary size and BOS id, from the file (the client draws prompt ids below it).
read -r vocab bos < <("$deskside" inspect --json "$model" | "$python" -c '
import json, sys
t = json.load(sys.stdin)["tokenizer"]
print(t["n_vocab"], t["bos"] if t["add_bos"] and t["bos"] is not None else "-")')

out="$(mktemp -d)"
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT

free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_health() {  # url log
  for _ in $(seq 1200); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "bench-server.sh: the server exited:" >&2; tail -n 30 "$2" >&2; exit 1; }
    sleep 0.1
  done
  echo "bench-server.sh: $1 did not become healthy" >&2; exit 1
}

run_all() {  # label
  local label="$1" url="$2" c
  for c in $clients; do
    echo "== $label C=$c: $(uptime | sed 's/.*load/load/')" >&2
    bos_arg=()
    [[ "$bos" != "-" ]] && bos_arg=(--bos "$bos")
    "$python" "$repo/scripts/bench-server.py" --url "$url" --model bench --clients "$c" --requests "$reqs" \
      --prompt-tokens "$n_prompt" --max-tokens "$n_gen" --vocab "$vocab" "${bos_arg[@]}" --label "$label" \
      | tee -a "$out/results.jsonl"
  done
}

echo "== model $model, slots $slots, threads $threads, prompt $n_prompt, gen $n_gen, $reqs requests per client" >&2
port="$(free_port)"
"$deskside" serve -m "$model" --alias bench --port "$port" --parallel "$slots" -c "$ctx" -t "$threads" \
  >"$out/deskside.log" 2>&1 &
pid=$!
wait_health "http://127.0.0.1:$port" "$out/deskside.log"
run_all deskside "http://127.0.0.1:$port"
kill "$pid"; wait "$pid" || true; pid=""

if [[ "$peer" == 1 ]]; then
  port="$(free_port)"
  # llama-server's -c is the context of all slots together; -np splits it.
  "$peer_bin/llama-server" -m "$model" --alias bench --port "$port" -np "$slots" -c $((ctx * slots)) -t "$threads" \
    -tb "$threads" --no-webui >"$out/llama-server.log" 2>&1 &
  pid=$!
  wait_health "http://127.0.0.1:$port" "$out/llama-server.log"
  run_all llama.cpp "http://127.0.0.1:$port"
  kill "$pid"; wait "$pid" || true; pid=""
fi

"$python" - "$out/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["label"], r["clients"]): r for r in rows}
print("| clients | deskside tok/s | llama.cpp tok/s | ratio | deskside TTFT p50 / p99 ms | llama.cpp TTFT p50 / p99 ms | TTFT p50 ratio |")
print("|---|---|---|---|---|---|---|")
for c in sorted({r["clients"] for r in rows}):
    d, l = by.get(("deskside", c)), by.get(("llama.cpp", c))
    if not l:  # --no-peer
        print(f"| {c} | {d['tokens_per_s']:.1f} | - | - | {d['ttft_p50_ms']:.0f} / {d['ttft_p99_ms']:.0f} | - | - |")
        continue
    print(f"| {c} | {d['tokens_per_s']:.1f} | {l['tokens_per_s']:.1f} | {d['tokens_per_s'] / l['tokens_per_s']:.2f}x | "
          f"{d['ttft_p50_ms']:.0f} / {d['ttft_p99_ms']:.0f} | {l['ttft_p50_ms']:.0f} / {l['ttft_p99_ms']:.0f} | "
          f"{d['ttft_p50_ms'] / l['ttft_p50_ms']:.2f}x |")
PY
