#!/usr/bin/env bash
# Builds Kiln and imports the bundled MLP example, printing its kiln IR.
#
# The build's output goes to stderr, so stdout holds only the IR. Extra
# arguments go to kilnc. Honours KILN_BUILD_DIR and KILN_JOBS like
# scripts/build.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${KILN_BUILD_DIR:-build}

scripts/build.sh >&2
exec "$build_dir/bin/kilnc" examples/mlp/mlp.onnx --batch-size=8 --emit=kiln -o - "$@"
