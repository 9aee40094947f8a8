#!/usr/bin/env bash
# The GPU proof: every CUDA path of gputrain once, each step under its own timeout,
# results in OUTDIR/gpu-<date>-<gpu>.{md,json} plus OUTDIR/logs.tar.gz (every step's log).
#
#   prove.sh OUTDIR [--dry-run] [--keep-logs]
#
# --dry-run   the same steps on the CPU with tiny sizes (CI runs it); CUDA-only steps are
#             recorded as skipped, with the reason
# --keep-logs also leave the logs in OUTDIR/logs/ (by default only the tarball, because the
#             GPU machine hands back at most 8 files)
#
# Finds gputrain in $GPUTRAIN_BIN, else next to this script (the bundle of bundle.sh), else
# in the checkout's build/release. A failing step is recorded as failed and the run goes on;
# the exit code is 0 once the report is written, whatever the steps did.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"

# ---- internal sub-commands: compound steps, run as `prove.sh --internal NAME ...` so that
# `timeout` can bound them like any other command --------------------------------------------

# Trains in the background and sends SIGTERM at several moments after training has logged:
# early ones land while cuDNN tunes and compiles kernels for epoch 1's new shapes (the short
# last batch, the test pass), where a library's own signal handlers once turned the stop into
# exit 4 or a segfault. Each stop must exit 130 with the checkpoint its summary line names.
internal_sigterm() {
  local run_dir="$1"; shift
  local delay rc=130 failed=0 i=0
  for delay in 0.05 0.15 0.25 0.5; do
    i=$((i + 1))
    local dir="$run_dir-$i"
    "$@" --set "name=$(basename "$dir")" >"$dir.stdout" &
    local pid=$! waited=0
    # when the step's own timeout ends this shell, the training must not outlive it
    trap 'kill -KILL "$pid" 2>/dev/null || true' EXIT
    trap 'exit 124' TERM INT
    # metrics.jsonl appears with the first log interval: training is under way
    while [ ! -s "$dir/metrics.jsonl" ] && [ "$waited" -lt 3000 ] && kill -0 "$pid" 2>/dev/null; do
      sleep 0.02; waited=$((waited + 1))
    done
    sleep "$delay"
    echo "prove: sending SIGTERM to $pid ($delay s after the first log interval)"
    kill -TERM "$pid" 2>/dev/null || true
    rc=0
    wait "$pid" || rc=$?
    trap - EXIT TERM INT
    cat "$dir.stdout"
    echo "prove: exit code $rc"
    local ckpt
    ckpt="$(sed -n 's/.*"stopped":true,"checkpoint":"\([^"]*\)".*/\1/p' "$dir.stdout")"
    if [ "$rc" -eq 130 ] && [ -n "$ckpt" ] && [ -f "$ckpt" ]; then
      echo "prove: stop $i stopped with 130 and the checkpoint $ckpt"
    else
      echo "prove: stop $i failed: exit code $rc, checkpoint '${ckpt}'"; ls -l "$dir/checkpoints" 2>&1 || true
      [ "$failed" -ne 0 ] || failed=$([ "$rc" -eq 130 ] && echo 1 || echo "$rc")
    fi
  done
  if [ "$failed" -eq 0 ]; then
    echo "prove: all $i stops stopped with 130 and their checkpoint"
    return 130
  fi
  return "$failed"
}

# One epoch, then --resume auto for a second one; the resumed run must say so.
internal_resume() {
  local run_dir="$1"; shift
  echo "prove: first run (1 epoch)"
  "$@" --set train.epochs=1
  ls -l "$run_dir/checkpoints"
  echo "prove: resumed run (--resume auto, train.epochs=2)"
  "$@" --resume auto --set train.epochs=2
}

# A run that must stop on a non-finite loss: its exit code passes through, and nothing it
# trained after the loss went NaN may be left as model.pt.
internal_nan_stop() {
  local run_dir="$1"; shift
  local rc=0
  "$@" || rc=$?
  echo "prove: exit code $rc"
  if [ -e "$run_dir/model.pt" ]; then
    echo "prove: $run_dir/model.pt was written by a run that went NaN"
    return 3
  fi
  echo "prove: no model.pt was written"
  return "$rc"
}

# The GPU cases (*_CUDA) of each GoogleTest binary in turn; fails when any does.
internal_cuda_tests() {
  local rc=0 t
  for t in "$@"; do
    echo "prove: $t"
    "$t" --gtest_color=no --gtest_filter='*_CUDA' || rc=1
  done
  return "$rc"
}

# The generated CIFAR-format set, and an IDX-format Fashion-MNIST stand-in when asked.
internal_make_data() {
  local bin="$1" data="$2" cifar_train="$3" cifar_test="$4" standin="$5" idx_train="$6" idx_test="$7"
  "$bin" datasets make-cifar --out "$data/cifar" --train "$cifar_train" --test "$cifar_test"
  if [ "$standin" = 1 ]; then
    "$bin" datasets make-idx --out "$data/fmnist" --train "$idx_train" --test "$idx_test"
  fi
}

if [ "${1:-}" = "--internal" ]; then
  name="$2"; shift 2
  "internal_$name" "$@"
  exit $?
fi

# ---- arguments and locations ------------------------------------------------------------------
OUTDIR="" DRY=0 KEEP_LOGS=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    --keep-logs) KEEP_LOGS=1 ;;
    -h|--help) sed -n '2,15p' "$SELF"; exit 0 ;;
    -*) echo "prove.sh: unknown option $arg" >&2; exit 2 ;;
    *) OUTDIR="$arg" ;;
  esac
