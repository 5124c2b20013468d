#!/usr/bin/env bash
# Builds deskside with AddressSanitizer + UndefinedBehaviorSanitizer and runs every test:
# the libFuzzer target for a bounded time, the Catch2 unit tests (ctest), the model-file fuzzing,
# the short soak, then the Python suites (pytest). Exits non-zero on any failure. This is the
# README's test command and what CI runs.
#   FUZZ_SECONDS=60 (split between the fuzz targets; 0 skips fuzzing)
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --deps-only || exit 1
# The real models the tests use (cached after the first run), so that no test skips for want of one.
scripts/fetch-gemma3-270m.sh > /dev/null || exit 1
build=build-test
export CCACHE_BASEDIR="$PWD"
# One GPU architecture keeps the CUDA part of the build short (the device code is compiled, not run, here).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDESKSIDE_SANITIZE=ON -DDESKSIDE_CUDA_ARCHITECTURES=86 > /dev/null || exit 1
cmake --build "$build" -j"$(nproc)" 2>&1 | grep -E "error|warning|Error|Built target deskside" ; [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1

status=0
if [ "${FUZZ_SECONDS:-60}" -gt 0 ]; then
  scripts/fuzz.sh "${FUZZ_SECONDS:-60}" || status=1
fi

# The peer llama.cpp tools that the Catch2 quantizer tests and tests/py/test_quantize.py compare
# against (built once into ~/.cache/deskside/peer, then cached): before ctest, which needs them.
peer_log="$build/peer-build.log"
DESKSIDE_PEER_TARGETS="llama-quantize llama-completion" scripts/build-llama-cpp.sh --jobs "$(nproc)" > "$peer_log" 2>&1 \
  || { tail -n 40 "$peer_log"; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export DESKSIDE_SANITIZED=1  # tests that measure memory run their server without ASan's quarantine
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
[ "${CI:-}" != true ] || export DESKSIDE_REQUIRE_DEVICES="${DESKSIDE_REQUIRE_DEVICES:-vulkan0}"  # CI has lavapipe
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 1500) || status=1
scripts/fuzz-models.sh "$build" --quick || status=1  # broken model files through inspect/generate (~2 min)
DESKSIDE_BUILD="$PWD/$build" scripts/soak.sh --short || status=1  # 32 clients for 20 s under ASan (~30 s)

DESKSIDE_BUILD="$PWD/$build" .venv/bin/python -m pytest -q -p no:cacheprovider tests/py tests/api tests/security
rc=$?
# pytest exits 5 when it collected nothing: that is a failure of the suite, not a pass.
[ $rc -eq 0 ] || status=1
exit $status
