#!/usr/bin/env bash
# README command two: install what is missing, build, and run every test through CTest:
# the Release suite, then the same suite plus the fuzz smokes (label fuzz) built with
# clang under AddressSanitizer and UndefinedBehaviorSanitizer (the asan preset).
# Extra arguments go to both ctest runs, e.g. scripts/test.sh -L unit
# GPUTRAIN_ASAN=0 skips the sanitizer build and its run (a second full build).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$GPUTRAIN_ROOT/scripts/setup.sh"
"$GPUTRAIN_ROOT/scripts/build.sh" release
cd "$GPUTRAIN_ROOT"
ctest --preset release "$@"
[ "${GPUTRAIN_ASAN:-1}" = 0 ] && exit 0
"$GPUTRAIN_ROOT/scripts/build.sh" asan
ctest --preset asan "$@"
