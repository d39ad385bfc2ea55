#!/usr/bin/env bash
# Installs every Debian package Kiln's build and tests need; idempotent.
#
# Only packages that are missing are installed, and `apt-get update` runs only
# when something is missing, so a second run is a quick no-op.
set -euo pipefail

readonly PACKAGES=(
  cmake ninja-build ccache pkg-config dpkg-dev debootstrap
  clang-22 libclang-rt-22-dev lld-22 clang-format-22
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  python3-onnx python3-numpy python3-torch
  libopenblas-dev libopenmpi-dev openmpi-bin libomp-22-dev
  libgtest-dev libzip-dev zlib1g-dev
)

die() {
  echo "install-deps: error: $*" >&2
  exit 1
}

is_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

command -v dpkg-query >/dev/null 2>&1 ||
  die "dpkg-query not found; this script supports Debian 12 (bookworm) and derivatives"

missing=()
for pkg in "${PACKAGES[@]}"; do
  is_installed "$pkg" || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 ||
    die "not root and sudo is not available; install as root: apt-get install ${missing[*]}"
  sudo_cmd=(sudo)
fi

echo "install-deps: installing ${#missing[@]} missing package(s): ${missing[*]}"
"${sudo_cmd[@]}" apt-get update ||
  die "'apt-get update' failed; check the apt sources and the network (the LLVM/MLIR 22 packages must be available)"
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}" ||
  die "'apt-get install' failed for: ${missing[*]}"

for pkg in "${missing[@]}"; do
  is_installed "$pkg" || die "package '$pkg' is still not installed after apt-get"
done
echo "install-deps: done"
