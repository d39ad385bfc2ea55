#!/usr/bin/env bash
# Installs the Python package (pip install ./python, into a temporary
# directory) in the PyPI environment and runs its tests against the build:
#   python/test-python.sh BUILD_DIR
# Exits 77 (skipped) without the PyPI environment (scripts/pypi-venv.sh).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ! python=$(KILN_PYPI_OFFLINE=1 "$src/scripts/pypi-venv.sh" 2>/dev/null); then
  echo "python-package: skipped: no PyPI environment (scripts/pypi-venv.sh makes it)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/python" "$work/src"
"$python" -m pip install --quiet --no-deps --no-build-isolation \
  --target "$work/site" "$work/src" > "$work/pip.log" 2>&1 ||
  { cat "$work/pip.log" >&2; exit 1; }
cd "$work"
PYTHONPATH=$work/site KILN_LIBRARY=$build/lib/libkilnrt.so \
  KILN_KILNC=$build/bin/kilnc "$python" -m pytest -q -p no:cacheprovider \
  "$src/python/tests"
