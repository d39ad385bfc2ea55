#!/usr/bin/env bash
# Checks that every C and C++ file of the repository is formatted as
# .clang-format says (LLVM style), with the clang-format of the LLVM Kiln
# builds against. Prints the files that are not and exits 1; with --fix,
# formats them instead.
#
#   scripts/check-format.sh         # the check the ctest `format` runs
#   scripts/check-format.sh --fix   # clang-format -i on every file
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
clang_format=${CLANG_FORMAT:-clang-format-22}
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "check-format: $clang_format not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.cu')
if [[ "${1:-}" == "--fix" ]]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
bad=()
for file in "${files[@]}"; do
  "$clang_format" --dry-run -Werror "$file" >/dev/null 2>&1 || bad+=("$file")
done
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted (scripts/check-format.sh --fix formats them):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: all ${#files[@]} files are formatted"
