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

# "<path> <digest>" for each file named on stdin. Files of the checkout (and its build
# directory) are named, and read, without its path: the generated header includes
# torch_pch.h by its absolute path.
file_digests() {
  local inside=() outside=() file
  while read -r file; do
    if [[ "$file" == /* && "$file" != "$root"/* ]]; then outside+=("$file"); else inside+=("$file"); fi
  done
  if ((${#outside[@]})); then sha256sum "${outside[@]}" | awk '{ print $2, $1 }'; fi
  for file in "${inside[@]}"; do
    echo "${file/#"$root"/@} $(sed "s|$root|@|g" "$file" | sha256sum | cut -d' ' -f1)"
  done
}

{
  "$1" --version
  printf '%s\n' "${@:2}" | sed "s|$root|@|g"
  # "target: dep dep \" lines; ninja removes the depfile only once this command ends.
  sed -e 's/^[^:]*://' -e 's/\\$//' "$depfile" | tr -s ' ' '\n' | sed '/^$/d' | sort -u | file_digests | sort
} | sha256sum >"$out.sum"
