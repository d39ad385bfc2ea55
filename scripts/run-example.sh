#!/usr/bin/env bash
# The main job: builds Kiln, then compiles the bundled MLP example for the
# CPU and runs it, checking its output against PyTorch.
#
# Prints the imported kiln IR (weights elided), the bundle's signature and
# the check's result. The build's output goes to stderr. Honours
# KILN_BUILD_DIR and KILN_JOBS like scripts/build.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${KILN_BUILD_DIR:-build}
bin=$build_dir/bin

scripts/build.sh >&2

model=examples/mlp/mlp.onnx
bundle=$build_dir/examples/mlp.kiln
mkdir -p "$build_dir/examples"

echo "== kiln IR of $model (batch 8)"
"$bin/kilnc" "$model" --batch-size=8 --emit=kiln --elide-weights -o -

echo "== compiling for the CPU: $bundle"
"$bin/kilnc" "$model" --batch-size=8 --inference -o "$bundle"
"$bin/kiln-run" "$bundle" --info

echo "== running it"
/usr/bin/python3 examples/mlp/check.py "$bin/kiln-run" "$bundle" "$model" 8
