#!/usr/bin/env bash
# README command two: install what is missing, build, and run every test through CTest.
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$GPUTRAIN_ROOT/scripts/setup.sh"
"$GPUTRAIN_ROOT/scripts/build.sh" release
cd "$GPUTRAIN_ROOT"
exec ctest --preset release "$@"
