#!/usr/bin/env bash
# Builds Kiln and runs every test suite through ctest; exits with ctest's status.
#
# Extra arguments go to ctest, e.g. `scripts/test.sh -R lit` or `-L cuda`.
# Honours KILN_BUILD_DIR and KILN_JOBS like scripts/build.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${KILN_BUILD_DIR:-build}

scripts/build.sh
# Today's PyTorch and onnx from PyPI, for the tests that compare with them
# (made once, then reused); without it those tests report themselves skipped.
if ! scripts/pypi-venv.sh > /dev/null; then
  echo "test: warning: could not make the PyPI environment (scripts/pypi-venv.sh);" \
       "the tests that need today's PyTorch and onnx will be skipped" >&2
fi
exec ctest --test-dir "$build_dir" --output-on-failure -j2 "$@"
