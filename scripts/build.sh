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

# With a CUDA toolkit, cuDNN's frontend headers (from PyPI) for the CUDA
# runtime's cuDNN attention; without them that runtime refuses it.
frontend=()
if [[ -d ${CUDAToolkit_ROOT:-/usr/local/cuda} ]]; then
  if include=$(scripts/cudnn-frontend.sh); then
    frontend=("-DKILN_CUDNN_FRONTEND_INCLUDE_DIR=$include")
  else
    echo "build: warning: no cuDNN frontend headers; the CUDA runtime will" \
         "refuse attention on cuDNN" >&2
  fi
fi

if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -S . -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 \
    -DCMAKE_CXX_COMPILER=clang++-22 \
    "${frontend[@]}"
fi

ninja -C "$build_dir" -j "${KILN_JOBS:-$(nproc)}"
