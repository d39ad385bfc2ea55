#!/usr/bin/env bash
# Fetches (once) the headers of cuDNN's C++ frontend, which the CUDA
# runtime's cuDNN attention is built with, and prints their include
# directory on stdout; everything else goes to stderr.
#
# The frontend is header-only and not in Debian; NVIDIA publishes it on PyPI
# as nvidia-cudnn-frontend, whose wheel carries the headers (include/). Only
# the wheel is downloaded (nothing is installed): its include/ is unpacked
# into a cache outside the checkout, so clean clones share it. The version
# is pinned: the frontend's C++ API moves between releases.
#
# Environment:
#   KILN_CUDNN_FRONTEND_CACHE  where the headers live
#                              (default: ${XDG_CACHE_HOME:-~/.cache}/kiln)
set -euo pipefail

readonly VERSION=1.32.0
cache=${KILN_CUDNN_FRONTEND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}
dir="$cache/cudnn-frontend-$VERSION"

if [[ -f "$dir/include/cudnn_frontend.h" ]]; then
  echo "$dir/include"
  exit 0
fi

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Any pip will do for a download; the PyPI environment's is known to work.
python=$(scripts/pypi-venv.sh) || {
  echo "cudnn-frontend: error: no Python with pip (scripts/pypi-venv.sh failed)" >&2
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "cudnn-frontend: fetching nvidia-cudnn-frontend $VERSION's headers" >&2
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
  "nvidia-cudnn-frontend==$VERSION" -d "$work" >&2 || {
  echo "cudnn-frontend: error: could not download nvidia-cudnn-frontend==$VERSION from PyPI" >&2
  exit 1
}
wheel=$(ls "$work"/nvidia_cudnn_frontend-*.whl)
"$python" - "$wheel" "$work/unpacked" >&2 <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = [n for n in wheel.namelist() if n.startswith("include/")]
    if not any(n == "include/cudnn_frontend.h" for n in names):
        sys.exit("cudnn-frontend: error: the wheel has no include/cudnn_frontend.h")
    wheel.extractall(sys.argv[2], names)
PY
mkdir -p "$cache"
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
mv "$work/unpacked/include" "$dir.tmp/include"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "$dir/include"