done
[ -n "$OUTDIR" ] || { echo "usage: prove.sh OUTDIR [--dry-run] [--keep-logs]" >&2; exit 2; }
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"

if [ -f "$HERE/configs/cifar10.yaml" ]; then  # the bundle: everything beside this script
  ROOT="$HERE"
  TESTS_DIR="$HERE/tests"
  BENCH="$HERE/scripts/bench/run.py"
else                                           # the checkout: scripts/gpu/
  ROOT="$(cd "$HERE/../.." && pwd)"
  TESTS_DIR="$ROOT/build/release/tests"
  BENCH="$ROOT/scripts/bench/run.py"
fi
BIN="${GPUTRAIN_BIN:-}"
if [ -z "$BIN" ]; then
  if [ -x "$HERE/gputrain" ]; then BIN="$HERE/gputrain"; else BIN="$ROOT/build/release/app/gputrain"; fi
fi
[ -x "$BIN" ] || { echo "prove.sh: no gputrain binary at $BIN (set GPUTRAIN_BIN)" >&2; exit 2; }
CONFIGS="$ROOT/configs"

# nvJPEG (data.decode: gpu), which bundle.sh packs with xz: unpacked beside the bundle's other
# libraries (LD_LIBRARY_PATH names lib/), where gputrain looks when torch's install has none.
if [ -f "$HERE/lib/libnvjpeg.so.13.xz" ] && [ ! -e "$HERE/lib/libnvjpeg.so.13" ]; then
  python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.decompress(open(sys.argv[1], "rb").read()))' \
    "$HERE/lib/libnvjpeg.so.13.xz" "$HERE/lib/libnvjpeg.so.13"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/gputrain-prove.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
LOGS="$WORK/logs"
RUNS="$WORK/runs"
DATA="$WORK/data"
mkdir -p "$LOGS" "$RUNS" "$DATA"
: >"$WORK/steps.tsv"

START=$(date +%s)
# 9 minutes on the GPU machine, leaving a margin inside its 10-minute limit for the report
BUDGET=${PROVE_BUDGET_S:-$([ "$DRY" = 1 ] && echo 300 || echo 530)}

# ---- the step runner --------------------------------------------------------------------------
# step NAME KIND TIMEOUT EXPECT_RC REGEX -- COMMAND...
#   KIND: any (runs in both modes) or cuda (skipped in --dry-run)
#   REGEX: a Python regex the log must match ('' for none)
# Appends one tab-separated record to steps.tsv; summarize.py turns them into the report.
record() {  # name kind status reason rc wall expect_rc regex command
  local IFS=$'\t'
  printf '%s\n' "$*" >>"$WORK/steps.tsv"
}

