#!/usr/bin/env bash
# README command two: install what is missing, build, and run every test through CTest.
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit
# GPUTRAIN_ASAN=1 then also builds the asan preset (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, the libFuzzer targets) and runs the suite and the fuzz
# smokes (label fuzz) under it: a second full build, so it is off by default.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$GPUTRAIN_ROOT/scripts/setup.sh"
"$GPUTRAIN_ROOT/scripts/build.sh" release
cd "$GPUTRAIN_ROOT"
ctest --preset release "$@"
[ "${GPUTRAIN_ASAN:-0}" = 1 ] || exit 0
"$GPUTRAIN_ROOT/scripts/build.sh" asan
ctest --preset asan "$@"
