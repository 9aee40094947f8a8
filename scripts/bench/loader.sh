#!/usr/bin/env bash
# Loader throughput (samples/s) for num_workers 0, 1, 2, 4 with pin_memory off
# and on, on a generated 50000-image CIFAR-format set, then on the same images
# as PNG and JPEG folders (dataset: image_folder), decoded at start and per
# batch. Writes scripts/bench/results/loader-<device>-<date>.md; needs a release build.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$GPUTRAIN_ROOT"
build=build/release
cmake --build "$build" --target gputrain gputrain_bench_loader >/dev/null

data="${GPUTRAIN_BENCH_DATA:-datasets/generated/bench-cifar}"
if [ ! -f "$data/test_batch.bin" ]; then
  "$build/app/gputrain" datasets make-cifar --out "$data" --train 50000 --test 10000 --seed 0
fi
for format in png jpeg; do
  if [ ! -d "$data-$format/test" ]; then
    printf 'data:\n  dataset: cifar10\n  root: %s\n' "$data" > "$data.yaml"
    "$build/app/gputrain" datasets export --config "$data.yaml" --format "$format" --out "$data-$format"
  fi
done

device=cpu
if "$build/app/gputrain" info --json 2>/dev/null | grep -q '"cuda_available": *true'; then device=cuda; fi
out="scripts/bench/results/loader-$device-$(date +%Y-%m-%d).md"
{
  echo "# Loader throughput, $(date +%Y-%m-%d)"
  echo
  echo "- machine: $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')), device: $device"
  echo "- gputrain $(git rev-parse --short HEAD), $("$build/app/gputrain" --version)"
  echo "- load average when it started (other jobs share this machine): $(cut -d" " -f1-3 /proc/loadavg)"
  echo "- command: scripts/bench/loader.sh (build/release/scripts/bench/gputrain_bench_loader DATA 128 EPOCHS)"
  for root in "$data" "$data-png" "$data-jpeg"; do
    echo
    echo "## $root ($(du -sh "$root" | cut -f1) on disk)"
    echo
    "$build/scripts/bench/gputrain_bench_loader" "$root" 128 "${GPUTRAIN_BENCH_EPOCHS:-5}"
  done
} | tee "$out"
echo "wrote $out" >&2
