#!/usr/bin/env bash
# Compiles a fixed set of models with a kilnc and prints the SHA-256 of each
# bundle, one line per bundle. Refactorings that must not change what Kiln
# emits compare the output of the build before with the build after:
#
#   scripts/bundle-digests.sh old/bin/kilnc > before.txt
#   scripts/bundle-digests.sh build/bin/kilnc > after.txt
#   diff before.txt after.txt
#
# Bundles are byte-identical run to run on one machine (they hold code for
# its CPU, --cpu=host), so any difference is a change in what is emitted.
set -euo pipefail

kilnc=$(realpath "${1:?usage: bundle-digests.sh KILNC}")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# The test suite's models: Debian's PyTorch exports them.
for model in torch-mlp torch-cnn torch-gpt2 torch-bert opset23-llama-block; do
  PYTHONPATH="$root/test/lib" /usr/bin/python3 -m kiln_onnx_models "$model" "$model.onnx"
done

compile() {
  local name=$1
  shift
  if ! "$kilnc" "$@" --batch-size=4 -o "$name.kiln" 2>"$name.err"; then
    echo "bundle-digests: $name: kilnc failed:" >&2
    cat "$name.err" >&2
    exit 1
  fi
  echo "$(sha256sum < "$name.kiln" | cut -c1-64)  $name"
}

ce=(--loss=cross_entropy)
seq=(--loss=cross_entropy --loss-class-axis=-1)
compile mlp-inference torch-mlp.onnx --inference
compile mlp-adamw torch-mlp.onnx "${ce[@]}" --optimizer=adamw --lr=1e-3
compile cnn-sgd torch-cnn.onnx "${ce[@]}" --optimizer=sgd --momentum=0.9
compile gpt2-adamw torch-gpt2.onnx "${seq[@]}" --optimizer=adamw --grad-clip=1
compile gpt2-emulated-bf16 torch-gpt2.onnx "${seq[@]}" --optimizer=adamw --emulate-cuda --amp=bf16
compile bert-adamw torch-bert.onnx --dim sequence=16 "${seq[@]}" --optimizer=adamw --weight-decay=0.01
compile bert-emulated torch-bert.onnx --dim sequence=16 "${seq[@]}" --optimizer=adamw --emulate-cuda
compile gpt2-gradients torch-gpt2.onnx "${seq[@]}" --inference --gradients
compile llama-inference opset23-llama-block.onnx --inference
compile mlp-data-parallel torch-mlp.onnx "${ce[@]}" --optimizer=adamw --data-parallel
# The CUDA target, where this kilnc was built with the toolkit.
if "$kilnc" torch-mlp.onnx --batch-size=4 "${ce[@]}" --optimizer=adamw --target=cuda -o cuda-probe.kiln 2>/dev/null; then
  compile gpt2-cuda-bf16 torch-gpt2.onnx "${seq[@]}" --optimizer=adamw --target=cuda --amp=bf16
  compile bert-cuda-fp16 torch-bert.onnx --dim sequence=16 "${seq[@]}" --optimizer=adamw --target=cuda --amp=fp16
fi
