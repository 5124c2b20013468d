#!/usr/bin/env bash
# Builds llama.cpp's CPU tools (llama-bench, llama-quantize, llama-server, llama-completion,
# llama-batched-bench) as a benchmark PEER for scripts/bench-cpu.sh, scripts/bench-server.sh and
# `deskside bench -npl`. llama.cpp is never a dependency of deskside: nothing in
# the repository links to it, and everything lives in the cache outside the repository.
#
# Source: the llama-cpp-python source distribution on PyPI, which vendors llama.cpp under
# vendor/llama.cpp. Idempotent: the download, the unpacked tree and the build are reused when present.
#
# usage: scripts/build-llama-cpp.sh [--jobs N] [--variant native|avx512]
#   env DESKSIDE_PEER_DIR (default ~/.cache/deskside/peer), DESKSIDE_PEER_TARGETS (space-separated)
#   --variant native (default): -DGGML_NATIVE=ON, what a user building it locally gets.
#   --variant avx512: -DGGML_NATIVE=OFF with AVX2/FMA/F16C and AVX-512 F/VBMI/VNNI/BF16, no AMX
#     (the configuration ../shared/reference/SPREAD.md made the references with), into its own
#     build directory; for CPUs where the native build's AMX path crashes.
# prints the bin directory on its last line.
set -euo pipefail

jobs=2
variant=native
while [[ $# -gt 0 ]]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --variant) variant="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "build-llama-cpp.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
peer_dir="${DESKSIDE_PEER_DIR:-$HOME/.cache/deskside/peer}"
# Only what the benchmark needs; bench and quantize first, since they are the ones bench-cpu.sh uses.
targets="${DESKSIDE_PEER_TARGETS:-llama-bench llama-quantize llama-server llama-completion llama-batched-bench}"
python="${repo_root}/.venv/bin/python"
[[ -x "$python" ]] || python=python3
mkdir -p "$peer_dir"

sdist="$(ls "$peer_dir"/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1 || true)"
if [[ -z "$sdist" ]]; then
  echo "== downloading the llama-cpp-python sdist into $peer_dir" >&2
  (cd "$peer_dir" && "$python" -m pip download -q --no-deps --no-binary :all: -d . llama-cpp-python)
  sdist="$(ls "$peer_dir"/llama_cpp_python-*.tar.gz | sort -V | tail -n 1)"
fi
version="$(basename "$sdist" .tar.gz)"
src="$peer_dir/src/$version/vendor/llama.cpp"
if [[ ! -f "$src/CMakeLists.txt" ]]; then
  echo "== unpacking $sdist" >&2
  mkdir -p "$peer_dir/src"
  tar xzf "$sdist" -C "$peer_dir/src"
fi
[[ -f "$src/CMakeLists.txt" ]] || { echo "build-llama-cpp.sh: $sdist has no vendor/llama.cpp" >&2; exit 1; }

case "$variant" in
  native) build="$peer_dir/build-$version"; isa_flags=(-DGGML_NATIVE=ON) ;;
  avx512) build="$peer_dir/build-$version-avx512"
          isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
                     -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON) ;;
  *) echo "build-llama-cpp.sh: --variant is native or avx512, not '$variant'" >&2; exit 2 ;;
esac
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  echo "== configuring $build" >&2
  # CPU only, tuned for this machine (GGML_NATIVE) like a user building it locally would, or the
  # AVX-512 variant above; no network access at build time (no prebuilt web UI, no curl/openssl),
  # no tests or examples.
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release "${isa_flags[@]}" -DBUILD_SHARED_LIBS=OFF \
    -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF >&2
fi
for t in $targets; do
  if [[ -x "$build/bin/$t" ]]; then
    # Let make decide whether anything changed; cheap when up to date.
    cmake --build "$build" -j "$jobs" --target "$t" >&2
  else
    echo "== building $t" >&2
    cmake --build "$build" -j "$jobs" --target "$t" >&2 || {
      # llama-completion only exists in newer trees; everything else is required.
      if [[ "$t" == llama-completion ]]; then echo "(skipping $t)" >&2; else exit 1; fi
    }
  fi
done
echo "$build/bin"
