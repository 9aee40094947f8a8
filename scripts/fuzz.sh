#!/usr/bin/env bash
# Runs one fuzz target for longer than its CTest smoke, starting from its seeds.
#   scripts/fuzz.sh config|cifar10|idx|checkpoint [SECONDS=300] [libFuzzer options...]
# Inputs it finds collect in build/asan/tests/fuzz/long-<target>/ (a second run goes
# on from there); a crash, leak or hang leaves crash-*/leak-*/timeout-* in that
# directory, to become a regression test. The last lines give the executions run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
target="${1:?usage: scripts/fuzz.sh config|cifar10|idx|checkpoint [SECONDS] [libFuzzer options...]}"
seconds="${2:-300}"
shift $(( $# > 1 ? 2 : 1 ))
"$GPUTRAIN_ROOT/scripts/build.sh" asan "fuzz_$target"
cd "$GPUTRAIN_ROOT"
found="build/asan/tests/fuzz/long-$target"
mkdir -p "$found"
# LibTorch's unpickler reserves whatever length a crafted checkpoint declares
# (tests/fuzz/CMakeLists.txt): long runs allow 16 GiB, and an allocation that
# cannot be had fails with std::bad_alloc (which gputrain turns into its error)
# instead of ending the run.
options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=16384 -print_final_stats=1 -artifact_prefix="$found/")
[ -f "tests/fuzz/$target.dict" ] && options+=(-dict="tests/fuzz/$target.dict")
export ASAN_OPTIONS="allocator_may_return_null=1"
export LSAN_OPTIONS="suppressions=$GPUTRAIN_ROOT/tests/sanitizers/lsan.supp:print_suppressions=0"
exec "build/asan/tests/fuzz/fuzz_$target" "${options[@]}" "$@" "$found" "tests/fuzz/corpus/$target"
