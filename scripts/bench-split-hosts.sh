#!/usr/bin/env bash
# What one host boundary costs per token (--split-hosts, docs/DEPLOY.md "One model across hosts"):
# decode (tg) and prompt (pp) speed of one process against `mpirun -np 2 ... --split-hosts 1,1` on
# this machine, same model, same threads per rank, the ranks talking TCP over loopback (btl tcp).
#
# Per decoded token the boundary carries the residual stream forward (n_embd F32) and the logits
# back to rank 0 (n_vocab F32); the script prints both sizes, the per-token times and their
# difference: the hop's latency, as the compute is the same in both runs (each rank computes
# half the layers, one after the other).
#
# usage: scripts/bench-split-hosts.sh [--deskside BIN] [-m MODEL] [-n 128] [-p 128] [-r 5] [-t 1]
# On a shared machine the absolute numbers move with its load; run it twice.
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
deskside="${DESKSIDE_BIN:-$repo_root/build/deskside}"
model="$repo_root/../shared/models/stories260K-q8_0.gguf"
n_gen=128
n_prompt=128
reps=5
threads=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --deskside) deskside="$2"; shift 2 ;;
    -m|--model) model="$2"; shift 2 ;;
    -n) n_gen="$2"; shift 2 ;;
    -p) n_prompt="$2"; shift 2 ;;
    -r) reps="$2"; shift 2 ;;
    -t) threads="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || { echo "mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }

# Root in a container: Open MPI refuses it unless told; no core binding (the container's cores
# may not be what hwloc sees).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_hwloc_base_binding_policy=none

bench=("$deskside" bench -m "$model" -p "$n_prompt" -n "$n_gen" -r "$reps" -t "$threads" --json)
read -r n_embd n_vocab n_layer < <("$deskside" inspect "$model" --json |
  python3 -c 'import json,sys; h=json.load(sys.stdin)["hparams"]; print(h["n_embd"], h["n_vocab"], h["n_layer"])')

one="$("${bench[@]}" 2>/dev/null)"
two="$(mpirun -np 2 --oversubscribe --mca btl tcp,self "${bench[@]}" --split-hosts 1,1 2>/dev/null)"

python3 - "$one" "$two" "$n_embd" "$n_vocab" "$n_layer" "$model" <<'PY'
import json, sys
one, two = (json.loads(a) for a in sys.argv[1:3])
n_embd, n_vocab, n_layer = map(int, sys.argv[3:6])
print(f"model {sys.argv[6]}: {n_layer} layers, n_embd {n_embd}, n_vocab {n_vocab}")
print(f"bytes per decoded token across the boundary: {4 * n_embd} forward (hidden state, F32) + "
      f"{4 * n_vocab} back (logits, F32)")
print(f"{'test':8} {'1 process t/s':>14} {'2 ranks t/s':>12} {'1 process ms/t':>15} {'2 ranks ms/t':>13} {'hop ms/t':>9}")
for a, b in zip(one, two):
    ms_a, ms_b = 1000 / a["avg_ts"], 1000 / b["avg_ts"]
    print(f"{a['test']:8} {a['avg_ts']:14.1f} {b['avg_ts']:12.1f} {ms_a:15.4f} {ms_b:13.4f} {ms_b - ms_a:9.4f}")
PY
