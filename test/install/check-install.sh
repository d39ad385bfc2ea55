#!/usr/bin/env bash
# Installs the build tree to a fresh prefix (cmake --install) and uses it as
# another project would: the installed files and their library dependencies
# (the runtime needs no LLVM or MLIR), kilnc --version, pkg-config, a build
# step made with kiln_add_bundle (kilnc runs again when the model or the
# flags change, and only then), and examples/embed built against the package
# and run: it trains from C and restores a checkpoint.
#
#   check-install.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "check-install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/kilnc bin/kiln-opt bin/kiln-run lib/libkilnrt.so \
         include/kiln/runtime.h lib/cmake/Kiln/KilnConfig.cmake \
         lib/cmake/Kiln/KilnConfigVersion.cmake lib/cmake/Kiln/KilnBundle.cmake \
         lib/pkgconfig/kilnrt.pc; do
  [[ -e $prefix/$f ]] || fail "cmake --install did not install $f"
done
if ldd "$prefix/lib/libkilnrt.so" "$prefix/bin/kiln-run" | grep -E -i 'libLLVM|libMLIR'; then
  fail "the runtime links LLVM or MLIR"
fi
ldd "$prefix/bin/kiln-run" | grep -q "$prefix/bin/../lib/libkilnrt.so" ||
  fail "kiln-run does not find the installed libkilnrt"
"$prefix/bin/kilnc" --version | grep -q '^kilnc (Kiln) [0-9]' ||
  fail "kilnc --version does not name Kiln's version"
flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs kilnrt | xargs)
[[ $flags == "-I$prefix/lib/pkgconfig/../../include -L$prefix/lib/pkgconfig/../../lib -lkilnrt" ]] ||
  fail "pkg-config gives '$flags'"

# kiln_add_bundle: a build step that runs kilnc again exactly when it must.
mkdir -p "$work/step"
cp "$src/examples/mlp/mlp.onnx" "$work/step/model.onnx"
cat > "$work/step/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(step LANGUAGES NONE)
find_package(Kiln REQUIRED)
kiln_add_bundle(model MODEL ${CMAKE_CURRENT_SOURCE_DIR}/model.onnx
  ARGS --inference --target=cpu ${EXTRA})
CMAKE
configure() {
  cmake -S "$work/step" -B "$work/step/build" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" "$@" > "$work/configure.log"
}
built() { cmake --build "$work/step/build" | grep -c 'Compiling .*model.onnx with kilnc' || true; }
configure -DEXTRA=--batch-size=8
[[ $(built) == 1 ]] || fail "kiln_add_bundle did not compile the model"
cp "$work/step/build/model.kiln" "$work/first.kiln"
[[ $(built) == 0 ]] || fail "kilnc ran again with nothing changed"
configure -DEXTRA=--batch-size=4
[[ $(built) == 1 ]] || fail "kilnc did not run again when the flags changed"
"$prefix/bin/kiln-run" "$work/step/build/model.kiln" --info | grep -q 'input: f32\[4,32\]' ||
  fail "the rebuilt bundle does not have the new batch size"
configure -DEXTRA=--batch-size=8
[[ $(built) == 1 ]] || fail "kilnc did not run again when the flags changed back"
cmp -s "$work/first.kiln" "$work/step/build/model.kiln" ||
  fail "the same model and flags gave another bundle"
touch "$work/step/model.onnx"
[[ $(built) == 1 ]] || fail "kilnc did not run again when the model changed"

# The .deb packages (cpack -G DEB): their dependencies resolve against this
# machine's apt sources (apt-get --simulate installs them), and the tools
# run from the packaged tree.
if command -v dpkg-deb > /dev/null && command -v apt-get > /dev/null; then
  cpack -G DEB -B "$work/debs" --config "$build/CPackConfig.cmake" > "$work/cpack.log" ||
    fail "cpack failed: $(tail -5 "$work/cpack.log")"
  debs=("$work"/debs/kiln-runtime_*.deb "$work"/debs/kiln-tools_*.deb "$work"/debs/kiln-dev_*.deb)
  apt-get install --simulate "${debs[@]}" > "$work/apt.log" 2>&1 ||
    fail "apt-get cannot install the packages: $(tail -5 "$work/apt.log")"
  for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$work/root"; done
  "$work/root/usr/bin/kilnc" --version | grep -q '^kilnc (Kiln) [0-9]' ||
    fail "kilnc from the .deb packages does not run"
  "$work/root/usr/bin/kiln-run" --help > /dev/null ||
    fail "kiln-run from the .deb packages does not run"
fi

# The embedding example, built against the installed package and run.
cmake -S "$src/examples/embed" -B "$work/embed" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/embed-configure.log"
cmake --build "$work/embed" > "$work/embed-build.log"
"$work/embed/embed" "$work/embed/mlp_train.kiln" "$work/embed/checkpoint.bin"
echo "check-install: ok"
