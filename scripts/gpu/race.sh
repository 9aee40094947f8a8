#!/usr/bin/env bash
# Issue 39's race on the GPU machine, run from the bundle (bundle.sh) with LD_LIBRARY_PATH as
# for prove.sh: first one cold torch.compile of the PyTorch-at-its-best reference (one epoch of the
# Fashion-MNIST recipe: its wall time is the cold compile, and it fills Inductor's cache on this
# machine), then race.py, whose reference runs find that cache warm. Both in one call: a later
# call may start a bare machine. Results land in OUT (7 files, kernel-caches.txt among them).
#
#   race.sh OUT [FMNIST_SEEDS (0..2)] [CIFAR_SEEDS (0..1)] [RACE_BUDGET_S (280)] [COMPILE_TIMEOUT_S (420)]
#           [RECORD_SEEDS (none)] [RECORD_TIMEOUT_S (240)] [RECORD_RACE_SEEDS (none)]
#
# RECORD_SEEDS (e.g. 0..9): then the record recipe, configs/fashion_mnist_record.yaml, under
# `gputrain sweep` with train.target_accuracy 0.94: each seed's accuracy and time to 94%, their
# mean (record-sweep.json). COMPILE_TIMEOUT_S 0 skips the cold compile, RACE_BUDGET_S 0 the race.
# RECORD_RACE_SEEDS (e.g. 0..1): race.py also races the record network against reference_best.py's
# `record` recipe (its first run compiles the record network cold, inside the race's budget).
#
# RACE_BUDGET_S 0: the cold compile alone (when it needs most of a call, the race follows in a
# second call made while the machine is still warm, whose /tmp keeps the cache).
set -uo pipefail
OUT="$1"
SEEDS="${2:-0..2}"
CIFAR_SEEDS="${3:-0..1}"
BUDGET="${4:-280}"
COMPILE_TIMEOUT="${5:-420}"
RECORD_SEEDS="${6:-}"
RECORD_TIMEOUT="${7:-240}"
RECORD_RACE_SEEDS="${8:-}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FMNIST="$HERE/fashion-mnist"
mkdir -p "$OUT"

# The on-disk kernel caches gputrain's run-start log names (LibTorch's NVRTC kernels, CUDA's PTX
# JIT): files and KiB in each, so kernel-caches.txt shows whether the runs between compile any.
kernel_caches() {
  for dir in "${PYTORCH_KERNEL_CACHE_PATH:-${XDG_CACHE_HOME:-${HOME:-}/.cache}/torch/kernels}" \
    "${CUDA_CACHE_PATH:-${HOME:-}/.nv/ComputeCache}"; do
    if [ -d "$dir" ]; then
      echo "$1: $dir: $(find "$dir" -type f | wc -l) files, $(du -sk "$dir" | cut -f1) KiB"
    else
      echo "$1: $dir: absent"
    fi
  done >>"$OUT/kernel-caches.txt"
}
kernel_caches "before"

if [ -n "$RECORD_SEEDS" ]; then
  timeout "$RECORD_TIMEOUT" "$HERE/gputrain" sweep --config "$HERE/configs/fashion_mnist_record.yaml" \
    --seeds "$RECORD_SEEDS" --set "data.root=$FMNIST" --set train.target_accuracy=0.94 \
    --set output.dir=/tmp/record-runs --json >"$OUT/record-sweep.json" 2>"$OUT/record-sweep.log"
  echo "record recipe, seeds $RECORD_SEEDS: exit $?" | tee "$OUT/record-sweep.txt"
  kernel_caches "after the record sweep (gputrain only)"
fi
[ "$COMPILE_TIMEOUT" = 0 ] && [ "$BUDGET" = 0 ] && exit 0

if [ "$COMPILE_TIMEOUT" != 0 ]; then  # `timeout 0` would not limit it
  start=$(date +%s)
  timeout "$COMPILE_TIMEOUT" python3 "$HERE/scripts/bench/reference_best.py" fmnist --data "$FMNIST" --epochs 1 \
    --target 0 >"$OUT/compile-cold.json" 2>"$OUT/compile-cold.log"
  echo "reference_best.py fmnist, one epoch from a cold Inductor cache: exit $? after $(($(date +%s) - start)) s" \
    | tee "$OUT/compile-cold.txt"
fi
[ "$BUDGET" = 0 ] && exit 0

"$HERE/gputrain" datasets make-cifar --out /tmp/race-cifar --train 50000 --test 2000 >/dev/null 2>&1
python3 "$HERE/scripts/bench/race.py" --device cuda --fmnist "$FMNIST" --cifar /tmp/race-cifar --seeds "$SEEDS" \
  --cifar-seeds "$CIFAR_SEEDS" --record-seeds "$RECORD_RACE_SEEDS" --gputrain "$HERE/gputrain" --configs "$HERE/configs" --python python3 \
  --run-timeout 200 --budget-s "$BUDGET" --out "$OUT" --tag "$(nvidia-smi --query-gpu=name --format=csv,noheader \
  | head -1 | tr -c '[:alnum:]\n' '-' | tr '[:upper:]' '[:lower:]')" >"$OUT/race.log" 2>&1
grep -E "^race:|gputrain against" "$OUT/race.log"
