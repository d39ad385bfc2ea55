#!/usr/bin/env bash
# Runs the node tests of the newest onnx release (the one scripts/pypi-venv.sh
# installs from PyPI) end to end, as scripts/onnx-conformance.py runs
# Debian's 1.12 set: the data is generated once into the cache (not
# committed), and every test of test/onnx/conformance-newest-allowlist.txt
# must pass.
#
# usage: onnx-conformance-newest.sh KILNC KILN_RUN [conformance options...]
# Exits 77 (ctest's "skipped", which it reports) when the environment is
# missing: scripts/pypi-venv.sh makes it.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
kilnc=$1 kiln_run=$2
shift 2
if ! python=$(KILN_PYPI_OFFLINE=1 scripts/pypi-venv.sh 2>/dev/null); then
  echo "onnx-conformance-newest: skipped: no PyPI environment (scripts/pypi-venv.sh makes it)"
  exit 77
fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kiln/onnx-testdata
data=$("$python" scripts/onnx-newest-testdata.py -o "$cache")
exec "$python" scripts/onnx-conformance.py --kilnc "$kilnc" --kiln-run "$kiln_run" \
  --dir "$data" --allowlist test/onnx/conformance-newest-allowlist.txt "$@"
