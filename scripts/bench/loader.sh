#!/usr/bin/env bash
# Loader throughput (samples/s) for num_workers 0, 1, 2, 4 with pin_memory off
# and on, on a generated 50000-image CIFAR-format set. Writes
# scripts/bench/results/loader-<device>-<date>.md; needs a release build.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$GPUTRAIN_ROOT"
build=build/release
cmake --build "$build" --target gputrain gputrain_bench_loader >/dev/null

data="${GPUTRAIN_BENCH_DATA:-datasets/generated/bench-cifar}"
if [ ! -f "$data/test_batch.bin" ]; then
  "$build/app/gputrain" datasets make-cifar --out "$data" --train 50000 --test 10000 --seed 0
fi

device=cpu
if "$build/app/gputrain" info --json 2>/dev/null | grep -q '"cuda_available": *true'; then device=cuda; fi
out="scripts/bench/results/loader-$device-$(date +%Y-%m-%d).md"
{
  echo "# Loader throughput, $(date +%Y-%m-%d)"
  echo
  echo "- machine: $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')), device: $device"
  echo "- gputrain $(git rev-parse --short HEAD), $("$build/app/gputrain" --version)"
  echo "- load average when it started (other jobs share this machine): $(cut -d" " -f1-3 /proc/loadavg)"
  echo "- command: scripts/bench/loader.sh (build/release/scripts/bench/gputrain_bench_loader $data)"
  echo
  "$build/scripts/bench/gputrain_bench_loader" "$data" 128 "${GPUTRAIN_BENCH_EPOCHS:-5}"
} | tee "$out"
echo "wrote $out" >&2
