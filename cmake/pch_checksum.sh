#!/usr/bin/env bash
# The compiler launcher of a precompiled header's target under clang (CMakeLists.txt).
# Runs the compile; when it makes a .pch, writes <pch>.sum beside it: a digest of what
# the header was made from, the checkout's own path left out (the compiler, its
# arguments, and each file the depfile names with a digest of its contents). clang's
# .pch holds the checkout's absolute paths, so no two clones' are alike; ccache hashes
# the .sum in its place (CCACHE_PCH_EXTSUM, scripts/env.sh), so a fresh clone's files
# that load the header are still cache hits, and any change to what made it is a miss.
# Usage: pch_checksum.sh <checkout> <compiler> <arguments...>
set -euo pipefail
root=$1
shift
out='' depfile=''
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -o) out=${args[i + 1]} ;;
    -MF) depfile=${args[i + 1]} ;;
  esac
done
[[ "$out" == *.pch && -n "$depfile" ]] || exec "$@"
rm -f "$out.sum"
"$@"
{
  "$1" --version
  printf '%s\n' "${@:2}"
  # "target: dep dep \" lines; ninja removes the depfile only once this command ends.
  sed -e 's/^[^:]*://' -e 's/\\$//' "$depfile" | tr -s ' ' '\n' | sed '/^$/d' | sort -u |
    xargs -d '\n' sha256sum
} | sed "s|$root|@|g" | sha256sum >"$out.sum"
