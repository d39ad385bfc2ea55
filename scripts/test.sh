#!/usr/bin/env bash
# Builds Kiln and runs every test suite through ctest; exits with ctest's status.
#
# Extra arguments go to ctest, e.g. `scripts/test.sh -R lit` or `-L cuda`.
# Honours KILN_BUILD_DIR and KILN_JOBS like scripts/build.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${KILN_BUILD_DIR:-build}

scripts/build.sh
exec ctest --test-dir "$build_dir" --output-on-failure -j2 "$@"
