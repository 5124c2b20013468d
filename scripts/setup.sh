#!/usr/bin/env bash
# Installs what deskside needs from Debian's packages (only what is missing), creates the Python
# virtual environment for tests and scripts (.venv, pinned by scripts/requirements.txt), and
# builds deskside (Release, ccache when present) into build/.
#
#   scripts/setup.sh               deps + venv + Release build in build/
#   scripts/setup.sh --deps-only   deps + venv, no build
#   BUILD_DIR=... CMAKE_ARGS="..." scripts/setup.sh   another build folder / extra cmake flags
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config ccache git clang
  nlohmann-json3-dev libcpp-httplib-dev libsentencepiece-dev catch2 libpcre2-dev libcurl4-openssl-dev
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools
  python3 python3-venv python3-pip tmux time bc
  haproxy
  openmpi-bin libopenmpi-dev iproute2
  chromium chromium-driver)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ] || ! cmp -s scripts/requirements.txt .venv/requirements.installed; then
  echo "setup: Python environment in .venv"
  python3 -m venv --clear .venv  # --clear: never mix two interpreters in one venv
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
  cp scripts/requirements.txt .venv/requirements.installed
fi

[ "${1:-}" = "--deps-only" ] && exit 0

build="${BUILD_DIR:-build}"
# shellcheck disable=SC2086
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} > /dev/null
cmake --build "$build" -j"$(nproc)"
echo "setup: built $build/deskside"
