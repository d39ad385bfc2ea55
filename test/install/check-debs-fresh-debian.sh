#!/usr/bin/env bash
# The .deb packages on a fresh Debian 12: a minimal bookworm system made
# with debootstrap (--variant=minbase), this machine's apt sources, then
# apt-get install of kiln-runtime, kiln-tools and kiln-dev, which must pull
# in everything they need; kilnc --version, kilnc compiling the MLP's
# training step and kiln-run training it, all inside that system (chroot).
#
#   check-debs-fresh-debian.sh BUILD_DIR PYTHON
#
# Needs root (chroot) and debootstrap; exits 77 (skipped) without them.
# Downloads go through caches under ~/.cache/kiln/debian12 (the base system
# as a tarball, the packages apt fetched), so a rerun fetches only the
# package lists.
set -euo pipefail
build=$(cd "$1" && pwd)
python=$2
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "check-debs-fresh-debian: $*" >&2; exit 1; }
if [[ $(id -u) != 0 ]] || ! command -v debootstrap > /dev/null; then
  echo "debs-on-fresh-debian: skipped: needs root and debootstrap"
  exit 77
fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kiln/debian12
mkdir -p "$cache/archives"
work=$(mktemp -d /var/tmp/kiln-debian12.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root

if [[ ! -s $cache/minbase.tgz ]]; then
  debootstrap --variant=minbase --make-tarball="$cache/minbase.tgz.part" \
    bookworm "$work/tarball" http://deb.debian.org/debian > "$work/tarball.log" 2>&1 ||
    fail "debootstrap --make-tarball failed: $(tail -3 "$work/tarball.log")"
  mv "$cache/minbase.tgz.part" "$cache/minbase.tgz"
fi
debootstrap --variant=minbase --unpack-tarball="$cache/minbase.tgz" \
  bookworm "$root" http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 ||
  fail "debootstrap failed: $(tail -3 "$work/debootstrap.log")"

# This machine's Debian sources (bookworm, its updates and security).
rm -f "$root/etc/apt/sources.list"
cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/" 2>/dev/null ||
  cp /etc/apt/sources.list "$root/etc/apt/sources.list"
cpack -G DEB -B "$work/debs" --config "$build/CPackConfig.cmake" > "$work/cpack.log" ||
  fail "cpack failed: $(tail -5 "$work/cpack.log")"
mkdir -p "$root/debs" "$root/work"
cp "$work"/debs/kiln-runtime_*.deb "$work"/debs/kiln-tools_*.deb \
  "$work"/debs/kiln-dev_*.deb "$root/debs/"
cp "$cache"/archives/*.deb "$root/var/cache/apt/archives/" 2>/dev/null || true
cp "$src/examples/mlp/mlp_train.onnx" "$root/work/"

inside() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root DEBIAN_FRONTEND=noninteractive bash -c "$1"; }
inside "apt-get update -q && apt-get install -y -q --no-install-recommends /debs/*.deb" \
  > "$work/apt.log" 2>&1 || fail "the packages do not install: $(tail -5 "$work/apt.log")"
cp "$root"/var/cache/apt/archives/*.deb "$cache/archives/" 2>/dev/null || true

inside "kilnc --version" | grep -q '^kilnc (Kiln) [0-9]' ||
  fail "kilnc --version does not run from the packages"
# The packages pull in no NumPy: the host writes the data.
"$python" "$src/examples/mlp/make_data.py" "$root/work/data.npz" > /dev/null
inside "cd /work && kilnc mlp_train.onnx --batch-size=32 --optimizer=adamw \
  --target=cpu -o mlp.kiln && kiln-run mlp.kiln --data data.npz --steps 3" \
  > "$work/train.log" 2>&1 || fail "training from the packages failed: $(tail -5 "$work/train.log")"
grep -q '^step 3/3 ' "$work/train.log" || fail "kiln-run did not run 3 steps"
echo "debs-on-fresh-debian: $(grep -c '^Setting up' "$work/apt.log") packages set up;" \
  "kilnc compiled and kiln-run trained inside"
