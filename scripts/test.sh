#!/usr/bin/env bash
# README command two: install what is missing, build, and run every test through CTest:
# 1. the Release suite;
# 2. its cross-process numeric tests (label crossproc) again, with every child process
#    on another oneDNN instruction set and this side on two threads against the
#    children's one: what holds only on one machine fails here (tests/support/tolerance.h);
# 3. the same suite plus the fuzz smokes (label fuzz) built with clang under
#    AddressSanitizer and UndefinedBehaviorSanitizer (the asan preset).
# Every step runs even when an earlier one failed (a suite whose build failed is
# reported as not run); a summary at the end gives each step's outcome and time, and
# the exit status is 1 when any failed.
# Extra arguments go to every ctest run, e.g. scripts/test.sh -L unit
# GPUTRAIN_ASAN=0 skips the sanitizer build and its run (a second full build).
# GPUTRAIN_RELEASE=1 adds the wheel's build and check (scripts/package.sh, scripts/check_wheel.sh).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GPUTRAIN_ROOT"

summary=()
failed=0
# step <name> <command...>: runs the command, timed, and records its outcome.
step() {
  local name=$1 start=$SECONDS status outcome
  shift
  printf '\n== %s\n' "$name"
  "$@"
  status=$?
  outcome=passed
  if [ "$status" -ne 0 ]; then
    outcome="FAILED (exit $status)"
    failed=1
  fi
  summary+=("$(printf '%-40s %-18s %3dm%02ds' "$name" "$outcome" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))")
  return "$status"
}
# not_run <name> <why>: a step that could not run counts as failed.
not_run() {
  summary+=("$(printf '%-40s not run: %s' "$1" "$2")")
  failed=1
}

# The cap that changes oneDNN's kernels on this CPU: AVX2 below AVX-512, else SSE4.1.
isa=SSE41
grep -qw avx512f /proc/cpuinfo && isa=AVX2

presets=(release)
[ "${GPUTRAIN_ASAN:-1}" = 0 ] || presets+=(asan)
if step setup scripts/setup.sh; then
  for preset in "${presets[@]}"; do
    if step "build $preset" scripts/build.sh "$preset"; then
      step "suite $preset" ctest --preset "$preset" "$@"
      if [ "$preset" = release ]; then
        step "crossproc $preset, children on $isa" \
          env GPUTRAIN_TEST_CHILD_ONEDNN_ISA="$isa" OMP_NUM_THREADS=2 ctest --preset "$preset" -L crossproc "$@"
        # The wheel, built and checked as a user meets it (CTest label release).
        [ "${GPUTRAIN_RELEASE:-0}" = 1 ] && step "wheel" ctest --preset wheel
      fi
    else
      not_run "suite $preset" "its build failed"
    fi
  done
else
  not_run "builds and suites" "setup failed"
fi

printf '\n== summary\n'
printf '%s\n' "${summary[@]}"
exit "$failed"
