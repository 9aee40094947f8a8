#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release) into build/<preset>;
# further arguments name the only targets to build, e.g. scripts/build.sh asan fuzz_idx
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
preset="${1:-release}"
shift $(( $# > 0 ? 1 : 0 ))
cd "$GPUTRAIN_ROOT"
# shellcheck disable=SC2046
cmake --preset "$preset" $(gputrain_torch_cmake_args) >/dev/null
cmake --build --preset "$preset" ${1:+--target "$@"}
