#!/usr/bin/env bash
# Builds deskside with the CUDA backend here and packs what scripts/gpu-check.sh needs on an NVIDIA
# machine that has no Debian packages and no network (docs/CUDA.md): the binaries, the shared
# libraries they need beyond the C/C++ runtime and the NVIDIA driver, the check's Python scripts,
# the bandwidth probe (scripts/gpu/bandwidth.cu, built with nvcc) and as many of the small test
# models and llama.cpp references from ../shared as fit the size limit, most useful first.
#
# usage: scripts/gpu-bundle.sh OUT_DIR        (OUT_DIR git-ignored and inside the checkout, e.g. .gpu-bundle)
#
# Environment:
#   CUDA_ARCHS=90          CMAKE_CUDA_ARCHITECTURES of the build and of the bandwidth probe (H200/H100: 90)
#   BUILD_DIR=build-gpu    the build directory (Release, DESKSIDE_CUDA=ON, DESKSIDE_TESTS=ON)
#   DESKSIDE_CUDA=ON       OFF packs a bundle without the CUDA backend: to try the packing and
#                          `DEVICE=cpu|vulkan0 scripts/gpu-check.sh` on a machine without the CUDA build
#   ALLOW_NO_TESTS=0       1 packs the bundle even when deskside_tests does not build (the check then
#                          skips the steps that need it)
#   BUNDLE_LIMIT_MIB=60    the bundle's size limit; the working tree that travels with it is held under
#                          TREE_LIMIT_MIB=62 (the device tool refuses trees over 64 MiB)
#   SHARED_DIR=../shared   where the models and references come from
#   JOBS=$(nproc)          build parallelism
#
# Layout of OUT_DIR: run (wrapper: `OUT_DIR/run NAME ARGS...` runs bin/NAME with lib/ on
# LD_LIBRARY_PATH), deskside and deskside_tests (wrappers around run), payload.tar.xz (bin/ and lib/,
# xz-compressed: binaries and libraries shrink about 3x; run unpacks it once into /tmp), scripts/,
# shared/{models,reference,templates}/ (the layout of ../shared, for DESKSIDE_SHARED_DIR), manifest.json.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
[[ $# -eq 1 && "$1" != -* ]] || { sed -n '2,27p' "$0"; exit 2; }
cuda_archs="${CUDA_ARCHS:-90}"
build="${BUILD_DIR:-build-gpu}"
[[ "$build" = /* ]] || build="$repo/$build"
cuda="${DESKSIDE_CUDA:-ON}"
allow_no_tests="${ALLOW_NO_TESTS:-0}"
limit_mib="${BUNDLE_LIMIT_MIB:-60}"
tree_limit_mib="${TREE_LIMIT_MIB:-62}"
shared="${SHARED_DIR:-$repo/../shared}"
jobs="${JOBS:-$(nproc)}"

die() { echo "gpu-bundle: error: $*" >&2; exit 1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }
bytes_of() { du -sb --apparent-size "$@" | awk '{ s += $1 } END { print s + 0 }'; }

# ---- OUT_DIR must travel (inside the checkout) and must not be committed (git-ignored) -------------
out="$(realpath -m "$1")"
case "$out/" in
  "$repo/"*) rel="${out#"$repo"/}" ;;
  *) die "$out is outside the checkout $repo: the device tool sends only the checkout (use e.g. $repo/.gpu-bundle)" ;;
esac
[[ "$out" != "$repo" ]] || die "OUT_DIR must be a folder inside the checkout, not the checkout itself"
if ! git -C "$repo" check-ignore -q -- "$rel/run"; then
  die "$rel/ is not git-ignored; add it to .git/info/exclude first (local, never committed):
    echo '/$rel/' >> $repo/.git/info/exclude"
fi
mkdir -p "$out"
if [[ -n "$(ls -A "$out")" && ! -f "$out/.deskside-gpu-bundle" ]]; then
  die "$out is not empty and is not a bundle this script made; refusing to delete its contents"
fi
[[ -d "$shared/models" && -d "$shared/reference" ]] || die "no models/ and reference/ under $shared (set SHARED_DIR)"

# ---- build ---------------------------------------------------------------------------------------
cmake_args=(-S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDESKSIDE_CUDA="$cuda" -DDESKSIDE_TESTS=ON)
if [[ "$cuda" == ON ]]; then
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=$cuda_archs")
  if ! command -v nvcc > /dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    cmake_args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  fi
fi
echo "gpu-bundle: configuring $build (DESKSIDE_CUDA=$cuda, CUDA architectures $cuda_archs)"
mkdir -p "$build"
if ! cmake "${cmake_args[@]}" > "$build/configure.log" 2>&1; then
  cat "$build/configure.log" >&2
  die "cmake configure failed"
fi
echo "gpu-bundle: building deskside ($jobs jobs)"
cmake --build "$build" -j"$jobs" --target deskside || die "deskside did not build"
have_tests=1
echo "gpu-bundle: building deskside_tests"
if ! cmake --build "$build" -j"$jobs" --target deskside_tests; then
  [[ "$allow_no_tests" == 1 ]] || die "deskside_tests did not build (ALLOW_NO_TESTS=1 packs the bundle without it)"
  echo "gpu-bundle: WARNING: deskside_tests did not build; packing without it (ALLOW_NO_TESTS=1)" >&2
  have_tests=0
fi

# ---- stage bin/ and lib/ ---------------------------------------------------------------------------
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib/fallback"
cp "$build/deskside" "$stage/bin/"
if [[ "$have_tests" == 1 ]]; then cp "$build/tests/deskside_tests" "$stage/bin/"; fi

nvcc_bin="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
if [[ -x "$nvcc_bin" ]]; then
  gencode=()
  last=""
  for a in ${cuda_archs//;/ }; do
    a="${a%-real}"; a="${a%-virtual}"
    gencode+=(-gencode "arch=compute_$a,code=sm_$a")
    last="$a"
  done
  gencode+=(-gencode "arch=compute_$last,code=compute_$last")  # PTX of the newest, for later chips
  echo "gpu-bundle: nvcc scripts/gpu/bandwidth.cu"
  "$nvcc_bin" -O3 -std=c++17 "${gencode[@]}" -o "$stage/bin/bandwidth" "$repo/scripts/gpu/bandwidth.cu" ||
    die "nvcc could not build scripts/gpu/bandwidth.cu"
else
  echo "gpu-bundle: WARNING: no nvcc; the bundle has no bandwidth probe (the check skips that step)" >&2
fi

# Libraries: everything ldd names except the C runtime (glibc's libraries, libstdc++, libgcc_s),
# which every Linux with PyTorch has in a newer, backward-compatible version, the NVIDIA driver
# (libcuda, libnvidia-*), which must match the kernel module there, and the CUDA toolkit's large
# libraries (cuBLAS), which the CUDA 13 toolkit there provides and run adds to the search path.
# The rest (cpp-httplib, sentencepiece, PCRE2, libcurl and its TLS/compression stack, the Vulkan
# loader) is absent from a bare CUDA image or present there in another version; bundled, the
# binaries find the versions they were linked against.
system_re='^(linux-vdso|ld-linux|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl'
system_re+='|libstdc\+\+|libgcc_s|libcuda|libnvidia-)[.-]'
skipped_libs=()
declare -A seen=()
for exe in "$stage"/bin/*; do
  if ldd "$exe" | grep -q 'not found'; then
    ldd "$exe" | grep 'not found' >&2
    die "$(basename "$exe") needs libraries that are not installed here"
  fi
  while read -r name path; do
    [[ -n "$path" && -z "${seen[$name]:-}" ]] || continue
    seen[$name]=1
    [[ "$name" =~ $system_re ]] && continue
    size="$(stat -L -c %s "$path")"
    if [[ "$path" == /usr/local/cuda* && "$size" -gt $((8 << 20)) ]]; then
      skipped_libs+=("$name ($(mib "$size"), CUDA toolkit: expected on the device)")
      continue
    fi
    cp -L "$path" "$stage/lib/$name"
  done < <(ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
done
# The NVIDIA Vulkan driver (libGLX_nvidia) needs glvnd's dispatch library; run adds lib/fallback
# to the search path only where the machine lacks it, so a system copy always wins.
glvnd="$(ldconfig -p | awk '$1 == "libGLdispatch.so.0" && /x86-64/ { print $NF; exit }')"
if [[ -n "$glvnd" ]]; then cp -L "$glvnd" "$stage/lib/fallback/libGLdispatch.so.0"; fi
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* "$stage"/lib/fallback/* 2> /dev/null || true

# ---- OUT_DIR ---------------------------------------------------------------------------------------
find "$out" -mindepth 1 -delete
touch "$out/.deskside-gpu-bundle"
echo "gpu-bundle: compressing bin/ and lib/"
(cd "$stage" && tar -cf - bin lib | xz -9e -T"$jobs" > "$out/payload.tar.xz")

cat > "$out/run" << 'EOF'
#!/bin/sh
# usage: BUNDLE/run NAME [ARGS...]: runs the bundle's bin/NAME with the bundle's libraries, then
# the CUDA toolkit's, before the system's. The first call unpacks payload.tar.xz into
# ${DESKSIDE_BUNDLE_CACHE:-/tmp}/deskside-bundle-CHECKSUM. DESKSIDE_BUNDLE_LDD=1 runs ldd on bin/NAME
# instead, with the same search path (which libraries resolve, which are missing).
set -e
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 NAME [ARGS...] (NAME: deskside, deskside_tests, bandwidth)" >&2; exit 2; }
name=$1
shift
sum=$(cksum < "$here/payload.tar.xz" | cut -d' ' -f1)
root=${DESKSIDE_BUNDLE_CACHE:-/tmp}/deskside-bundle-$sum
if [ ! -f "$root/.complete" ]; then
  mkdir -p "$root.tmp.$$"
  if command -v xz > /dev/null; then
    xz -dc "$here/payload.tar.xz" | tar -xf - -C "$root.tmp.$$"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
      "$here/payload.tar.xz" "$root.tmp.$$"
  fi
  touch "$root.tmp.$$/.complete"
  mv -T "$root.tmp.$$" "$root" 2> /dev/null || rm -rf "$root.tmp.$$"  # another call won the race
fi
[ -x "$root/bin/$name" ] || { echo "$0: no bin/$name in this bundle" >&2; exit 127; }
path=$root/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && path=$path:$d
done
ldconfig -p 2> /dev/null | grep -q 'libGLdispatch\.so\.0 ' || path=$path:$root/lib/fallback
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ "${DESKSIDE_BUNDLE_LDD:-}" = 1 ] && exec ldd "$root/bin/$name"
exec "$root/bin/$name" "$@"
EOF
for exe in deskside deskside_tests; do
  # shellcheck disable=SC2016  # $0 and $@ belong to the wrapper
  printf '#!/bin/sh\nexec "$(dirname "$0")/run" %s "$@"\n' "$exe" > "$out/$exe"
done
chmod +x "$out/run" "$out/deskside" "$out/deskside_tests"

mkdir -p "$out/scripts/gpu" "$out/shared/models" "$out/shared/reference" "$out/shared/templates"
cp "$repo"/scripts/gpu/*.py "$out/scripts/gpu/"
cp "$repo/scripts/make-llama8b-shaped.py" "$out/scripts/"
cp "$shared/templates/Qwen-Qwen2.5-7B-Instruct.jinja" "$out/shared/templates/"  # ChatML, for serve
[[ -f "$shared/reference/prompts-stories.txt" ]] && cp "$shared/reference/prompts-stories.txt" "$out/shared/reference/"
# llama.cpp's own spread per file: the reference checks read their bar from it.
cp "$shared/reference/SPREAD.md" "$out/shared/reference/"

# ---- models and references, most useful first, while they fit -------------------------------------
# stories260K (F32, a real trained model) first: greedy placements and serve use it. Then one file of
# each weight type family and architecture (the newer families' MoE, sinks and fused tensors too),
# the low-bit i-quants and TQ2_0, then the files whose bars the first GPU run missed, then the rest
# of the reference set, the F32 synthetic files (13-22 MB each) last.
priority=(
  stories260K stories260K-q8_0 stories260K-q4_0
  synth-k-q4_k_m synth-k-q8_0 synth-k-q6_k synth-qwen2-q4_k_m synth-gemma3-q4_k_m
  synth-qwen3-q4_k_m synth-qwen3moe-q4_k_m synth-phi3-q4_k_m synth-gptoss-q4_k_m synth-gptoss-mxfp4_moe
  synth-k-iq1_s synth-k-iq1_m synth-k-iq2_xxs synth-k-iq2_xs synth-k-iq2_s synth-k-iq3_xxs synth-k-iq3_s synth-k-tq2_0
  synth-k-q5_k_m synth-k-iq4_nl synth-qwen2-q8_0 synth-qwen2-q6_k
  stories260K-f16 stories260K-bf16 stories260K-q4_1 stories260K-q5_0 stories260K-q5_1
  synth-k-q4_k_s synth-k-q3_k_m synth-k-q2_k synth-k-iq4_xs
  synth-qwen3-q8_0 synth-qwen3moe-q8_0 synth-phi3-q8_0
  synth-gemma3-q8_0 synth-gemma3-q6_k
  synth-k
  synth-qwen2 synth-gemma3
)
tree_bytes="$(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 -r stat -c %s 2> /dev/null |
  awk '{ s += $1 } END { print s + 0 }')"
budget=$((limit_mib << 20))
tree_room=$(((tree_limit_mib << 20) - tree_bytes))
((tree_room < budget)) && budget=$tree_room
included=()
skipped=()
used="$(bytes_of "$out")"
for stem in "${priority[@]}"; do
  files=("$shared/models/$stem.gguf" "$shared/reference/$stem.json" "$shared/reference/$stem.logits.f32")
  missing=0
  for f in "${files[@]}"; do [[ -f "$f" ]] || missing=1; done
  if ((missing)); then skipped+=("$stem (not in $shared)"); continue; fi
  size="$(bytes_of "${files[@]}")"
  if ((used + size > budget)); then skipped+=("$stem ($(mib "$size"): over the limit)"); continue; fi
  cp "${files[0]}" "$out/shared/models/"
  cp "${files[1]}" "${files[2]}" "$out/shared/reference/"
  used=$((used + size))
  included+=("$stem")
done
[[ " ${included[*]} " == *" stories260K "* ]] || die "not even stories260K fits in the bundle's limit"

# ---- manifest and sizes ------------------------------------------------------------------------------
commit="$(git -C "$repo" rev-parse --short HEAD 2> /dev/null || echo unknown)"
dirty="$(git -C "$repo" status --porcelain 2> /dev/null | grep -qv '^??' && echo true || echo false)"
nvcc_version="$([[ -x "$nvcc_bin" ]] && "$nvcc_bin" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo none)"
python3 - "$out" "$commit" "$dirty" "$cuda" "$cuda_archs" "$nvcc_version" "$have_tests" \
  "${included[*]}" "$(printf '%s\n' "${skipped_libs[@]}")" << 'EOF'
import json, os, sys, time
out, commit, dirty, cuda, archs, nvcc, have_tests, models, skipped_libs = sys.argv[1:]
json.dump({"commit": commit, "dirty": dirty == "true", "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "deskside_cuda": cuda, "cuda_archs": archs, "nvcc": nvcc, "deskside_tests": have_tests == "1",
           "bandwidth_probe": nvcc != "none", "models": models.split(), "libraries_expected_on_device":
           [s for s in skipped_libs.splitlines() if s]},
          open(os.path.join(out, "manifest.json"), "w"), indent=2)
EOF

echo
echo "gpu-bundle: $out"
printf '  %-34s %12s\n' "payload.tar.xz (bin/ + lib/)" "$(mib "$(bytes_of "$out/payload.tar.xz")")"
printf '  %-34s %12s\n' "  of which unpacked: bin/" "$(mib "$(bytes_of "$stage/bin")")"
for f in "$stage"/bin/*; do printf '  %-34s %12s\n' "    $(basename "$f")" "$(mib "$(bytes_of "$f")")"; done
n_libs="$(find "$stage/lib" -type f | wc -l)"
printf '  %-34s %12s\n' "  of which unpacked: lib/ ($n_libs files)" "$(mib "$(bytes_of "$stage/lib")")"
printf '  %-34s %12s\n' "scripts/" "$(mib "$(bytes_of "$out/scripts")")"
printf '  %-34s %12s\n' "shared/models/ (${#included[@]} models)" "$(mib "$(bytes_of "$out/shared/models")")"
printf '  %-34s %12s\n' "shared/reference/" "$(mib "$(bytes_of "$out/shared/reference")")"
total="$(bytes_of "$out")"
printf '  %-34s %12s   (limit %d MiB)\n' "bundle total" "$(mib "$total")" "$limit_mib"
printf '  %-34s %12s   (limit %d MiB)\n' "with the working tree" "$(mib $((total + tree_bytes)))" "$tree_limit_mib"
for s in "${skipped_libs[@]}"; do echo "  library left out: $s"; done
echo "  models: ${included[*]}"
for s in "${skipped[@]}"; do echo "  model left out: $s"; done
((total <= limit_mib << 20)) || die "the bundle is $(mib "$total"), over BUNDLE_LIMIT_MIB=$limit_mib"
((total + tree_bytes <= tree_limit_mib << 20)) ||
  die "bundle + working tree is $(mib $((total + tree_bytes))), over TREE_LIMIT_MIB=$tree_limit_mib"
echo "gpu-bundle: ok. On the device: bash scripts/gpu-check.sh $rel \$OUT   (carry: [\"$rel\"])"
