#!/usr/bin/env bash
# On a GPU machine: runs Kiln's GPU checks and the GPU training benchmark,
# and prints a summary; exit 1 if any step fails.
#
#   scripts/gpu-check.sh [--package DIR|ARCHIVE] [--allow-no-gpu]
#
# Package mode, when DIR (default gpu-package/, made on a build machine by
# scripts/gpu-package.sh) or its archive (default gpu-package.tar.xz, which
# is what travels; unpacked into a temporary directory) exists: builds
# nothing. Runs the packaged
# kiln-cuda-unittests (NCCL's all-reduce tests among them), the training
# parity check (test/cuda/gpu-training-test.py check on the packaged data:
# fp32, bf16, fp16 and data-parallel bundles) and bench/gpu_train.py
# --package on the packaged bundles (bf16, GPT-2 small also in fp16, and the
# data-parallel bundles on one rank); needs python3 with PyTorch and NumPy.
# The packaged programs find the package's libraries, the CUDA toolkit's
# (/usr/local/cuda/lib64, targets/x86_64-linux/lib), the driver's and pip's
# nvidia cuDNN and NCCL through LD_LIBRARY_PATH set by their wrappers
# (DIR/env.sh); this script's other processes keep the machine's own.
# Logs: nvidia-smi.txt, libraries.txt (that path and ldd's view), unittests.log,
# parity.log (and parity/), bench.log, gpu_train.json, profile-*.txt,
# summary.txt.
#
# Build mode, without a package: builds Kiln with CUDA, runs the
# cuda-labelled tests and the benchmark (the same models, precisions and
# data-parallel sides). Installs nothing (a GPU machine may have no network):
# a missing build dependency is reported by name. Logs: nvidia-smi.txt,
# build.log, ctest.log, bench.log, gpu_train.json, profile-*.txt and
# summary.txt.
#
# The benchmark also profiles each row's Kiln bundle (gpu_train.py
# --profile: a few steps under KILN_CUDA_PROFILE, to profile-MODEL-PREC.txt),
# and the summary has a `profile` line per profile: the step's time on the
# stream and by kind of command, and its longest kernel or gemm shape; and a
# `model` line beside it: kilnc's cost model (--report=cost, compiled with
# every bundle) for this GPU, measured / predicted ms for the step and for
# each kind of command.
#
# The summary has a line per step, and the fp16 and data-parallel results
# apart: parity-fp16 and parity-dp (the parity check's `result fp16:` and
# `result data-parallel:` lines), bench-fp16 and bench-dp (the benchmark's,
# from gpu_train.json). On a GPU machine a skipped or unmeasured one counts as
# failed.
#
# Logs go to $OUT when it is set, else to ./gpu-check-logs. --allow-no-gpu
# carries on without a GPU, to try the script on another machine: the GPU
# steps then report that they skipped or failed, and the script still exits 1.
#
# Environment:
#   KILN_BUILD_DIR        build directory (default: build); an existing one is
#                         reused (reconfigured with CUDA on if it was off)
#   KILN_NO_BUILD=1       use the build directory as it is (prebuilt binaries)
#   KILN_JOBS             parallel build jobs (default: nproc)
#   KILN_PYTHON           the Python with PyTorch (default: python3 on PATH)
#   KILN_GPU_CHECK_SECONDS  the whole script's time (default 480); the
#                         benchmark gets what the build and tests leave
#   KILN_BENCH_ARGS       extra arguments for bench/gpu_train.py
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
readonly start=$SECONDS
package=
allow_no_gpu=
while [[ $# -gt 0 ]]; do
  case $1 in
  --package) package=${2:?--package needs a directory}; shift 2 ;;
  --allow-no-gpu) allow_no_gpu=1; shift ;;
  *) echo "usage: $0 [--package DIR] [--allow-no-gpu]" >&2; exit 2 ;;
  esac
done
if [[ -z $package && -d gpu-package ]]; then
  package=gpu-package
elif [[ -z $package && -f gpu-package.tar.xz ]]; then
  package=gpu-package.tar.xz
fi
readonly budget=${KILN_GPU_CHECK_SECONDS:-480}
readonly build_dir=${KILN_BUILD_DIR:-build}
readonly logs=${OUT:-gpu-check-logs}
readonly python=${KILN_PYTHON:-$(command -v python3 || echo python3)}
mkdir -p "$logs"

