#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release) into build/<preset>.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
preset="${1:-release}"
cd "$GPUTRAIN_ROOT"
# shellcheck disable=SC2046
cmake --preset "$preset" $(gputrain_torch_cmake_args) >/dev/null
cmake --build --preset "$preset"
