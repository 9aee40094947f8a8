#!/usr/bin/env bash
# Formats every C++ source with .clang-format (clang-format 14, which scripts/setup.sh
# installs). --check changes nothing and fails, naming each line, where a file is not formatted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
clang_format="$(command -v clang-format-14 || command -v clang-format)" ||
  { echo "format: clang-format is not installed: run scripts/setup.sh" >&2; exit 2; }
mapfile -t files < <(find app lib tests scripts \( -name '*.cpp' -o -name '*.h' \) | sort)
if [ "${1:-}" = --check ]; then
  "$clang_format" --style=file --dry-run -Werror "${files[@]}" ||
    { echo "format: the files above are not formatted: run scripts/format.sh" >&2; exit 1; }
else
  "$clang_format" --style=file -i "${files[@]}"
fi