summary=()
failed=0
record() { # record STEP STATUS DETAIL [TIME]
  summary+=("$(printf '%-11s %-7s %5s  %s' "$1" "$2" "${4:-$((SECONDS - step_start))s}" "$3")")
  [[ $2 == FAILED ]] && failed=1
}
# record_result STEP TEXT: the text after `result GROUP: ` of the parity
# check or the benchmark as its own summary line; anything but ok (a skip,
# nothing measured, no such line) is a failure on a GPU machine.
record_result() {
  local detail=${2#ok}
  detail=${detail#; }
  case $2 in
  ok*) record "$1" ok "${detail# }" - ;;
  "") record "$1" FAILED "no result line (the step skipped or stopped; see its log)" - ;;
  *) record "$1" FAILED "${2#FAILED; }" - ;;
  esac
}
# result_of GROUP FILE: the text of FILE's first `result GROUP: ` line (in
# ctest -V's log, after the test's number).
result_of() {
  sed -n "s/^\([0-9]*: \)\{0,1\}result $1: //p" "$2" 2>/dev/null | head -n1
}
# bench_result GROUP: the benchmark's result line for GROUP, from
# gpu_train.json (written after every model, so it is there even when the
# benchmark was stopped).
bench_result() {
  "$python" - "$logs/gpu_train.json" "$1" 2>/dev/null <<'PY'
import json, sys
prefix = "result %s: " % sys.argv[2]
for line in json.load(open(sys.argv[1])).get("result_lines", []):
    if line.startswith(prefix):
        print(line[len(prefix):])
PY
}
# record_profiles: a summary line per profile the benchmark took (--profile,
# its profile_lines in gpu_train.json); none at all is a failure.
record_profiles() {
  local line found=
  while IFS= read -r line; do
    found=1
    case $line in
    *": FAILED: "*) record profile FAILED "$line" - ;;
    *) record profile ok "$line" - ;;
    esac
  done < <("$python" -c 'import json, sys
for line in json.load(open(sys.argv[1])).get("profile_lines", []):
    print(line)' "$logs/gpu_train.json" 2>/dev/null)
  [[ -n $found ]] || record profile FAILED "no profile (the benchmark stopped or ran out of time first; see bench.log)" -
  # The cost model (kilnc --report=cost) beside each profile: a line each,
  # never a failure (the model is a prediction, not a check).
  while IFS= read -r line; do
    record model - "$line" -
  done < <("$python" -c 'import json, sys
for line in json.load(open(sys.argv[1])).get("model_lines", []):
    print(line)' "$logs/gpu_train.json" 2>/dev/null)
}
finish() {
  {
    echo "gpu-check summary ($((SECONDS - start)) s of ${budget} s; logs in $logs)"
    printf '%s\n' "${summary[@]}"
  } | tee "$logs/summary.txt"
  exit "$failed"
}

# --- the GPU ---------------------------------------------------------------
step_start=$SECONDS
if nvidia-smi >"$logs/nvidia-smi.txt" 2>&1 && nvidia-smi -L >>"$logs/nvidia-smi.txt" 2>&1 &&
  grep -q '^GPU ' "$logs/nvidia-smi.txt"; then
  record gpu ok "$(grep -m1 '^GPU ' "$logs/nvidia-smi.txt")"
elif [[ -n $allow_no_gpu ]]; then
  record gpu FAILED "nvidia-smi finds no GPU (see nvidia-smi.txt); carrying on (--allow-no-gpu)"
else
  record gpu FAILED "nvidia-smi finds no GPU (see nvidia-smi.txt); this script is for a GPU machine"
  finish
fi

# Runs the benchmark with what is left of the budget; $@: its arguments.
run_bench() {
  step_start=$SECONDS
  local left=$((budget - (SECONDS - start)))
  if [[ $left -lt 60 ]]; then
    record bench FAILED "only ${left} s of ${budget} s left; not started (raise KILN_GPU_CHECK_SECONDS)"
    finish
  fi
  # Whatever happens, the script ends inside its budget: the benchmark skips
  # the models it has no time for (--time-budget) and is stopped 20 s before
  # the end.
  rm -f "$logs/gpu_train.json"
  # shellcheck disable=SC2086
  timeout --kill-after=10 "$((left - 20))" env PYTHONUNBUFFERED=1 "$python" bench/gpu_train.py \
    "$@" --out "$logs" --seconds 5 --steps 20 --profile \
    --time-budget "$((left - 110))" ${KILN_BENCH_ARGS:-} >"$logs/bench.log" 2>&1
  local status=$?
  if [[ $status -eq 0 ]]; then
    record bench ok "results in gpu_train.json and bench.log"
  elif [[ $status -eq 124 || $status -eq 137 ]]; then
    record bench FAILED "stopped after $((left - 20)) s (see bench.log)"
  else
    record bench FAILED "exit $status: $(grep -m1 -E 'FAILED|WRONG|rror' "$logs/bench.log" || tail -n1 "$logs/bench.log")"
  fi
  record_result bench-fp16 "$(bench_result fp16)"
  record_result bench-dp "$(bench_result data-parallel)"
  record_profiles
  echo
  sed -n '/^model /,/^wrote /p' "$logs/bench.log"
  echo
}

# --- package mode ------------------------------------------------------------
if [[ -n $package ]]; then
  step_start=$SECONDS
  if [[ -f $package ]]; then
    # The archive gpu-package.sh wrote: unpacked next to the logs' parent,
    # into a directory of its own.
    unpacked=$(mktemp -d "${TMPDIR:-/tmp}/kiln-gpu-package.XXXXXX")
    if ! tar -C "$unpacked" -xJf "$package" >"$logs/unpack.log" 2>&1; then
      record package FAILED "cannot unpack $package: $(tail -n1 "$logs/unpack.log") (tar with xz)"
      finish
    fi
    package=$(find "$unpacked" -mindepth 1 -maxdepth 1 -type d | head -n1)
  fi
  pkg=$(cd "$package" 2>/dev/null && pwd)
  if [[ -z $pkg || ! -x $pkg/bin/kiln-run || ! -f $pkg/parity/parity.json ]]; then
    record package FAILED "$package is not a package from scripts/gpu-package.sh (no bin/kiln-run or parity/parity.json)"
    finish
  fi
  # The wrappers' library path, worked out once here and shown in the log.
  KILN_PACKAGE_LD_LIBRARY_PATH=$(KILN_PACKAGE=$pkg KILN_PYTHON=$python &&
    . "$pkg/env.sh" && echo "$KILN_PACKAGE_LD_LIBRARY_PATH")
  export KILN_PACKAGE_LD_LIBRARY_PATH
  {
    sed -n '1,3p' "$pkg/manifest.txt"
    echo "LD_LIBRARY_PATH of the packaged programs: $KILN_PACKAGE_LD_LIBRARY_PATH"
    for file in "$pkg"/libexec/kiln-run "$pkg"/lib/libkilnrt-cuda.so; do
      echo "ldd $file:"
      LD_LIBRARY_PATH=$KILN_PACKAGE_LD_LIBRARY_PATH ldd "$file"
    done
  } >"$logs/libraries.txt" 2>&1
  missing=$(grep 'not found' "$logs/libraries.txt" | awk '{print $1}' | sort -u | paste -sd' ')
  if [[ -n $missing ]]; then
    record libs FAILED "not found: $missing (see libraries.txt)"
  else
    record libs ok "$(sed -n 's/^commit: *//p' "$pkg/manifest.txt")"
  fi

  step_start=$SECONDS
  timeout 180 "$pkg/bin/kiln-cuda-unittests" >"$logs/unittests.log" 2>&1
  status=$?
  passed=$(grep -m1 -E '^\[  PASSED  \]' "$logs/unittests.log")
  skipped=$(grep -c -E '^\[  SKIPPED \]' "$logs/unittests.log")
  if [[ $status -ne 0 ]]; then
    record unittests FAILED "exit $status: $(grep -m1 -E 'FAILED|Failure|error' "$logs/unittests.log" || tail -n1 "$logs/unittests.log")"
  elif [[ $skipped -gt 0 ]]; then
    record unittests FAILED "${passed:-no PASSED line}; $skipped skipped: $(grep -m1 -o 'no CUDA here: .*' "$logs/unittests.log")"
  else
    record unittests ok "$passed"
  fi

  step_start=$SECONDS
  timeout 240 "$python" test/cuda/gpu-training-test.py check \
    --kiln-run "$pkg/bin/kiln-run" --work-dir "$pkg/parity" \
    --out "$logs/parity" >"$logs/parity.log" 2>&1
  status=$?
  if [[ $status -eq 0 ]]; then
    record parity ok "$(tail -n1 "$logs/parity.log")"
  elif [[ $status -eq 77 ]]; then
    record parity FAILED "$(grep -m1 SKIPPED "$logs/parity.log")"
  else
    record parity FAILED "exit $status: $(grep -m1 -E 'FAIL|rror' "$logs/parity.log" || tail -n1 "$logs/parity.log") (see parity.log)"
  fi
  record_result parity-fp16 "$(result_of fp16 "$logs/parity.log")"
  record_result parity-dp "$(result_of data-parallel "$logs/parity.log")"

  run_bench --package "$pkg/bench" --bin "$pkg/bin"
  finish
fi

# --- build -------------------------------------------------------------------
step_start=$SECONDS
missing_dependencies() {
  local missing=()
  command -v cmake >/dev/null || missing+=("cmake")
  command -v ninja >/dev/null || missing+=("ninja")
  command -v protoc >/dev/null || missing+=("protoc (protobuf-compiler)")
  [[ -x /usr/local/cuda/bin/ptxas ]] || command -v ptxas >/dev/null ||
    missing+=("the CUDA toolkit (ptxas)")
  ls /usr/lib/llvm-22/lib/cmake/mlir/MLIRConfig.cmake >/dev/null 2>&1 ||
    compgen -G "/usr/lib*/cmake/mlir/MLIRConfig.cmake" >/dev/null ||
    missing+=("MLIR 22 (libmlir-22-dev, llvm-22-dev)")
  compgen -G "/usr/lib/*/cmake/ONNX/ONNXConfig.cmake" >/dev/null ||
    compgen -G "/usr/lib*/cmake/ONNX/ONNXConfig.cmake" >/dev/null ||
    missing+=("ONNX (libonnx-dev)")
  printf '%s\n' "${missing[@]}"
}

build() {
  if [[ -n ${KILN_NO_BUILD:-} ]]; then
    for tool in kilnc kiln-run; do
      [[ -x $build_dir/bin/$tool ]] || { echo "KILN_NO_BUILD: $build_dir/bin/$tool is missing"; return 1; }
    done
    echo "KILN_NO_BUILD: using $build_dir as it is"
    return 0
  fi
  local configure=()
  if [[ ! -f $build_dir/build.ninja ]]; then
    local missing
    missing=$(missing_dependencies)
    if [[ -n $missing ]]; then
      echo "cannot build here: missing $(echo "$missing" | paste -sd, | sed 's/,/, /g')"
      echo "(scripts/install-deps.sh installs them on Debian 12; this script installs nothing)"
      return 1
    fi
    configure=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
    if command -v clang++-22 >/dev/null; then
      configure+=(-DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22)
    fi
  elif ! grep -q '^KILN_ENABLE_CUDA:STRING=ON' "$build_dir/CMakeCache.txt"; then
    configure=(-DKILN_ENABLE_CUDA=ON)
  fi
  if [[ ${#configure[@]} -gt 0 ]]; then
    cmake -S . -B "$build_dir" "${configure[@]}" -DKILN_ENABLE_CUDA=ON \
      -DKILN_PYTHON="$python" || return 1
  fi
  ninja -C "$build_dir" -j "${KILN_JOBS:-$(nproc)}" kilnc kiln-run kilnrt-cuda kiln-cuda-unittests
}

if build >"$logs/build.log" 2>&1; then
  record build ok "$build_dir ($(tail -n1 "$logs/build.log"))"
else
  record build FAILED "$(grep -m1 -E 'cannot build here|error|Error|KILN_NO_BUILD' "$logs/build.log" || tail -n1 "$logs/build.log")"
  finish
fi

# --- cuda-labelled tests -----------------------------------------------------
step_start=$SECONDS
# -V: the parity test's result lines go to the log too.
ctest --test-dir "$build_dir" -L cuda -V --timeout 300 >"$logs/ctest.log" 2>&1
ctest_status=$?
tests_line=$(grep -m1 -E 'tests passed|tests failed' "$logs/ctest.log" || echo "no ctest summary")
if grep -q 'No tests were found' "$logs/ctest.log"; then
  record ctest FAILED "no cuda-labelled tests: was the build configured with CUDA? (see ctest.log)"
elif [[ $ctest_status -ne 0 ]]; then
  record ctest FAILED "$tests_line (see ctest.log)"
elif grep -q '(Skipped)' "$logs/ctest.log"; then
  # On a machine with a GPU a skip means the tests did not see it.
  record ctest FAILED "$tests_line, but on a GPU machine these were skipped: $(grep -E '\*\*\*Skipped' "$logs/ctest.log" | awk '{print $4}' | paste -sd' ')"
else
  record ctest ok "$tests_line"
fi
record_result parity-fp16 "$(result_of fp16 "$logs/ctest.log")"
record_result parity-dp "$(result_of data-parallel "$logs/ctest.log")"

# --- benchmark ---------------------------------------------------------------
# What scripts/gpu-package.sh packages: GPT-2 small in bf16 and fp16, the
# BERT-base models in bf16, each model's data-parallel bundle.
run_bench --bin "$build_dir/bin" --models gpt2:bf16+fp16,bert128,bert512 --data-parallel
finish
