#!/usr/bin/env bash
# Installs the dependencies, configures the build directory once and builds Kiln.
#
# Environment:
#   KILN_BUILD_DIR  build directory, relative to the repository root (default: build)
#   KILN_JOBS       parallel build jobs (default: nproc)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${KILN_BUILD_DIR:-build}

scripts/install-deps.sh

if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -S . -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 \
    -DCMAKE_CXX_COMPILER=clang++-22
fi

ninja -C "$build_dir" -j "${KILN_JOBS:-$(nproc)}"
