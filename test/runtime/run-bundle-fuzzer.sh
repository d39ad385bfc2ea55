#!/bin/sh
# Runs the bundle reader fuzzer for a bounded time over a seed corpus of valid
# bundles. Any crash, sanitizer report, leak or timeout fails (libFuzzer exits
# non-zero and leaves the input under WORK_DIR).
#
# usage: run-bundle-fuzzer.sh FUZZER TEST_BUNDLE_TOOL WORK_DIR SECONDS
set -eu
fuzzer=$1
bundle_tool=$2
work_dir=$3
seconds=$4

rm -rf "$work_dir"
mkdir -p "$work_dir/corpus"
"$bundle_tool" --seeds "$work_dir/corpus"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=16384 -artifact_prefix="$work_dir/" "$work_dir/corpus"