step() {
  local name="$1" kind="$2" limit="$3" expect="$4" regex="$5"
  shift 6  # the '--' too
  local cmd
  cmd="$(printf '%q ' "$@")"
  # PROVE_ONLY (a bash regex of step names): the others are recorded as not selected; the data steps always run.
  if [ -n "${PROVE_ONLY:-}" ] && [[ ! "$name" =~ ^($PROVE_ONLY|make_data|make_speed_data)$ ]]; then
    record "$name" "$kind" skipped "not selected (PROVE_ONLY=$PROVE_ONLY)" "" 0 "$expect" "$regex" "$cmd"
    return 0
  fi
  if [ "$DRY" = 1 ] && [ "$kind" = cuda ]; then
    record "$name" "$kind" skipped "needs a CUDA GPU (dry run on the CPU)" "" 0 "$expect" "$regex" "$cmd"
    echo "prove: $name skipped (needs a CUDA GPU)" >&2
    return 0
  fi
  local now left
  now=$(date +%s)
  left=$((BUDGET - (now - START)))
  if [ "$left" -lt 15 ]; then
    record "$name" "$kind" skipped "time budget of ${BUDGET} s spent" "" 0 "$expect" "$regex" "$cmd"
    echo "prove: $name skipped (time budget spent)" >&2
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "prove: $name ..." >&2
  local t0 t1 rc=0
  t0=$EPOCHREALTIME
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1 </dev/null || rc=$?
  t1=$EPOCHREALTIME
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || echo "prove: timed out after $limit s" >>"$LOGS/$name.log"
  record "$name" "$kind" ran "" "$rc" "$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")" \
    "$expect" "$regex" "$cmd"
  echo "prove: $name exit $rc" >&2
}

skip() {  # NAME REASON: a step this machine cannot run at all
  record "$1" any skipped "$2" "" 0 0 "" ""
  echo "prove: $1 skipped ($2)" >&2
}

# ---- sizes and shared arguments ---------------------------------------------------------------
if [ "$DRY" = 1 ]; then
  DEV=cpu; EPOCHS=1; CIFAR_TRAIN=128; CIFAR_TEST=64; IDX_TRAIN=128; IDX_TEST=64; T=60
  SIZE=(--set data.batch_size=32 --set train.log_every=1)
else
  DEV=cuda; EPOCHS=2; CIFAR_TRAIN=10000; CIFAR_TEST=2000; IDX_TRAIN=10000; IDX_TEST=2000; T=120
  SIZE=(--set train.log_every=10)
fi
# The real Fashion-MNIST: the bundle's copy (bundle.sh packs it where the build machine has it), else the system's.
FMNIST=/usr/share/datasets/fashion-mnist
[ -e "$HERE/fashion-mnist/train-images-idx3-ubyte.gz" ] && FMNIST="$HERE/fashion-mnist"
STANDIN=0
if [ "$DRY" = 1 ] || { [ ! -e "$FMNIST/train-images-idx3-ubyte.gz" ] && [ ! -e "$FMNIST/train-images-idx3-ubyte" ]; }
then
  # the real set is absent (or too big for a dry run): an IDX-format stand-in
  FMNIST="$DATA/fmnist"
  STANDIN=1
fi

# cifar_cmd NAME [ARGS...]: CMD becomes the seed CIFAR-10 recipe on the generated set, in its
# own run directory (an array, so that paths with spaces survive)
cifar_cmd() {
  local name="$1"; shift
  CMD=("$BIN" train --config "$CONFIGS/cifar10.yaml" --output "$RUNS" --set "name=$name" --set "device=$DEV"
       --set "data.root=$DATA/cifar" --set "train.epochs=$EPOCHS" "${SIZE[@]}" "$@")
}

# ---- the steps --------------------------------------------------------------------------------
# First, as a step: a binary that cannot start (a library missing) shows in the report.
step make_data any 120 0 'wrote' -- "$BASH" "$SELF" --internal make_data "$BIN" "$DATA" "$CIFAR_TRAIN" "$CIFAR_TEST" \
  "$STANDIN" "$IDX_TRAIN" "$IDX_TEST"
step nvidia_smi cuda 30 0 'GPU 0' -- bash -c \
  'nvidia-smi -L && nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv'
step info any 60 0 'CUDA available' -- "$BIN" info
step info_json any 60 0 '^\{' -- "$BIN" info --json
step info_json_visible0 any 60 0 '^\{' -- env CUDA_VISIBLE_DEVICES=0 "$BIN" info --json

