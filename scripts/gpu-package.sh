#!/usr/bin/env bash
# On a build machine: puts into DIR (default gpu-package/) everything
# scripts/gpu-check.sh needs on a GPU machine that cannot build Kiln (no
# LLVM/MLIR, no ONNX C++): the runtime and kiln-run, kiln-cuda-unittests, the
# parity check's prepared data and the benchmark's bundles; and DIR.tar.xz,
# the same compressed (the bundles' fixed parameters, such as GPT-2's causal
# mask, and code compress well), which is what to carry to the GPU machine.
# Fails if DIR.tar.xz would pass 60 MiB (what the device tool carries is 64
# MiB in all).
#
#   scripts/gpu-package.sh [DIR]
#
# DIR/
#   bin/            kiln-run and kiln-cuda-unittests: wrappers that put lib/
#                   and the GPU machine's CUDA libraries (env.sh) on
#                   LD_LIBRARY_PATH for the program in libexec/ alone
#   libexec/        the programs
#   lib/            libkilnrt.so, libkilnrt-cuda.so and the libraries they
#                   need that a GPU machine may lack (from ldd; not glibc,
#                   libstdc++, libgcc_s, zlib, nor CUDA's, which come from
#                   that machine)
#   env.sh          sourced by the wrappers: sets that LD_LIBRARY_PATH
#   data/           kernels.ptx, for kiln-cuda-unittests (KILN_TEST_PTX)
#   parity/         test/cuda/gpu-training-test.py prepare's directory (fp32,
#                   bf16, fp16 and data-parallel bundles of the test models,
#                   their references and data)
#   bench/          bench/gpu_train.py --package-prepare's directory: GPT-2
#                   small (bf16 and fp16) and BERT-base (bf16) bundles
#                   without weights, NAME-PRECISION.kiln, each model's
#                   data-parallel bundle in bf16 (NAME-bf16-dp.kiln) and
#                   its bundles with --cuda-attention=expanded, loops and
#                   cudnn and with --cuda-gelu-epilogue
#                   (NAME-bf16-expanded.kiln, NAME-bf16-loops.kiln,
#                   NAME-bf16-cudnn.kiln, NAME-bf16-gelu.kiln), their
#                   data and NAME.json (model config, batch, each bundle's
#                   precision and kilnc command); about 2 MiB a bundle
#   manifest.txt    the commit, the build and each part's size
#
# Environment:
#   KILN_BUILD_DIR    build directory, configured with CUDA (default: build)
#   KILN_NINJA        the build command, given the targets (default: ninja
#                     -C $KILN_BUILD_DIR)
#   KILN_PYTHON       the Python with PyTorch and onnx (default: the build's
#                     KILN_PYTHON, else python3)
#   KILN_BENCH_MODELS the benchmark's models and precisions (default
#                     gpt2:bf16+fp16,bert128,bert512; each model also gets a
#                     data-parallel, an expanded-attention, an
#                     attention-loops, a cuDNN-attention and a
#                     GELU-epilogue bundle in its first precision)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
readonly root=$PWD
readonly dir=${1:-gpu-package}
readonly build_dir=${KILN_BUILD_DIR:-build}
readonly limit_mib=60
start=$SECONDS

fail() {
  echo "gpu-package: $*" >&2
  exit 1
}

