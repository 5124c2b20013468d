#!/usr/bin/env bash
# lm-evaluation-harness end to end against `deskside serve` (issue #4): for each model, starts the
# server on a free port, runs lm_eval's `local-completions` model on the local multiple-choice
# task tests/eval/deskside_stories_mc.yaml (log-likelihoods through /v1/completions with echo and
# logprobs), prints acc / acc_norm, stops the server. Exits non-zero when the harness fails, a
# score is missing, or a model scores below its floor.
#
# Nothing comes from a hub: the data is tests/eval/stories_mc.jsonl, and the harness tokenizes
# with the server's own tokenizer through its `remote` backend (GET /tokenizer_info, POST
# /tokenize and /detokenize in vLLM's shapes), so no Hugging Face tokenizer or torch is needed.
# The harness lives in its own venv, .venv-eval (pinned by scripts/requirements-eval.txt; lm_eval
# with its `api` extra, no torch).
#
# usage: scripts/eval-harness.sh [--deskside BIN] [--models "stories260K gemma3-270m"] [--limit N]
#   stories260K: ../shared/models/stories260K.gguf (DESKSIDE_SHARED), floor 0 (a 260K-parameter
#                toy: it only has to run); gemma3-270m: scripts/fetch-gemma3-270m.sh, floor 0.6.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
deskside="${DESKSIDE_BIN:-}"
models="stories260K gemma3-270m"
limit=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --deskside) deskside="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --limit) limit="--limit $2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "eval-harness.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$deskside" ]]; then
  for b in "$repo"/build/deskside "$repo"/build-*/deskside; do
    [[ -x "$b" ]] && { deskside="$b"; break; }
  done
fi
[[ -x "$deskside" ]] || { echo "eval-harness.sh: no deskside binary; build it or pass --deskside BIN" >&2; exit 1; }

venv="$repo/.venv-eval"
if [[ ! -x "$venv/bin/lm_eval" ]] || ! cmp -s scripts/requirements-eval.txt "$venv/requirements.installed"; then
  echo "== creating $venv (lm_eval, no torch)" >&2
  python3 -m venv "$venv"
  echo '*' > "$venv/.gitignore"
  "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/requirements-eval.txt >&2
  cp scripts/requirements-eval.txt "$venv/requirements.installed"
fi
py="$venv/bin/python"
# No hub, no telemetry: the task's data and the tokenizer are local.
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export HF_DATASETS_CACHE="${TMPDIR:-/tmp}/deskside-eval-datasets"

out="$(mktemp -d)"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

status=0
for name in $models; do
  case "$name" in
    stories260K) model="${DESKSIDE_SHARED:-$repo/../shared}/models/stories260K.gguf"; floor=0 ;;
    gemma3-270m) model="$("$repo/scripts/fetch-gemma3-270m.sh")"; floor=0.6 ;;
    *) echo "eval-harness.sh: unknown model '$name' (stories260K, gemma3-270m)" >&2; exit 2 ;;
  esac
  port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  log="$out/serve-$name.log"
  "$deskside" serve -m "$model" --alias "$name" --port "$port" --parallel 4 -c 1024 >"$log" 2>&1 &
  server_pid=$!
  url="http://127.0.0.1:$port"
  for _ in $(seq 600); do
    curl -sf "$url/health" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { echo "eval-harness.sh: deskside serve exited:" >&2; cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  echo "== $name: lm_eval local-completions on $url" >&2
  # tokenizer_backend=remote: the harness tokenizes through the server; tokenized_requests: it
  # sends token ids, so the context/continuation split is exact (no re-tokenization).
  # shellcheck disable=SC2086
  if ! "$venv/bin/lm_eval" --model local-completions \
      --model_args "model=$name,base_url=$url/v1/completions,tokenizer_backend=remote,tokenized_requests=True,num_concurrent=4,max_retries=1,timeout=600" \
      --include_path tests/eval --tasks deskside_stories_mc --batch_size 1 $limit \
      --output_path "$out/results-$name" >"$out/lm_eval-$name.log" 2>&1; then
    echo "eval-harness.sh: lm_eval failed on $name:" >&2
    tail -n 40 "$out/lm_eval-$name.log" >&2
    status=1
  else
    if ! "$py" - "$out/results-$name" "$name" "$floor" <<'PY'; then status=1; fi
import json, pathlib, sys
root, name, floor = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
files = sorted(root.rglob("results_*.json"))
if not files:
    sys.exit(f"eval-harness.sh: no results file under {root}")
r = json.loads(files[-1].read_text())["results"]["deskside_stories_mc"]
acc, acc_norm = r["acc,none"], r["acc_norm,none"]
print(f"{name}: deskside_stories_mc acc {acc:.4f} (+/- {r['acc_stderr,none']:.4f}), acc_norm {acc_norm:.4f}, floor {floor}")
if acc < floor:
    sys.exit(f"eval-harness.sh: {name} scored {acc:.4f}, below its floor {floor}")
PY
  fi
  kill "$server_pid"
  wait "$server_pid" || true
  server_pid=""
done
exit "$status"
