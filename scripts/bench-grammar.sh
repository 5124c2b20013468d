#!/usr/bin/env bash
# Grammar-constrained sampling cost: grammar_tool bench times GrammarMatcher::apply() + accept() per
# token while it samples JSON documents (random logits, temperature 1) for a few schemas over the
# Qwen2 vocabulary (151,936 tokens), and prints mean / p50 / p99 microseconds per token, "cold"
# (each document on a fresh grammar: empty caches) and "warm" (documents sharing one grammar).
# Wall-clock times: run it on an idle machine (--clock cpu times the thread's CPU time instead, for
# a machine that is not idle). Not a test; numbers depend on the machine.
#
#   scripts/bench-grammar.sh [BUILD_DIR] [--docs N] [--clock wall|cpu] [VOCAB.gguf]
#   default BUILD_DIR: build-grammar (configured and built here when missing); default VOCAB: qwen2.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-grammar}"
shift || true
docs=5
clock=wall
if [[ "${1:-}" == "--docs" ]]; then docs="$2"; shift 2; fi
if [[ "${1:-}" == "--clock" ]]; then clock="$2"; shift 2; fi
vocab="${1:-../shared/models/vocab/ggml-vocab-qwen2.gguf}"

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDESKSIDE_CUDA=OFF > /dev/null
fi
cmake --build "$build" -j"$(nproc)" --target grammar_tool > /dev/null
"$build/tests/grammar_tool" bench "$vocab" --docs "$docs" --clock "$clock"

# llama.cpp's grammar sampler as a peer: scripts/build-llama-cpp.sh builds its tools into the peer
# cache, but none of them times the grammar alone, so there is nothing to put side by side yet.
peer="${DESKSIDE_PEER_DIR:-$HOME/.cache/deskside/peer}"
if ls "$peer"/build*/bin/llama-* > /dev/null 2>&1; then
  echo "llama.cpp is built in $peer, but has no grammar-only timing tool: no side-by-side figures"
else
  echo "llama.cpp is not built ($peer): no side-by-side figures (scripts/build-llama-cpp.sh builds it)"
fi
