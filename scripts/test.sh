#!/usr/bin/env bash
# README command two: install what is missing, build, and run every test through CTest:
# the Release suite, then the same suite plus the fuzz smokes (label fuzz) built with
# clang under AddressSanitizer and UndefinedBehaviorSanitizer (the asan preset).
# Extra arguments go to both ctest runs, e.g. scripts/test.sh -L unit
# GPUTRAIN_ASAN=0 skips the sanitizer build and its run (a second full build).
# GPUTRAIN_RELEASE=1 adds the wheel's build and check (scripts/package.sh, scripts/check_wheel.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$GPUTRAIN_ROOT/scripts/setup.sh"
"$GPUTRAIN_ROOT/scripts/build.sh" release
cd "$GPUTRAIN_ROOT"
ctest --preset release "$@"
# GPUTRAIN_RELEASE=1: also the wheel, built and checked as a user meets it (CTest label `release`).
if [ "${GPUTRAIN_RELEASE:-0}" = 1 ]; then ctest --preset wheel; fi
[ "${GPUTRAIN_ASAN:-1}" = 0 ] && exit 0
"$GPUTRAIN_ROOT/scripts/build.sh" asan
ctest --preset asan "$@"