python=${KILN_PYTHON:-}
if [[ -z $python ]]; then
  python=$(sed -n 's/^KILN_PYTHON:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
  python=${python:-python3}
fi

echo "== building"
# shellcheck disable=SC2086
${KILN_NINJA:-ninja -C $build_dir} kilnc kiln-run kilnrt kilnrt-cuda kiln-cuda-unittests ||
  fail "the build failed (it needs a build directory configured with the CUDA toolkit: KILN_ENABLE_CUDA)"

rm -rf "$dir"
mkdir -p "$dir"/{bin,libexec,lib,data}
readonly pkg=$(cd "$dir" && pwd)

echo "== programs and libraries"
cp "$build_dir/bin/kiln-run" "$build_dir/bin/kiln-cuda-unittests" "$pkg/libexec/"
cp "$build_dir/lib/libkilnrt.so" "$build_dir/lib/libkilnrt-cuda.so" "$pkg/lib/"
cp test/runtime/kernels.ptx "$pkg/data/"

# Libraries every Linux GPU machine has (glibc, the C++ runtime, zlib) or
# that must come from the machine's own CUDA install and driver.
system_library() {
  [[ $1 =~ ^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libz|libcuda|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc)[.] ]]
}
while read -r name path; do
  system_library "$name" && continue
  [[ $name == libkilnrt* ]] && continue
  [[ $path == /* ]] || fail "ldd cannot resolve $name here"
  [[ -e $pkg/lib/$name ]] || cp -L "$path" "$pkg/lib/$name"
done < <(LD_LIBRARY_PATH=$build_dir/lib ldd "$pkg"/libexec/* "$pkg"/lib/libkilnrt*.so |
  awk '$2 == "=>" { print $1, $3 }' | sort -u)

cat >"$pkg/env.sh" <<'EOF'
# Sourced with KILN_PACKAGE set to this directory: puts its lib/ and the CUDA
# libraries of this machine (the toolkit's, the driver's, and cuDNN and NCCL
# from pip's nvidia packages, found through python3) on LD_LIBRARY_PATH. The
# result is kept in KILN_PACKAGE_LD_LIBRARY_PATH, so it is worked out once.
if [ -z "${KILN_PACKAGE_LD_LIBRARY_PATH:-}" ]; then
  KILN_PACKAGE_LD_LIBRARY_PATH=$KILN_PACKAGE/lib
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/local/nvidia/lib64; do
    [ -d "$d" ] && KILN_PACKAGE_LD_LIBRARY_PATH=$KILN_PACKAGE_LD_LIBRARY_PATH:$d
  done
  pip_dirs=$(${KILN_PYTHON:-python3} -c '
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
names = ("libcudnn.so.9", "libnccl.so.2", "libcublasLt.so.13", "libnvrtc.so.13",
         "libcudart.so.13")
print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__
                       for n in names for p in glob.glob(
                           os.path.join(d, "**", n), recursive=True)})))
' 2>/dev/null || true)
  [ -n "$pip_dirs" ] && KILN_PACKAGE_LD_LIBRARY_PATH=$KILN_PACKAGE_LD_LIBRARY_PATH:$pip_dirs
  export KILN_PACKAGE_LD_LIBRARY_PATH
fi
LD_LIBRARY_PATH=$KILN_PACKAGE_LD_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
EOF
for program in kiln-run kiln-cuda-unittests; do
  cat >"$pkg/bin/$program" <<EOF
#!/bin/sh
# $program from this package, with env.sh's LD_LIBRARY_PATH (for it alone).
KILN_PACKAGE=\$(cd "\$(dirname "\$0")/.." && pwd)
. "\$KILN_PACKAGE/env.sh"
export KILN_TEST_PTX=\${KILN_TEST_PTX:-\$KILN_PACKAGE/data/kernels.ptx}
exec "\$KILN_PACKAGE/libexec/$program" "\$@"
EOF
  chmod +x "$pkg/bin/$program"
done
"$pkg/bin/kiln-run" --help >/dev/null || fail "the packaged kiln-run does not start"

echo "== parity data (test/cuda/gpu-training-test.py prepare)"
"$python" test/cuda/gpu-training-test.py prepare --kilnc "$build_dir/bin/kilnc" \
  --kiln-run "$pkg/bin/kiln-run" --work-dir "$pkg/parity"

echo "== benchmark bundles (bench/gpu_train.py --package-prepare)"
"$python" bench/gpu_train.py --bin "$root/$build_dir/bin" \
  --models "${KILN_BENCH_MODELS:-gpt2:bf16+fp16,bert128,bert512}" --data-parallel \
  --expanded-attention --loops-attention --cudnn-attention --gelu-epilogue \
  --package-prepare "$pkg/bench"

size_of() { du -sb "$@" | awk '{ s += $1 } END { printf "%.2f MiB", s / 1048576 }'; }
total=$(du -sb "$pkg" | cut -f1)
{
  echo "Kiln GPU package, made by scripts/gpu-package.sh"
  echo "commit:  $(git rev-parse HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "made:    $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(($SECONDS - start)) s"
  echo "python:  $python (torch $("$python" -c 'import torch; print(torch.__version__)'))"
  echo
  echo "sizes:"
  for part in bin libexec lib data parity bench; do
    printf '  %-8s %s\n' "$part" "$(size_of "$pkg/$part")"
  done
  for file in "$pkg"/libexec/* "$pkg"/lib/* "$pkg"/parity/*.kiln "$pkg"/parity/fp16/*.kiln \
    "$pkg"/bench/*.kiln; do
    printf '    %-34s %s\n' "${file#"$pkg"/}" "$(size_of "$file")"
  done
  printf '  %-8s %.2f MiB (limit %d MiB)\n' total "$(echo "$total / 1048576" | bc -l)" "$limit_mib"
  echo
  echo "benchmark bundles (bench/NAME.json has the full config):"
  "$python" - "$pkg/bench" <<'EOF'
import json, os, sys
for name in ("gpt2", "bert128", "bert512"):
    path = os.path.join(sys.argv[1], name + ".json")
    if os.path.exists(path):
        c = json.load(open(path))
        print("  %-8s %s, batch %d, %.1fM parameters" % (
            name, c["arch"], c["batch"], c["params"] / 1e6))
        for bundles in c["bundles"].values():
            for b in bundles.values():
                print("    %-22s %s: %s" % (b["file"], b["precision"],
                                          b["kilnc_command"]))
EOF
} >"$pkg/manifest.txt"
cat "$pkg/manifest.txt"
archive=$pkg.tar.xz
rm -f "$archive"
tar -C "$(dirname "$pkg")" -cf - "$(basename "$pkg")" | xz -T0 -6 >"$archive" ||
  fail "could not write $archive"
packed=$(stat -c %s "$archive")
printf 'gpu-package: %s is %.2f MiB (the directory %.2f MiB)\n' "$dir.tar.xz" \
  "$(echo "$packed / 1048576" | bc -l)" "$(echo "$total / 1048576" | bc -l)"
if ((packed > limit_mib * 1048576)); then
  fail "$dir.tar.xz is $((packed / 1048576)) MiB, over the ${limit_mib} MiB limit (see the sizes above)"
fi
echo "gpu-package: $dir.tar.xz is ready; carry it to the GPU machine and run scripts/gpu-check.sh there"
