#!/usr/bin/env bash
# The main job: builds Kiln, then compiles the bundled MLP example for the
# CPU, trains it (SGD with momentum) on a synthetic classification set, and
# runs its forward pass, checking the output against PyTorch.
#
# Prints the imported kiln IR (weights elided), the bundles' signatures, the
# training loss and the check's result. The build's output goes to stderr. Honours
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

train_bundle=$build_dir/examples/mlp_train.kiln
data=$build_dir/examples/mlp_data.npz
echo "== compiling the training step (SGD, lr 0.1, momentum 0.9): $train_bundle"
"$bin/kilnc" examples/mlp/mlp_train.onnx --batch-size=32 --optimizer=sgd \
  --lr=0.1 --momentum=0.9 -o "$train_bundle"
"$bin/kiln-run" "$train_bundle" --info
/usr/bin/python3 examples/mlp/make_data.py "$data"
echo "== training on $data (1024 samples, batch 32, 10 epochs)"
"$bin/kiln-run" "$train_bundle" --data "$data" --steps 320 --log-every 32