cifar_cmd invalid_gpu_device --set device=cuda:7
step invalid_gpu_device any 60 2 'cuda:7' -- "${CMD[@]}"
cifar_cmd invalid_gpu_index --set device=cuda --set 'gpus=[7]'
step invalid_gpu_index cuda 60 2 '' -- "${CMD[@]}"

# The bundle holds exactly the binaries with *_CUDA tests (bundle.sh asks CTest); a checkout's
# build has every test binary, so there the ones holding GPU cases are named.
cuda_tests=()
if [ "$ROOT" = "$HERE" ]; then
  for t in "$TESTS_DIR"/*; do [ -x "$t" ] && cuda_tests+=("$t"); done
else
  for t in train_cuda_tests report_cuda_tests fast_path_tests data_tests device_tests; do
    [ -x "$TESTS_DIR/$t" ] && cuda_tests+=("$TESTS_DIR/$t")
  done
fi
if [ "$DRY" = 0 ] && [ "${#cuda_tests[@]}" -eq 0 ]; then
  skip cuda_tests "no CUDA test binaries in $TESTS_DIR"
else
  step cuda_tests cuda 240 0 'PASSED' -- "$BASH" "$SELF" --internal cuda_tests "${cuda_tests[@]}"
fi
# data.decode: gpu (issue 41): nvJPEG's batched decode of generated JPEGs against libjpeg-turbo's
# decode of the same files (each comparison's mean and largest difference are in the log).
step nvjpeg_decode cuda 120 0 'PASSED' -- "$TESTS_DIR/data_tests" --gtest_color=no --gtest_filter='NvjpegCuda.*'

# Speed floors (issue 36): every configuration a user turns on against the graphed fp32 step
# of this same call, from at least 2 s of steady state each (scripts/gpu/speed.py). On the GPU a
# 50,000-image set, so that an epoch outlasts the graph's warm-up; the dry run checks the plumbing.
SPEED_DATA="$DATA/cifar50k"
step make_speed_data cuda 120 0 'wrote' -- "$BIN" datasets make-cifar --out "$SPEED_DATA" --train 50000 --test 2000
[ "$DRY" = 0 ] || SPEED_DATA="$DATA/cifar"
SPEED=(python3 "$HERE/speed.py" --bin "$BIN" --configs "$CONFIGS" --data "$SPEED_DATA" --fmnist "$FMNIST"
       --runs "$RUNS/speed" --out "$LOGS/speed.json" --device "$DEV")
[ "$DRY" = 1 ] && SPEED+=(--dry-run)
step speed_floors any 300 0 '(?s)\| fp32_graph \|.*\| tta_net_bf16 \|' -- "${SPEED[@]}"
# A run that goes NaN (a learning rate of 1e12) with train.on_nan: stop, on the default path (the
# CUDA graph on a GPU): it must stop with exit 1 naming the steps, and write no model.pt.
cifar_cmd nan_stop --set optim.lr=1e12 --set train.on_nan=stop
step nan_stop any "$T" 1 '(?s)not finite.*prove: no model\.pt was written' -- \
  "$BASH" "$SELF" --internal nan_stop "$RUNS/nan_stop" "${CMD[@]}"

cifar_cmd cifar_seed
step cifar_seed any "$T" 0 'Test set: ' -- "${CMD[@]}"
step fmnist_cnn any "$T" 0 'Test set: ' -- "$BIN" train --config "$CONFIGS/fashion_mnist_cnn.yaml" \
  --output "$RUNS" --set name=fmnist_cnn --set "device=$DEV" --set "data.root=$FMNIST" \
  --set "train.epochs=$EPOCHS" "${SIZE[@]}"

for amp in off bf16 fp16; do
  kind=any; [ "$amp" = fp16 ] && kind=cuda  # fp16 autocast is CUDA-only
  cifar_cmd "amp_$amp" --set "train.amp=$amp"
  step "amp_$amp" "$kind" "$T" 0 'Test set: ' -- "${CMD[@]}"
done
# Inputs scaled by 1e6 exceed fp16's range (65504) inside autocast: every step's gradients
# are inf/NaN and the scaler must skip them rather than stop the run. One epoch: each skip
# halves the loss scale, and 2^16 halved ~150 times nears float32's smallest number.
cifar_cmd amp_fp16_overflow --set train.amp=fp16 --set 'data.normalize.std=[1e-6,1e-6,1e-6]' --set train.epochs=1
# Eager steps warn per skipped step ("step skipped"); under the CUDA graph the device counter is read at the
# epoch's end ("79 steps skipped").
step amp_fp16_overflow cuda "$T" 0 'steps? skipped' -- "${CMD[@]}"

for pin in false true; do
  for workers in 0 4; do
    name="loader_pin_${pin}_workers_$workers"
    cifar_cmd "$name" --set "data.pin_memory=$pin" --set "data.num_workers=$workers"
    step "$name" any "$T" 0 'Test set: ' -- "${CMD[@]}"
  done
done

if [ "$DRY" = 1 ]; then
  cifar_cmd dp_gpu0 --set strategy=dp --set dp.replicas=2   # CPU replica threads instead
else
  cifar_cmd dp_gpu0 --set strategy=dp --set 'gpus=[0]'
fi
step dp_gpu0 any "$T" 0 'Test set: ' -- "${CMD[@]}"
cifar_cmd ddp_nproc1 --set strategy=ddp
# NCCL_DEBUG=WARN: NCCL says itself why it refuses, if it does. On the GPU the step is captured
# in the CUDA graph with its gradients' all-reduce over NCCL; on the CPU (Gloo) c10d's Reducer
# sums them during backward.
step ddp_nproc1 any "$T" 0 "(?s)(the step sums .* of gradients after backward, .*captured with the step in its CUDA graph|c10d's Reducer all-reduces ).*Test set: " -- env NCCL_DEBUG=WARN "${CMD[@]:0:2}" --nproc 1 "${CMD[@]:2}"
# The eager ddp step: c10d's Reducer over NCCL at world size 1, its buckets and its own timing
# of backward and the all-reduce logged.
cifar_cmd ddp_nproc1_reducer --set strategy=ddp --set train.cuda_graph=false
step ddp_nproc1_reducer any "$T" 0 "(?s)c10d's Reducer all-reduces .*Test set: .*Reducer timing" -- env NCCL_DEBUG=WARN "${CMD[@]:0:2}" --nproc 1 "${CMD[@]:2}"
# Two ranks on one GPU: NCCL may refuse (duplicate GPU); summarize.py records its words.
cifar_cmd ddp_nproc2 --set strategy=ddp --set 'gpus=[0]'
[ "$DRY" = 1 ] && cifar_cmd ddp_nproc2 --set strategy=ddp
step ddp_nproc2 any "$T" 0 'Test set: ' -- env NCCL_DEBUG=WARN "${CMD[@]:0:2}" --nproc 2 "${CMD[@]:2}"

if [ "$DRY" = 0 ] && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -lt 2 ]; then
  skip nccl_across_gpus "not run: this machine has one GPU (NCCL between GPUs and multi-GPU dp need two)"
fi

# Two ranks on one GPU over Gloo (which, unlike NCCL, allows it): c10d's Reducer on CUDA
# gradients with bucket views, and batchnorm statistics summed across the ranks.
step ddp_gloo_sync_batchnorm any "$T" 0 "(?s)normalise with the global batch's statistics.*c10d's Reducer all-reduces .*Test set: " -- \
  "$BIN" train --config "$CONFIGS/fashion_mnist_resnet.yaml" --nproc 2 --output "$RUNS" --set name=ddp_gloo_sync_batchnorm \
  --set "device=$DEV" --set "data.root=$FMNIST" --set train.epochs=1 --set strategy=ddp --set ddp.backend=gloo \
  --set model.sync_batchnorm=true --set ddp.gradient_as_bucket_view=true "${SIZE[@]}"

# Your own images: the generated CIFAR set written as PNG class folders, then read back by
# image_folder, decoded at start (cache memory) and in the loader's workers (cache none).
step export_png any 120 0 '' -- "$BIN" datasets export --config "$CONFIGS/cifar10.yaml" \
  --set "data.root=$DATA/cifar" --out "$DATA/images" --format png
for cache in memory none; do
  cifar_cmd "image_folder_$cache" --set data.dataset=image_folder --set "data.root=$DATA/images" \
    --set "data.cache=$cache" --set data.num_workers=4
  step "image_folder_$cache" any "$T" 0 'Test set: ' -- "${CMD[@]}"
done
# data.decode: gpu (issue 41): the same set as JPEG class folders, read per batch (cache none),
# its JPEGs decoded by nvJPEG and augmented on the GPU; the log says the loader chose it.
step export_jpeg cuda 120 0 '' -- "$BIN" datasets export --config "$CONFIGS/cifar10.yaml" \
  --set "data.root=$DATA/cifar" --out "$DATA/jpegs" --format jpeg
cifar_cmd image_folder_decode_gpu --set data.dataset=image_folder --set "data.root=$DATA/jpegs" \
  --set data.cache=none --set data.decode=gpu --set data.num_workers=4 --set data.augment.hflip=true \
  --set data.augment.random_crop=4
step image_folder_decode_gpu cuda "$T" 0 '(?s)data\.decode: gpu for .*Test set: ' -- "${CMD[@]}"

cifar_cmd resume
step checkpoint_resume any "$T" 0 '(?s)resuming from .*"epochs":2,' -- "$BASH" "$SELF" --internal resume "$RUNS/resume" "${CMD[@]}"
# Many epochs so that the signal lands mid-run; the stop itself must write the checkpoint.
cifar_cmd sigterm --set train.epochs=100000
step sigterm any "$T" 130 'all \d+ stops stopped with 130 and their checkpoint' -- \
  "$BASH" "$SELF" --internal sigterm "$RUNS/sigterm" "${CMD[@]}"
# One hidden layer of 4M units at batch 100 000: its activations alone need 1.6 TB.
step oom cuda "$T" 1 'ran out of memory' -- "$BIN" train --config "$CONFIGS/seed_mlp.yaml" --output "$RUNS" \
  --set name=oom --set device=cuda --set train.epochs=1 --set data.samples=100000 --set data.batch_size=100000 \
  --set 'model.hidden=[4000000]'

# Fast paths: each against the same baseline with all of them explicitly off.
OFF=(--set data.device_cache=false --set train.cuda_graph=false --set train.channels_last=false
     --set train.cudnn_benchmark=false --set optim.fused=false)
cifar_cmd fast_baseline "${OFF[@]}"
step fast_baseline any "$T" 0 'Test set: ' -- "${CMD[@]}"
# The defaults: every fast path on auto, each decision logged with its reason.
cifar_cmd fast_auto
step fast_auto any "$T" 0 '(?s)optim\.fused: \w+ \(auto: .*train\.cudnn_benchmark: \w+ \(auto: .*Test set: ' -- "${CMD[@]}"
for on in data.device_cache train.channels_last train.cudnn_benchmark optim.fused; do
  name="fast_${on#*.}"
  cifar_cmd "$name" "${OFF[@]}" --set "$on=true"
  step "$name" any "$T" 0 'Test set: ' -- "${CMD[@]}"
done
# CUDA graphs need the fused optimizer and batches of one shape: off and on with those.
for graph in false true; do
  cifar_cmd "fast_cuda_graph_$graph" "${OFF[@]}" --set optim.fused=true --set data.drop_last=true \
    --set "train.cuda_graph=$graph"
  step "fast_cuda_graph_$graph" cuda "$T" 0 'Test set: ' -- "${CMD[@]}"
done
for precision in highest high; do
  cifar_cmd "fast_matmul_$precision" "${OFF[@]}" --set "train.matmul_precision=$precision"
  step "fast_matmul_$precision" any "$T" 0 "matmul_precision: $precision" -- "${CMD[@]}"
done

# Fine-tuning (issue 40): the fast recipe on five classes, then configs/fashion_mnist_finetune.yaml
# from its model.pt with the body frozen. On the GPU the step must run in the CUDA graph although
# most parameters hold no gradient, and under ddp (NCCL, one process) the frozen ones stay out of
# the gradients' sum.
step finetune_base any "$T" 0 'Test set: ' -- "$BIN" train --config "$CONFIGS/fashion_mnist_fast.yaml" \
  --output "$RUNS" --set name=finetune_base --set "device=$DEV" --set "data.root=$FMNIST" \
  --set "train.epochs=$EPOCHS" --set train.target_accuracy=0 --set 'data.keep_classes=[0,1,2,3,4]' "${SIZE[@]}"
FINETUNE=("$BIN" train --config "$CONFIGS/fashion_mnist_finetune.yaml" --output "$RUNS" --set "device=$DEV"
          --set "data.root=$FMNIST" --set "train.epochs=$EPOCHS" --set "model.init_from=$RUNS/finetune_base/model.pt"
          "${SIZE[@]}")
graph=on; [ "$DRY" = 1 ] && graph=off  # the CPU has no CUDA graph
step finetune_frozen any "$T" 0 \
  "(?s)(?=.*1 tensor skipped)(?=.*model\.freeze_batchnorm: eval)(?=.*train\.cuda_graph: $graph)(?=.*Test set: )" -- \
  "${FINETUNE[@]}" --set name=finetune_frozen
# 5.0 KiB: the head's 1,280 float32 gradients, the only ones summed.
step finetune_frozen_ddp any "$T" 0 \
  "(?s)(?=.*1 tensor skipped)(?=.*(sums|all-reduces) 5\.0 KiB of gradients)(?=.*train\.cuda_graph: $graph)(?=.*Test set: )" -- \
  env NCCL_DEBUG=WARN "${FINETUNE[@]:0:2}" --nproc 1 "${FINETUNE[@]:2}" --set name=finetune_frozen_ddp --set strategy=ddp

# The harness against the Python reference: one repetition, short. Its flags are checked in
# both modes (run.py --help needs no torch), so that a renamed flag shows in the dry run.
HARNESS_FLAGS=(--device --workloads --reps --epochs --gputrain --python --data-dir --out)
flags_regex="(?s)$(printf '(?=.*%s )' "${HARNESS_FLAGS[@]}")"
step bench_harness_flags any 60 0 "$flags_regex" -- python3 "$BENCH" --help
PY="${GPUTRAIN_PYTHON:-}"
for candidate in python3 "${XDG_CACHE_HOME:-$HOME/.cache}/gputrain/venv/bin/python"; do
  [ -n "$PY" ] && break
  if "$candidate" -c 'import torch' >/dev/null 2>&1; then PY="$(command -v "$candidate")"; fi
done
if [ "$DRY" = 1 ] && [ "${PROVE_DRY_HARNESS:-0}" != 1 ]; then
  # On 2 shared cores even the seed MLP's run takes 40-150 s: too slow for the suite.
  skip bench_harness "dry run: the CPU harness takes minutes here (PROVE_DRY_HARNESS=1 runs it on the seed MLP)"
elif [ -z "$PY" ]; then
  skip bench_harness "no python3 with torch on this machine"
elif [ ! -f "$BENCH" ]; then
  skip bench_harness "no $BENCH"
else
  if [ "$DRY" = 1 ]; then
    # the CNN workloads take minutes on a CPU: the seed MLP alone, once
    HARNESS=(--device cpu --workloads seed_mlp --reps 1 --epochs 1)
  else
    workloads=cifar_cnn,seed_mlp
    [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && workloads=cifar_cnn,fmnist_cnn,seed_mlp
    HARNESS=(--device cuda --workloads "$workloads" --reps 1 --epochs 2)
  fi
  if ! command -v git >/dev/null; then
    # run.py asks git for the commit; a bare GPU machine may have none (the bundle's BUNDLE.txt names it)
    mkdir -p "$WORK/bin"
    printf '#!/bin/sh\nexit 1\n' >"$WORK/bin/git"
    chmod +x "$WORK/bin/git"
    export PATH="$PATH:$WORK/bin"
  fi
  step bench_harness any 300 0 '^\| \w+ \| gputrain \|' -- "$PY" "$BENCH" "${HARNESS[@]}" --gputrain "$BIN" \
    --python "$PY" --data-dir "$WORK/bench-data" --out "$LOGS/bench"
fi

# ---- the report -------------------------------------------------------------------------------
python3 "$HERE/summarize.py" --steps "$WORK/steps.tsv" --logs "$LOGS" --out "$OUTDIR" --dry-run "$DRY" \
  --real-fmnist "$((1 - STANDIN))" \
  --binary "$BIN" --elapsed "$(( $(date +%s) - START ))"
tar -czf "$OUTDIR/logs.tar.gz" -C "$WORK" logs
if [ "$KEEP_LOGS" = 1 ]; then
  rm -rf "$OUTDIR/logs"
  cp -r "$LOGS" "$OUTDIR/logs"
fi
echo "prove: done in $(( $(date +%s) - START )) s; results in $OUTDIR" >&2
